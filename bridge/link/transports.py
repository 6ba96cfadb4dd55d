"""Open serial links by URL, and pty pairs that stand in for devices.

A link is a pyserial object: a device path (``/dev/ttyUSB0``, ``COM3``) or a
pyserial URL whose scheme is on the allow-list of :mod:`~fwbridge.bridge.link.link_urls`
(``socket://host:port``, ``loop://``, ``rfc2217://host:port``, ``sim://MODEL?opts``,
or a scheme registered in code with :func:`register_url_handler`); ``spy://``,
``alt://`` and ``hwgrep://`` are refused. ``sim://`` is served once the program
offers it (``fwbridge.bridge.sim.register()``, which the ``fwbridge`` command
calls): this floor imports nothing of the simulated firmware. Nothing is
registered with pyserial at import: :func:`register_url_handlers` does it, and
every opener here calls it.
Transports only move bytes; the receivers of ``protocols`` turn them into
frames.

URL handlers follow pyserial's ``protocol_handler_packages`` mechanism: the
package ``P`` registered for scheme ``s`` provides ``P.protocol_s`` with a
``Serial`` class (a ``serial.SerialBase`` subclass, or a
``serial_class_for_url(url)`` function). The blocking bridge runtime needs
from it: ``read(n)`` honouring ``timeout``, ``in_waiting``, ``write``,
``close``, and reads and writes from two threads at once; ``cancel_read`` is
used when present. The asyncio path additionally needs ``fileno()``.

Opening errors become :class:`LinkError` subclasses whose message says how to
fix the problem (the dialout group, the ports that do exist, who holds a busy
port).
"""

from __future__ import annotations

import errno
import importlib
import importlib.util
import os
import select
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import serial
from serial.tools import list_ports

from fwbridge.bridge.link.link_urls import (
    OFFERED_SCHEMES,
    URL_HANDLERS,
    UnsafeURLError,
    check_link_url,
    register_url_handler,
    url_scheme,
)
from fwbridge.protocols.errors import LinkError, StateError, needs_posix

if TYPE_CHECKING:  # asyncio loads in the asyncio path only: the blocking node starts faster
    import asyncio

__all__ = [
    "URL_HANDLERS",
    "LinkBusy",
    "LinkError",
    "LinkLost",
    "LinkNotFound",
    "LinkPathTaken",
    "LinkPermissionDenied",
    "LinkURLError",
    "PortError",
    "PtyPair",
    "available_ports",
    "claim_pty_link",
    "classify_open_error",
    "drop_backlog",
    "open_async_streams",
    "open_link",
    "poller_for",
    "read_some",
    "register_url_handler",
    "register_url_handlers",
    "url_scheme",
    "writer_for",
]

#: The exceptions a link raises when its device goes away mid-session.
IO_ERRORS = (serial.SerialException, OSError)

READ_MAX = 4096


class PortError(LinkError, serial.SerialException):  # type: ignore[misc]  # pyserial ships no hints
    """A port failed as pyserial reports it (a ``SerialException``), raised by fwbridge."""


class LinkPathTaken(LinkError, FileExistsError):
    """A ``--link`` path that is the user's, or another program's: never replaced."""


class LinkNotFound(LinkError):
    """No such device (unplugged, wrong name)."""


class LinkPermissionDenied(LinkError):
    """The device exists but this user may not open it."""


class LinkBusy(LinkError):
    """Another program holds the device."""


class LinkURLError(LinkError):
    """The URL's scheme is not allowed or has no handler here."""


class LinkLost(LinkError):
    """The device went away while open (unplugged, pty closed)."""


def register_url_handlers() -> None:
    """Make ``serial.serial_for_url`` serve every scheme of :data:`URL_HANDLERS`.

    The one place fwbridge touches pyserial's ``protocol_handler_packages``;
    idempotent. :func:`open_link` and :func:`open_async_streams` call it.
    """
    for package in URL_HANDLERS.values():
        _install(package)


def _install(package: str) -> None:
    if package not in serial.protocol_handler_packages:
        serial.protocol_handler_packages.append(package)


def _builtin_scheme(scheme: str) -> bool:
    return importlib.util.find_spec(f"serial.urlhandler.protocol_{scheme}") is not None


