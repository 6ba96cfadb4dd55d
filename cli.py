"""``fwbridge``: the command line. Thin: parse, open, print; the work is below.

Every command is declared here, in one registry; a verb's module (one per
verb family, in :mod:`fwbridge.cli_verbs`) is imported only when that verb
runs, so ``fwbridge encode cmd`` does not pay for numpy, python-can or the arm.
"""

from __future__ import annotations

import contextlib
import importlib
import signal
import sys
from typing import Any, NoReturn

import click

from fwbridge.cli_verbs import stopping
from fwbridge.protocols.errors import Error

#: Top-level verbs: name -> (module in fwbridge.cli_verbs, attribute, one-line help).
COMMANDS: dict[str, tuple[str, str, str]] = {
    "arm": ("arm", "arm_group", "The SCARA arm: inverse kinematics and pick and place over CAN."),
    "bridge": ("bridge_run", "bridge_cmd", "Run the mobile-base node of a robot TOML file."),
    "can": ("can", "can_group", "CAN: actuator structs on any bus, and the simulated bus."),
    "convert": ("convert", "convert_cmd", "Convert a capture to MCAP or a rosbag2 directory."),
    "decode": ("codec", "decode_cmd",
               "Decode the frames in a file or stdin (raw, hex, pcapng, MCAP)."),
    "demo": ("sim", "demo_cmd", "Drive a simulated base around a square through the bridge."),
    "encode": ("codec", "encode_group", "Build one frame and print it as hex."),
    "fish": ("fish_host", "fish_group", "The robot fish: status, configuration, firmware."),
    "fleet": ("ros2", "fleet_cmd", "N simulated bases as ROS 2 nodes /robotK, one Zenoh network."),
    "fw": ("fw", "fw_group", "The reference firmware on an emulated Cortex-M3 (QEMU)."),
    "frames": ("frames", "frames_cmd", "List the built-in and given frame descriptions."),
    "gen": ("gen", "gen_group", "Generate C, a Wireshark dissector or a DBC from descriptions."),
    "plot": ("plot", "plot_cmd", "Draw a capture: path, velocities, counters; CAN load per ID."),
    "ports": ("serial", "ports_cmd", "List serial ports with their USB vendor:product ids."),
    "record": ("serial", "record_cmd",
               "Capture the bytes arriving on a port to a pcapng or MCAP file."),
    "replay": ("serial", "replay_cmd", "Play one direction of a capture to a port, timed."),
    "ros2": ("ros2", "ros2_group", "ROS 2 over Zenoh without ROS: router, topics, echo, pub."),
    "send": ("serial", "send_group", "Send frames to a port at a steady rate."),
    "sim": ("sim", "sim_cmd", "Run a simulated robot's firmware on a new pty."),
    "sniff": ("serial", "sniff_cmd", "Decode the frames arriving on a port, with live rates."),
    "teleop": ("teleop", "teleop_cmd", "Drive the base on a port from the keyboard."),
    "wireshark": ("gen", "wireshark_group", "Install the Wireshark dissector of the captures."),
}

#: Subcommands that live in another family's module: (group, name) -> (module, attribute).
SUBCOMMANDS: dict[tuple[str, str], tuple[str, str]] = {
    ("encode", "action"): ("action", "encode_action"),
    ("send", "action"): ("fish", "send_action_cmd"),
    ("can", "sim"): ("can_sim", "sim_cmd"),
    ("can", "bus"): ("can_daemon", "bus_group"),
    ("can", "sniff"): ("can_sniff", "sniff_cmd"),
    ("can", "record"): ("can_sniff", "record_cmd"),
    ("can", "replay"): ("can_files", "replay_cmd"),
    ("can", "decode"): ("can_files", "decode_cmd"),
    ("can", "busload"): ("can_busload", "busload_cmd"),
}


def load_command(module: str, attribute: str) -> click.Command:
    """Import one verb family's module and return its command."""
    command: click.Command = getattr(importlib.import_module(f"fwbridge.cli_verbs.{module}"),
                                     attribute)
    return command


def _lazy_subcommands(command: click.Group, group: str) -> None:
    """Give ``command`` its :data:`SUBCOMMANDS`, each imported when it is asked for:
    ``fwbridge encode cmd`` does not load the action frame's module."""
    extra = {name: where for (g, name), where in SUBCOMMANDS.items()
             if g == group and name not in command.commands}
    if not extra or getattr(command, "_lazy_extra", None) is not None:
        return
    get, listing = command.get_command, command.list_commands

    def get_command(ctx: click.Context, name: str) -> click.Command | None:
        if name in extra and name not in command.commands:
            command.add_command(load_command(*extra[name]), name)
        return get(ctx, name)

    def list_commands(ctx: click.Context) -> list[str]:
        return sorted({*listing(ctx), *extra})

    command.get_command = get_command  # type: ignore[method-assign,assignment]
    command.list_commands = list_commands  # type: ignore[method-assign]
    command._lazy_extra = extra  # type: ignore[attr-defined]


class LazyGroup(click.Group):
    """A click group whose commands come from :data:`COMMANDS`, imported on use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        command = load_command(entry[0], entry[1])
        if isinstance(command, click.Group):
            _lazy_subcommands(command, cmd_name)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        # click turns a broken pipe into a silent exit 1; main() decides instead.
        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:
            raise stopping.PipeClosed(exc) from exc

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # The help lists verbs from the registry: `fwbridge --help` imports none of them.
        # (Subgroups are cli_verbs.common.Group: whole first sentences, never cut.)
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name][2]) for name in sorted(COMMANDS)])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.version_option(package_name="fwbridge")
@click.pass_context
def fwbridge(ctx: click.Context, debug: bool) -> None:
    """Serial and CAN links between a robot's computer and its microcontrollers."""
    ctx.obj = {"debug": debug}
    # The command offers sim:// wherever a port goes; the link floor names nothing of
    # the simulated firmware, which starts only when a sim:// URL is opened. Its openers
    # hand the scheme to pyserial: `fwbridge encode cmd` does not import pyserial.
    from fwbridge.bridge.sim.scheme import register

    register(pyserial=False)


