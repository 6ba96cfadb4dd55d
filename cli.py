"""``fwbridge``: the command line. Thin: parse, open, print; the work is below."""

from __future__ import annotations

import sys

import click

from cli_verbs.arm import arm_group
from cli_verbs.can import can_group
from cli_verbs.codec import decode_cmd, encode_group
from cli_verbs.fish import send_action_cmd
from cli_verbs.serial import SERIAL_COMMANDS, send_group
from cli_verbs.sim import demo_cmd, sim_cmd


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.version_option(package_name="fwbridge")
@click.pass_context
def fwbridge(ctx: click.Context, debug: bool) -> None:
    """Serial and CAN links between a robot's computer and its microcontrollers."""
    ctx.obj = {"debug": debug}


fwbridge.add_command(encode_group)
fwbridge.add_command(decode_cmd)
fwbridge.add_command(can_group)
fwbridge.add_command(arm_group)
fwbridge.add_command(sim_cmd)
fwbridge.add_command(demo_cmd)
for _verb in SERIAL_COMMANDS:
    fwbridge.add_command(_verb)
send_group.add_command(send_action_cmd)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: one ``error: …`` line instead of a traceback."""
    args = sys.argv[1:] if argv is None else argv
    try:
        rc = fwbridge.main(args=args, prog_name="fwbridge", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except click.UsageError as exc:
        verb = exc.ctx.command_path.partition(" ")[2] if exc.ctx else ""
        hint = f" (see 'fwbridge {verb} --help')".replace("  ", " ")
        message = " ".join(exc.format_message().split())  # click's choice lists span lines
        click.echo(f"error: {message}{hint}", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)  # the reader (head, less) went away: not an error
    except Exception as exc:  # a bug or an unforeseen OS error: still one line
        if "--debug" in args:
            raise
        click.echo(f"error: {type(exc).__name__}: {exc} (--debug shows the traceback)", err=True)
        sys.exit(1)
    sys.exit(rc if isinstance(rc, int) else 0)


if __name__ == "__main__":
    main()