def _ensure_handler(scheme: str) -> None:
    """Make pyserial find ``scheme``'s handler; fail with a clear message if absent.

    The handler module is imported here first because pyserial swallows its
    ImportError and reports only "protocol not known".
    """
    package = URL_HANDLERS.get(scheme)
    if package is None:
        if scheme in OFFERED_SCHEMES:
            raise LinkURLError(f"'{scheme}://' URLs are not offered by this program "
                               f"({OFFERED_SCHEMES[scheme]})")
        if _builtin_scheme(scheme):
            return
        raise LinkURLError(f"'{scheme}://' URLs are not available here (pyserial lacks them)")
    module = f"{package}.protocol_{scheme}"
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and (module.startswith(exc.name + ".") or exc.name == module):
            raise LinkURLError(
                f"'{scheme}://' URLs are served by {module}, which is not available here"
            ) from None
        raise
    register_url_handlers()


def available_ports() -> list[str]:
    """Serial ports present now, as ``device (USB vid:pid, description)`` strings."""
    out = []
    for port in sorted(list_ports.comports(), key=lambda p: p.device):
        usb = f"USB {port.vid:04x}:{port.pid:04x}, " if port.vid is not None else ""
        desc = port.description if port.description not in ("n/a", port.device) else ""
        extra = f"{usb}{desc}".rstrip(", ")
        out.append(f"{port.device} ({extra})" if extra else port.device)
    return out


def classify_open_error(url: str, exc: BaseException) -> LinkError:
    """Turn pyserial's open error into a LinkError that names the fix."""
    code = getattr(exc, "errno", None)
    text = str(exc)
    if code in (errno.EACCES, errno.EPERM):
        return LinkPermissionDenied(
            f"permission denied opening {url}: add your user to the dialout group with "
            f"'sudo usermod -aG dialout $USER' and log in again "
            f"(for a one-off test: sudo chmod 666 {url})"
        )
    if code in (errno.ENOENT, errno.ENODEV, errno.ENXIO):
        ports = available_ports()
        where = (
            f"serial ports here: {', '.join(ports[:8])}"
            if ports
            else "no serial ports found: is the board plugged in and powered? "
            "(check 'dmesg | grep tty')"
        )
        return LinkNotFound(f"no such device {url}; {where}")
    if code == errno.EBUSY or (code in (errno.EAGAIN, errno.EWOULDBLOCK) and "lock" in text):
        return LinkBusy(
            f"{url} is busy: another program has it open (find it with 'fuser {url}'; "
            "close serial monitors, ModemManager or another fwbridge)"
        )
    if code == errno.ENOTTY or "Inappropriate ioctl" in text:  # pyserial drops the errno here
        return LinkError(f"{url} is not a serial device")
    return LinkError(f"cannot open {url}: {text}")


def open_link(
    url: str,
    baud: int = 115200,
    *,
    timeout: float | None = 0.1,
    write_timeout: float | None = 1.0,
    exclusive: bool = True,
) -> serial.SerialBase:
    """Open a device path or pyserial URL; raise a :class:`LinkError` that names the fix.

    ``timeout`` bounds each read (so reader threads can notice a stop);
    ``write_timeout`` keeps a stalled device from blocking a writer forever.
    ``exclusive`` takes pyserial's flock so a second program gets "busy"
    instead of half the bytes. A URL's scheme must be on the allow-list
    (:func:`~fwbridge.bridge.link.link_urls.check_link_url`).
    """
    try:
        scheme = check_link_url(url)
    except UnsafeURLError as exc:
        raise LinkURLError(str(exc)) from None
    kwargs: dict[str, Any] = {"baudrate": baud, "timeout": timeout, "write_timeout": write_timeout}
    if scheme is None:
        kwargs["exclusive"] = exclusive
    else:
        _ensure_handler(scheme)
    try:
        return serial.serial_for_url(url, **kwargs)
    except ValueError as exc:
        raise LinkError(f"cannot open {url}: {exc}") from None
    except (serial.SerialException, OSError) as exc:
        raise classify_open_error(url, exc) from None


#: Dropping a just-opened port's backlog (:func:`drop_backlog`): one look every SETTLE s,
#: dropping what came while a look finds a burst (a buffer emptying: a pty's or a device's
#: FIFO pushing what it held the moment the kernel's queue has room), at most MAX s. A
#: live line brings less per look (1 Mbit/s: 1.5 KB), and is kept.
BACKLOG_SETTLE = 0.015
BACKLOG_MAX = 0.5
BACKLOG_BURST = 2048


