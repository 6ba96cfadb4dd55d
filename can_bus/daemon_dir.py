"""Where shared buses live: the user's private runtime directory, each bus's socket and
its JSON description (``NAME.sock``, ``NAME.json``), read bounded and checked key by key.

The daemon (:mod:`can_bus.daemon`) writes them; ``bus list``, ``attach`` and a node
(:mod:`can_bus.daemon_client`) find a running bus through them: a bus is running when
its socket answers.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import stat
import tempfile
from pathlib import Path
from typing import Any

from can import CanInitializationError

from fwbridge.can_bus.simchannel import SimBusInitError
from fwbridge.protocols.errors import needs_posix

__all__ = ["MAX_INFO", "BusInfoError", "attachable", "channel_socket", "daemon_info",
           "list_daemons", "runtime_dir", "valid_name"]

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def valid_name(name: str) -> bool:
    return bool(_NAME.match(name)) and name not in (".", "..")


def runtime_dir(create: bool = False) -> Path:
    """Where daemons put their sockets: ``$FWBRIDGE_RUNTIME_DIR``, else
    ``$XDG_RUNTIME_DIR/fwbridge``, else ``/tmp/fwbridge-<uid>``; private (0700, ours).
    Where Python has no Unix-domain sockets (Windows) there is no shared bus: refused."""
    if not hasattr(socket, "AF_UNIX"):
        raise SimBusInitError(needs_posix(
            "the shared bus daemon (it serves on a Unix-domain socket); a simulated bus of "
            "one process (interface='fwbridge', channel sim0) works everywhere"))
    env = os.environ.get("FWBRIDGE_RUNTIME_DIR")
    if env:
        d = Path(env)
    elif os.environ.get("XDG_RUNTIME_DIR"):
        d = Path(os.environ["XDG_RUNTIME_DIR"]) / "fwbridge"
    else:
        d = Path(tempfile.gettempdir()) / f"fwbridge-{os.getuid()}"
    if create:
        d.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            d.mkdir(mode=0o700)
    try:
        st = os.lstat(d)  # never through a link: one planted in /tmp would be followed
    except FileNotFoundError:
        return d
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise SimBusInitError(f"{d} is not a directory (a link or a file): refused; remove it"
                              " or set XDG_RUNTIME_DIR")
    if st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o077:
        raise SimBusInitError(f"{d} is not a private directory of this user "
                              "(owner and mode 0700 expected)")
    return d


def channel_socket(name: str) -> Path:
    return runtime_dir() / f"{name}.sock"


#: The longest bus description read: a few keys, and a line per node that lost frames.
MAX_INFO = 1 << 20

#: Keys of a bus description the readers use, and what each must be (a type, or a check).
_INFO_KEYS: dict[str, Any] = {
    "name": str, "pid": lambda v: type(v) is int and v > 0,
    "bitrate": lambda v: type(v) is int and v > 0,
    "data_bitrate": lambda v: v is None or (type(v) is int and v > 0), "pacing": str,
}
_INFO_OPTIONAL: dict[str, Any] = {
    "socketcand": str, "max_clients": int, "queue_budget": int, "queued": int,
    "queued_peak": int, "refused": int,
    "not_listening": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
    "dropped": lambda v: isinstance(v, dict) and all(type(x) is int for x in v.values()),
}


class BusInfoError(SimBusInitError):
    """A running bus's description file is not one (too large, too deep, not JSON, a key
    missing or of the wrong type): names the file."""


def _fits(check: Any, v: Any) -> bool:
    return bool(isinstance(v, check) and not isinstance(v, bool) if isinstance(check, type)
                else check(v))


def _read_info(path: Path, name: str) -> dict[str, Any]:
    """The description in ``path``, bounded in bytes and nesting and checked key by key;
    OSError when it cannot be opened (gone), else :class:`BusInfoError`."""
    from fwbridge.protocols.config_text import TextLimitError, parse_json_bytes, read_limited

    # O_NONBLOCK: a FIFO left in its place must not hang the reader; O_NOFOLLOW: no link
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise BusInfoError(f"{path}: not a regular file")
            info = parse_json_bytes(read_limited(fh.read, str(path), MAX_INFO), str(path),
                                    MAX_INFO)
        except TextLimitError as exc:
            raise BusInfoError(f"{path}: {exc.reason}") from None
        except ValueError as exc:  # not UTF-8, not JSON
            raise BusInfoError(f"{path}: not JSON: {' '.join(str(exc).split())[:200]}") from None
    if not isinstance(info, dict):
        raise BusInfoError(f"{path}: a JSON object expected, not {type(info).__name__}")
    for key, check in _INFO_KEYS.items():
        if key not in info or not _fits(check, info[key]):
            raise BusInfoError(f"{path}: {key!r} missing or of the wrong type")
    for key, check in _INFO_OPTIONAL.items():
        if key in info and not _fits(check, info[key]):
            raise BusInfoError(f"{path}: {key!r} of the wrong type")
    if info["name"] != name:
        raise BusInfoError(f"{path}: describes the bus {info['name'][:64]!r}, not {name!r}")
    return info


def _answers(sock_path: Path) -> bool:
    """A daemon accepts on ``sock_path`` (a socket left by one that is gone refuses)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(1.0)
            s.connect(str(sock_path))
    except OSError:
        return False
    return True


def daemon_info(name: str) -> dict[str, Any] | None:
    """The daemon ``name``'s description if it is running (its socket answers), else None.

    A description left behind by a daemon that is gone is as none; a running bus's that is
    damaged (too large, nested too deeply, not JSON, not its keys) is a
    :class:`BusInfoError` naming the file: nobody else can say which process serves it."""
    try:
        path = runtime_dir() / f"{name}.json"
    except CanInitializationError:
        return None
    damaged: BusInfoError | None = None
    try:
        info = _read_info(path, name)
    except OSError:
        return None
    except BusInfoError as exc:
        damaged = exc
    if not _answers(path.with_suffix(".sock")):
        return None
    if damaged is not None:
        raise BusInfoError(f"{damaged}; the bus's socket answers: stop its daemon by hand, "
                           "then remove the file")
    return info


def attachable(name: str) -> bool:
    """A daemon serves the channel ``name`` (its socket answers)."""
    if not valid_name(name):
        return False
    try:
        path = runtime_dir() / f"{name}.sock"
    except CanInitializationError:
        return False
    return path.exists() and _answers(path)


def list_daemons(*, strict: bool = True) -> list[dict[str, Any]]:
    """The running buses' descriptions; a damaged one raises :class:`BusInfoError`, or
    (``strict=False``: a scan for channels) is left out."""
    try:
        d = runtime_dir()
    except CanInitializationError:
        return []
    if not d.is_dir():
        return []
    found = []
    for p in sorted(d.glob("*.json")):
        try:
            found.append(daemon_info(p.stem))
        except BusInfoError:
            if strict:
                raise
    return [i for i in found if i is not None]