class _Never(Exception):
    """Stands in for NoArgsIsHelpError on click < 8.2 (which prints the help itself)."""


#: click >= 8.2 raises this for a group given no subcommand (its message is the whole help).
_NO_ARGS_IS_HELP: type[Exception] = getattr(click.exceptions, "NoArgsIsHelpError", _Never)


def describe(exc: BaseException) -> str:
    """What went wrong, in words: the message, never the exception's class name."""
    if isinstance(exc, OSError) and exc.strerror:
        where = exc.filename if exc.filename is not None else ""
        return f"{where}: {exc.strerror}" if where else exc.strerror
    text = str(exc).strip()
    if isinstance(exc, KeyError) and exc.args:
        text = f"unknown key {exc.args[0]!r}"
    return " ".join(text.split()) or "unexpected failure"


def _say_capture_warnings() -> None:
    """Damage a capture reader got past (a ``CaptureWarning``): one ``warning: FILE: …`` line."""
    import warnings

    shown = warnings.showwarning
    said: set[str] = set()  # a file read twice (its kind, then its frames) is said once

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: Any = None, line: str | None = None) -> None:
        from fwbridge.bridge.record.damage import CaptureWarning

        if issubclass(category, CaptureWarning):
            text = " ".join(str(message).split())
            if text not in said:
                said.add(text)
                click.echo(f"warning: {text}", err=True)
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show


def _stop_on_a_failed_output() -> None:
    """An output the disk refuses (full) stops the verb as a stop signal would (its
    clean-up and summary run); :func:`_output_failed` then says it and exits 2."""
    import _thread

    from fwbridge.bridge.record import damage  # small: not the outputs' module itself

    def stop(_: Exception) -> None:
        if stopping.received() is None:
            _thread.interrupt_main(signal.SIGTERM)

    damage.on_failure = stop


def _output_failed() -> None:
    """If an output failed (a full disk): its one ``error: FILE: disk full`` line, exit 2.
    It is why the verb ended, whatever came after it."""
    from fwbridge.bridge.record.damage import failures

    failed = failures()
    if failed:
        with contextlib.suppress(OSError):
            for exc in dict.fromkeys(str(e) for e in failed):
                click.echo(f"error: {exc}", err=True)
        sys.exit(2)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: one ``error: …`` line instead of a traceback."""
    args = sys.argv[1:] if argv is None else argv
    _say_capture_warnings()
    _stop_on_a_failed_output()
    try:
        with stopping.stop_signals():  # SIGINT, SIGTERM, SIGHUP: one way to stop, every verb
            rc: Any = fwbridge.main(args=args, prog_name="fwbridge", standalone_mode=False)
    except click.exceptions.Abort:  # click's form of a KeyboardInterrupt it caught
        _output_failed()
        _stopped()
    except click.UsageError as exc:
        if isinstance(exc, _NO_ARGS_IS_HELP) and exc.ctx is not None:
            # A group alone (`fwbridge`, `fwbridge can`): its help on stdout, exit 2, as git does.
            click.echo(exc.ctx.get_help())
            sys.exit(2)
        verb = exc.ctx.command_path.partition(" ")[2] if exc.ctx else ""
        hint = f" (see 'fwbridge {verb} --help')".replace("  ", " ")
        message = " ".join(exc.format_message().split())  # click's choice lists span lines
        click.echo(f"error: {message}{hint}", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:  # fail()'s CliError, click's FileError, ...: one line
        _output_failed()
        click.echo(f"error: {' '.join(exc.format_message().split())}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        _output_failed()
        _stopped()
    except (BrokenPipeError, stopping.PipeClosed) as exc:
        if stopping.stdout_closed() or isinstance(exc, BrokenPipeError):
            stopping.silence_stdout()  # the reader (head, less) went away: not an error
            sys.exit(0)
        if "--debug" in args:
            raise
        click.echo(f"error: {exc} (--debug shows the traceback)", err=True)
        sys.exit(1)
    except Error as exc:  # raised on purpose: the user can act on it
        if "--debug" in args:
            raise
        _output_failed()
        click.echo(f"error: {describe(exc)}", err=True)
        sys.exit(2)
    except Exception as exc:  # a bug or an unforeseen OS error: still one line, no class name
        if stopping.terminal_gone(exc):  # stopped, and its terminal closed: quietly, 128 + N
            stopping.silence_stdout(stderr=True)
            sys.exit(stopping.exit_code())
        if "--debug" in args:
            raise
        _output_failed()
        click.echo(f"error: {describe(exc)} (--debug shows the traceback)", err=True)
        sys.exit(1)
    _output_failed()
    code = stopping.exit_code()  # a verb that stopped on a signal ended normally: 128 + N
    sys.exit(code if code is not None else rc if isinstance(rc, int) else 0)


def _stopped() -> NoReturn:
    """A stop signal ended the verb before it could print its summary."""
    sig = stopping.received() or signal.SIGINT
    with contextlib.suppress(OSError):
        click.echo(f"stopped by {signal.Signals(sig).name}", err=True)
    sys.exit(128 + sig)


if __name__ == "__main__":
    main()
else:  # imported: as fwbridge.cli only, never as the bare `cli` of the repository root
    from fwbridge.lazy import one_name

    one_name(__name__)