def drop_backlog(link: serial.SerialBase, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> int:
    """Discard what a just-opened port holds from before it was opened; the count.

    Opening empties the kernel's input queue (pyserial flushes it), but what the
    other side held back while that queue was full (a simulator's or a
    device's FIFO) arrives right after, all at once: without this a capture
    starts with kilobytes of stale bytes and a frame cut where the FIFO
    overflowed. ``sim://`` ports have no past: nothing is read from them.
    """
    if str(getattr(link, "portstr", "") or getattr(link, "port", "")).startswith("sim://"):
        return 0
    start = clock()
    dropped = 0
    while clock() - start < BACKLOG_MAX:
        sleep(BACKLOG_SETTLE)
        waiting = link.in_waiting
        if waiting < BACKLOG_BURST:
            break  # a trickle: the other side talking now, kept
        dropped += len(link.read(waiting))
    return dropped


def read_some(link: serial.SerialBase, limit: int = READ_MAX) -> bytes:
    """What the link has now, waiting up to its ``timeout`` for the first byte.

    Empty on timeout. Raises ``SerialException``/``OSError`` when the device
    is gone (a disconnected tty reads as ready with no data).
    """
    waiting = link.in_waiting
    data: bytes = link.read(min(waiting, limit) if waiting else 1)
    if data and not waiting:
        more = link.in_waiting
        if more:
            data += link.read(min(more, limit - 1))
    return data


def poller_for(link: serial.SerialBase, limit: int = READ_MAX) -> Callable[[float], bytes] | None:
    """For a native POSIX port: ``read(timeout)`` -> what arrived within ``timeout`` s.

    One ``select`` and one ``os.read`` per call (pyserial's ``read`` adds a
    size loop, an ioctl and a second read per chunk: at 200 frames/s that is
    a measurable share of a node's CPU), and the timeout varies per call
    without touching the port's settings. ``cancel_read`` still wakes it;
    a vanished device raises ``SerialException`` as pyserial does. A URL
    handler's port that waits on its own (``poller(limit)``: ``sim://``) gives
    its own. None for other links: use :func:`read_some`.
    """
    own = getattr(link, "poller", None)
    if callable(own):
        read_own: Callable[[float], bytes] | None = own(limit)
        return read_own
    posix = getattr(serial, "serialposix", None)
    if posix is None or type(link) is not posix.Serial or not link.is_open:
        return None
    fd: int = link.fileno()
    abort: int = link.pipe_abort_read_r
    poller = select.poll()  # registered once: no fd sets built per call, unlike select()
    poller.register(fd, select.POLLIN)
    poller.register(abort, select.POLLIN)

    def read(timeout: float) -> bytes:
        ready = poller.poll(timeout * 1000.0)
        if not ready:
            return b""
        for which, _ in ready:
            if which == abort:
                os.read(abort, 1000)
                return b""
        try:
            data = os.read(fd, limit)
        except BlockingIOError:
            return b""  # the port is non-blocking: a spurious wake-up
        except OSError as exc:
            raise PortError(f"read failed: {exc}") from exc
        if not data:  # what a disconnected tty does
            raise PortError(
                "device reports readiness to read but returned no data (device disconnected?)"
            )
        return data

    return read


def writer_for(link: serial.SerialBase) -> Callable[[bytes], object]:
    """``link.write``, or for a native POSIX port one ``os.write`` when it takes it all.

    pyserial's write waits in ``select`` after every write when a write
    timeout is set; a 15-byte frame into an idle UART never needs that, so
    only a short write falls back to pyserial (its timeout then applies).
    """
    posix = getattr(serial, "serialposix", None)
    if posix is None or type(link) is not posix.Serial or not link.is_open:
        plain: Callable[[bytes], object] = link.write
        return plain
    fd: int = link.fileno()

    def write(data: bytes) -> None:
        try:
            done = os.write(fd, data)
        except BlockingIOError:
            done = 0
        except OSError as exc:
            raise PortError(f"write failed: {exc}") from exc
        if done < len(data):
            link.write(data[done:])

    return write


async def open_async_streams(
    url: str, baud: int = 115200, **kwargs: Any
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """asyncio streams on a device or pty, through pyserial-asyncio.

    pyserial-asyncio polls the link's file descriptor, so URL handlers
    without one (``loop://``) are refused with a clear error.
    """
    import asyncio

    import serial_asyncio

    link = open_link(url, baud, **kwargs)
    try:
        check_pollable(link)
    except LinkError:
        link.close()
        raise
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(loop=loop)
    protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
    transport, _ = await serial_asyncio.connection_for_serial(loop, lambda: protocol, link)
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)


def check_pollable(link: serial.SerialBase) -> None:
    """Raise :class:`LinkError` unless asyncio can poll ``link``'s descriptor."""
    try:
        link.fileno()
    except (AttributeError, NotImplementedError, OSError, serial.SerialException):
        raise LinkError(
            f"{link.port}: the asyncio path needs a file descriptor (a device or pty); "
            "use the blocking runtime for this URL"
        ) from None


def _points_at(link: Path, target: str) -> bool:
    try:
        return bool(target) and os.readlink(link) == target
    except OSError:
        return False


def claim_pty_link(link: Path) -> None:
    """Refuse a ``link`` path that holds something other than a stale pty symlink.

    Only a missing path, or a symlink to a ``/dev/pts/N`` (macOS: ``/dev/ttysN``) that
    no longer exists (left by a process that was killed), may be replaced: never a
    user's file, and never a link to a pty that is in use, which may belong
    to another simulation or, after its number was reused, to a terminal.
    """
    if not os.path.lexists(link):
        return
    if not link.is_symlink():
        raise LinkPathTaken(f"{link} exists and is not a symlink: refusing to replace it "
                              "(choose another path)")
    target = os.readlink(link)
    if not target.startswith(("/dev/pts/", "/dev/ttys")):  # Linux's ptys, macOS's
        raise LinkPathTaken(f"{link} is a symlink to {target}, not to a pty: refusing to "
                              "replace it (choose another path)")
    if os.path.exists(target):
        raise LinkPathTaken(f"{link} points at {target}, which is in use (another simulation?"
                              "): refusing to take it over (remove the link if it is stale)")


class PtyPair:
    """A pseudo-terminal pair: the master side plays the device, the slave is its port.

    ``path`` is what a program opens: the slave's ``/dev/pts/N``, or
    ``link`` (a symlink kept pointing at the current slave, as udev keeps
    ``/dev/serial/by-id/...``), so :meth:`unplug` and :meth:`plug` behave
    like pulling and reinserting a USB adapter. The pair keeps one slave
    descriptor open itself, in raw mode, so the master never reads EIO while
    no program has the port open and no byte is echoed or translated.
    ``hold=False`` closes it once raw mode is set (the pty keeps the mode for
    the next opener): the master then hangs up while no program has the port
    open, which tells a relay that no one listens.
    """

    def __init__(self, link: str | os.PathLike[str] | None = None, *,
                 hold: bool = True) -> None:
        self.link = Path(link) if link is not None else None
        self.hold = hold
        self.master_fd = -1
        self._slave_fd = -1
        self.slave_name = ""
        if self.link is not None:
            claim_pty_link(self.link)
        self.plug()

    @property
    def path(self) -> str:
        """The port to open: the symlink when there is one, else the slave device."""
        return str(self.link) if self.link is not None else self.slave_name

    @property
    def plugged(self) -> bool:
        return self.master_fd >= 0

    def plug(self) -> None:
        """Create a fresh pair (and point the symlink at it)."""
        if self.plugged:
            raise StateError("pty pair is already plugged in")
        try:
            import pty  # POSIX only: imported here so the module still loads on Windows
            import tty
        except ImportError:
            raise LinkError(needs_posix(
                "a pty pair (a simulated port); elsewhere use a real serial port, or a pair "
                "of virtual ones (com0com on Windows)")) from None

        master, slave = pty.openpty()
        tty.setraw(slave)
        self.master_fd = master
        self.slave_name = os.ttyname(slave)
        if self.hold:
            self._slave_fd = slave
        else:
            os.close(slave)
        if self.link is not None:
            tmp = self.link.with_name(f".{self.link.name}.{os.getpid()}.new")
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(self.slave_name)
            tmp.replace(self.link)  # atomic: an opener never sees a missing link mid-plug

    def unplug(self) -> None:
        """Close both sides: programs holding the port see it vanish."""
        if self.link is not None and _points_at(self.link, self.slave_name):
            self.link.unlink(missing_ok=True)  # ours only: not what replaced it since
        for fd in (self.master_fd, self._slave_fd):
            if fd >= 0:
                os.close(fd)
        self.master_fd = self._slave_fd = -1

    def replug(self) -> None:
        self.unplug()
        self.plug()

    def close(self) -> None:
        self.unplug()

    def __enter__(self) -> PtyPair:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the device side (master) -------------------------------------------
    def read(self, limit: int = READ_MAX, timeout: float | None = None) -> bytes:
        """Bytes the port's user wrote; empty after ``timeout`` seconds without any."""
        ready, _, _ = select.select([self.master_fd], [], [], timeout)
        if not ready:
            return b""
        return os.read(self.master_fd, limit)

    def write(self, data: bytes) -> None:
        """Send ``data`` to the port's user, all of it."""
        view = memoryview(data)
        while view:
            view = view[os.write(self.master_fd, view) :]
