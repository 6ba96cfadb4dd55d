"""``--help`` of every group and verb, as a person reads it: plain text, whole sentences.

click renders docstrings as they are: reST markup (double backticks) shows literally,
and a group's listing cuts each command's first sentence with "..." at a width that
depends on the terminal. Every help is rendered here at a narrow and a wide window.
"""

from __future__ import annotations

import inspect

import click
import pytest
from click.testing import CliRunner

from fwbridge.cli import COMMANDS, fwbridge
from tests.layout import cli_commands

COMMAND_PATHS = [path for path, _ in cli_commands()]


def first_sentence(help_text: str) -> str:
    """The first paragraph's words up to the first one that ends in a full stop."""
    words = inspect.cleandoc(help_text).partition("\n\n")[0].replace("\b", " ").split()
    for i, word in enumerate(words):
        if word.endswith("."):
            return " ".join(words[: i + 1])
    return " ".join(words)


def listing(help_page: str) -> dict[str, str]:
    """The Commands section of a help page: name -> its text, wrapped lines joined."""
    rows: dict[str, str] = {}
    lines = help_page.partition("\nCommands:\n")[2].splitlines()
    name = ""
    for line in lines:
        if not line.startswith("  "):
            break
        if line[2] != " ":  # a new row: "  name  text"
            name, _, text = line.strip().partition(" ")
            rows[name] = text.strip()
        else:  # its text, wrapped
            rows[name] = f"{rows[name]} {line.strip()}"
    return rows


def render(path: list[str], width: int) -> str:
    res = CliRunner().invoke(fwbridge, [*path, "--help"], terminal_width=width,
                             prog_name="fwbridge")
    assert res.exit_code == 0, (path, res.output)
    return res.output


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=lambda p: " ".join(p) or "fwbridge")
@pytest.mark.parametrize("width", [60, 120])
def test_help_is_plain_text(path: list[str], width: int) -> None:
    page = render(path, width)
    assert "``" not in page, page  # reST markup, shown literally
    assert "\b" not in page and ":class:" not in page and ":func:" not in page, page


def test_group_listings_give_whole_sentences() -> None:
    groups = [(path, cmd) for path, cmd in cli_commands() if isinstance(cmd, click.Group)]
    assert len(groups) >= 10
    for path, group in groups:
        for width in (60, 120):
            rows = listing(render(path, width))
            assert rows, path
            for name, text in rows.items():
                where = f"fwbridge {' '.join(path)} --help, {name} (width {width})"
                assert not text.endswith("..."), where  # cut short
                assert text.endswith((".", ")")), (where, text)
                if not path:  # the top level lists the registry's one-liners
                    assert text == COMMANDS[name][2], where
                    continue
                sub = group.get_command(click.Context(group), name)
                assert sub is not None
                whole = sub.short_help or first_sentence(sub.help or "")
                assert text == whole, (where, text, whole)


def test_a_sentence_that_click_would_cut_is_found() -> None:
    """The checks above would see the cut: click's own listing, at its default width."""
    cmd = click.Command("x", help="Print the messages on TOPIC (an absolute name, e.g. "
                                  "/robot1/odom), decoded.")
    cut = cmd.get_short_help_str(45)
    assert cut.endswith("...") or cut != first_sentence(cmd.help or "")
