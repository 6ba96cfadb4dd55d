"""``fwbridge gen c|wireshark|dbc`` and ``fwbridge wireshark install``: code from descriptions.

Each DESC is a built-in name (odom, cmd, action, actuator) or a description
file. Outputs are written whole or not at all (a temporary file, then a
rename), so a failed run never leaves half a file in place of a good one; an
existing output is replaced only with ``--force`` (``wireshark install``
updates its plugin file: that is what it is for).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from fwbridge.cli_verbs.common import FORCE, Group, fail, writable
from fwbridge.cli_verbs.frames import described

__all__ = ["gen_c_cmd", "gen_dbc_cmd", "gen_group", "gen_wireshark_cmd", "wireshark_group",
           "write_safely"]


def write_safely(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole (a temporary file in the same folder, then a rename),
    with the user's umask."""
    from fwbridge.bridge.record.safe_output import OutputError, write_whole

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_whole(path, text)
    except OutputError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{path}: {exc.strerror or exc}")


def _new(*paths: Path, force: bool) -> None:
    """Refuse an output that exists already (unless ``--force``), before any is written;
    a folder still to be made is fine."""
    for path in paths:
        if path.exists() or path.parent.is_dir():
            writable(str(path), "--out", force=force)


def _descs(specs: Sequence[str]) -> list[Any]:
    if not specs:
        fail("give at least one description (a built-in name or a FILE.toml)")
    descs = [described(s).desc for s in specs]
    names = [d.name for d in descs]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        fail(f"two descriptions name the frame {sorted(dup)[0]!r}: frame names must differ")
    return descs


@click.group("gen", cls=Group)
def gen_group() -> None:
    """Generate C code, a Wireshark dissector or a DBC from frame descriptions."""


@gen_group.command("c")
@click.argument("specs", nargs=-1, metavar="DESC...")
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False), required=True,
              help="Folder for the header and the source.")
@click.option("--name", default="fwframes", show_default=True,
              help="Base name of the files (NAME.h, NAME.c).")
@click.option("--prefix", default="", help="Prefix of every C name (e.g. fwg_).")
@FORCE
def gen_c_cmd(specs: tuple[str, ...], out_dir: str, name: str, prefix: str,
              force: bool) -> None:
    """C99 header and source for the frames of DESC.

    Encoders, decoders, checks, byte and chunk receivers.
    """
    import re

    from fwbridge.codegen.c import generate

    for value, what in ((name, "--name"), (prefix, "--prefix")):
        if value and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
            fail(f"{what} {value!r}: letters, digits and _ only (it names C files and symbols)")
    _new(*(Path(out_dir) / f"{name}.{ext}" for ext in ("h", "c")), force=force)
    files = generate(_descs(specs), name, prefix)
    for fname, text in files.items():
        write_safely(Path(out_dir) / fname, text)
    click.echo(f"wrote {', '.join(str(Path(out_dir) / f) for f in files)}", err=True)


@gen_group.command("wireshark")
@click.argument("specs", nargs=-1, metavar="DESC...")
@click.option("-o", "--out", "out_file", type=click.Path(dir_okay=False), default="fwbridge.lua",
              show_default=True, help="The Lua dissector file.")
@FORCE
def gen_wireshark_cmd(specs: tuple[str, ...], out_file: str, force: bool) -> None:
    """A Wireshark Lua dissector for serial captures of these frames."""
    from fwbridge.codegen.wireshark import generate

    _new(Path(out_file), force=force)
    write_safely(Path(out_file), generate(_descs(specs)))
    click.echo(f"wrote {out_file}", err=True)


@gen_group.command("dbc")
@click.argument("specs", nargs=-1, metavar="[DESC...]")
@click.option("-o", "--out", "out_file", type=click.Path(dir_okay=False),
              default="fwbridge_actuators.dbc", show_default=True, help="The DBC file.")
@FORCE
def gen_dbc_cmd(specs: tuple[str, ...], out_file: str, force: bool) -> None:
    """A DBC for CAN payload descriptions (default: the actuator struct)."""
    from fwbridge.codegen.dbc import generate

    _new(Path(out_file), force=force)
    try:
        text = generate(_descs(specs or ("actuator",)))
    except ValueError as exc:
        fail(str(exc))
    write_safely(Path(out_file), text)
    click.echo(f"wrote {out_file}", err=True)


@click.group("wireshark", cls=Group)
def wireshark_group() -> None:
    """Wireshark: install the dissector of fwbridge's serial captures."""


PLUGIN_DIR = Path("~/.local/lib/wireshark/plugins")


@wireshark_group.command("install")
@click.argument("specs", nargs=-1, metavar="[DESC...]")
@click.option("--dir", "plugin_dir", type=click.Path(file_okay=False), default=None,
              help=f"Plugin folder (default {PLUGIN_DIR}).")
def wireshark_install_cmd(specs: tuple[str, ...], plugin_dir: str | None) -> None:
    """Put fwbridge.lua in the user's Wireshark plugin folder.

    It dissects the built-in frames and those of DESC.
    """
    from fwbridge.codegen.lua_check import check_plugin
    from fwbridge.codegen.wireshark import generate
    from fwbridge.protocols.builtin_frames import BUILTIN_NAMES

    names = [n for n in BUILTIN_NAMES if n != "actuator"]
    target = Path(plugin_dir).expanduser() if plugin_dir else PLUGIN_DIR.expanduser()
    path = target / "fwbridge.lua"
    text = generate(_descs([*names, *specs]))
    check_plugin(text)  # a plugin that does not load would replace a working one
    write_safely(path, text)
    click.echo(f"installed {path} (restart Wireshark, or Analyze > Reload Lua Plugins)",
               err=True)
