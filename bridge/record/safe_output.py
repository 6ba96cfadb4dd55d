"""Outputs that never destroy what is already there.

A verb that writes a file checks the path before its run (:func:`check_writable`:
one clear error instead of a failure after minutes of work; an existing file
is refused unless the user asked to replace it) and does not truncate an
existing file until its input works: :class:`PendingFile` writes beside the
target and moves itself over it (an atomic rename, the stream stays open) once
the run has started, or removes itself when the start fails;
:func:`write_whole` (:func:`write_with`) puts a generated text (a plot) in
place whole; :func:`open_output` opens a file written in place (a recording
that grows; :func:`prepare` for a library that opens the path itself). A
symbolic link at the path is never written through: it is refused like any
existing file (a dangling one too), and with ``--force`` the link is
replaced, its target left as it was. New files get the user's umask, as a
plain ``open()`` makes them. A write the disk refuses is ``FILE: disk full``
(:func:`disk_error`): raised by the whole-file writers, noted once by a file
written in place (:class:`OutputFile`), which is cut back to its last whole
write.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, cast

from fwbridge.bridge.record.damage import output_failed
from fwbridge.protocols.errors import CaptureError

__all__ = ["OutputError", "OutputFile", "PendingFile", "check_writable", "disk_error",
           "open_output", "prepare", "write_whole", "write_with"]


class OutputError(CaptureError):
    """An output path that cannot be written; the message names it and why."""


def check_writable(path: str | os.PathLike[str], *, replace: bool = True) -> Path:
    """``path`` as a Path if a file can be created (or, with ``replace``, replaced) there;
    else OutputError."""
    p = Path(path)
    parent = p.parent
    link = p.is_symlink()
    if p.is_dir():
        raise OutputError(f"{p}: is a directory, not a file")
    if not parent.is_dir():
        raise OutputError(f"{p}: no such directory {str(parent)!r}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{p}: cannot create files in {str(parent)!r} (permission denied)")
    if os.path.lexists(p) and not replace:  # a link, dangling or not, is there too
        if link:
            raise OutputError(f"{p}: exists already (a symbolic link); give a new name, or "
                              "--force to replace the link (never its target)")
        raise OutputError(f"{p}: exists already; give a new name, or --force to replace it")
    if p.exists() and not link and not os.access(p, os.W_OK):
        raise OutputError(f"{p}: permission denied")
    return p


#: The write errors that mean no room: said by these words.
_NO_ROOM = {errno.ENOSPC: "disk full", errno.EDQUOT: "disk quota exceeded",
            errno.EFBIG: "file too large"}


def disk_error(path: str | os.PathLike[str], exc: OSError) -> OutputError:
    """The one error for a write that failed: ``FILE: disk full`` and the like."""
    why = _NO_ROOM.get(exc.errno or 0, exc.strerror or str(exc))
    return OutputError(f"{os.fspath(path)}: {why}")


_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(
    os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)  # Windows: no newline translation


class OutputFile(io.RawIOBase):
    """A file written in place whose write errors are one :class:`OutputError` naming it.

    Writes are kept whole: each ``write`` is buffered (up to ``buffer`` bytes)
    and written out together. When the disk refuses (full, quota, size limit)
    the file is cut back to the end of the last write that reached it whole
    and closed, so it reads up to there (a capture's last whole record);
    ``FILE: disk full`` goes to :func:`~fwbridge.bridge.record.damage.output_failed`, and
    later writes are dropped: a recorder on any thread goes on without a
    traceback, and its verb ends with that one error line. Safe to share between
    threads: a run publishes (flushes) the file while its reader thread records.
    """

    def __init__(self, fd: int, path: Path, buffer: int = 8192) -> None:
        super().__init__()
        self._fd: int | None = fd
        self.path = path
        self.failed: OutputError | None = None
        self._buf = bytearray()
        self._limit = buffer
        self._durable = 0  # bytes on disk, each write whole
        self._pos = 0  # where the buffer goes (the file's offset)
        # reentrant: close() flushes, seek() flushes, under the same lock
        self._lock = threading.RLock()

    @property
    def name(self) -> str:
        return str(self.path)

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True  # python-can's BLF writer puts its header in at the end

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        with self._lock:
            self.flush()
            if self._fd is None:
                return self._pos if self.failed is not None else self.fileno()
            self._pos = os.lseek(self._fd, offset, whence)
            return self._pos

    def tell(self) -> int:
        with self._lock:
            return self._pos + len(self._buf)

    def fileno(self) -> int:
        if self._fd is None:
            raise OutputError(f"{self.path}: I/O operation on a closed file")
        return self._fd

    def write(self, data: Any) -> int:
        with self._lock:
            if self.failed is not None:
                return len(data)  # the file ends at its cut; noted once (damage.failures())
            if self._fd is None:
                raise OutputError(f"{self.path}: write to a closed file")
            self._buf += data
            if len(self._buf) >= self._limit:
                self._drain()
            return len(data)

    def flush(self) -> None:
        with self._lock:
            if self._buf and self._fd is not None:  # after a failure nothing is left to write
                self._drain()

    def _drain(self) -> None:
        # the buffer is taken whole before writing: a view of it never blocks a resize
        pending, self._buf = self._buf, bytearray()
        done = 0
        with memoryview(pending) as view:
            try:
                while done < len(view):
                    done += os.write(self.fileno(), view[done:])
            except OSError as exc:
                self._fail(exc)
                return
        self._pos += done
        self._durable = max(self._durable, self._pos)

    def _fail(self, exc: OSError) -> None:
        """Cut back to the last whole write, close, and note it once (``damage.failures()``)."""
        self.failed = disk_error(self.path, exc)
        fd, self._fd = self._fd, None
        self._buf.clear()
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, self._durable)  # a write that got in part: cut back
            with contextlib.suppress(OSError):
                os.close(fd)
        output_failed(self.failed)

    def close(self) -> None:
        with self._lock:
            try:
                self.flush()
            finally:
                if self._fd is not None:
                    fd, self._fd = self._fd, None
                    os.close(fd)
                super().close()


def open_output(path: str | os.PathLike[str]) -> IO[bytes]:
    """``path`` opened for writing from its start, never through a symbolic link (the link
    is replaced by a new file; its target stays as it was), as an :class:`OutputFile`.
    Checked before by :func:`check_writable`. Raises OutputError."""
    p = Path(path)
    try:
        if not hasattr(os, "O_NOFOLLOW") and p.is_symlink():  # Windows: open() would follow
            p.unlink()
        try:
            fd = os.open(p, _FLAGS, 0o666)
        except OSError as exc:
            if exc.errno != errno.ELOOP or not p.is_symlink():
                raise
            p.unlink()  # the link goes; a file is made in its place, never in its target
            fd = os.open(p, _FLAGS | os.O_EXCL, 0o666)
    except OSError as exc:
        raise OutputError(f"{p}: cannot be written: {exc.strerror or exc}") from None
    return cast("IO[bytes]", OutputFile(fd, p))


def prepare(path: str | os.PathLike[str]) -> Path:
    """An empty new file at ``path`` (:func:`open_output`'s rules) for a library that opens
    the path itself (python-can's writers): a link there is gone first."""
    open_output(path).close()
    return Path(path)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _new_beside(path: Path, suffix: str = ".partial") -> tuple[int, Path]:
    """A new file next to ``path`` (same folder: the rename stays atomic), mode per umask."""
    import tempfile  # here: the command line imports this module at start

    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    except OSError as exc:
        raise OutputError(f"{path}: cannot be written: {exc.strerror}") from None
    if hasattr(os, "fchmod"):  # Windows has no mode bits to set beyond read-only
        os.fchmod(fd, 0o666 & ~_umask())  # as open() would make it, not mkstemp's 0600
    return fd, Path(tmp)


def write_whole(path: str | os.PathLike[str], text: str) -> None:
    """Put ``text`` at ``path`` whole (written beside it, then renamed): a failure leaves
    what was there. Raises OutputError."""
    write_with(path, lambda fh: fh.write(text.encode("utf-8")))


def write_with(path: str | os.PathLike[str], fill: Callable[[IO[bytes]], object]) -> None:
    """What ``fill`` writes to a stream, put at ``path`` whole (written beside it, then
    renamed over it: a link there is replaced, never its target); a failure leaves what
    was there and nothing beside it. Raises OutputError (``FILE: disk full``)."""
    p = Path(path)
    fd, tmp = _new_beside(p)
    try:
        with os.fdopen(fd, "wb") as fh:
            fill(fh)
        os.replace(tmp, p)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.errno in _NO_ROOM:
            raise disk_error(p, exc) from None
        raise OutputError(f"{p}: cannot be written: {exc.strerror or exc}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


class PendingFile:
    """A new file for ``path``, written beside it until :meth:`publish` moves it in place.

    Until then ``path`` is untouched: :meth:`discard` (or closing unpublished)
    removes the new file. After it the stream keeps writing, now to ``path``.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = check_writable(path)
        fd, self.tmp = _new_beside(self.path)
        # write errors name the user's path: the file is only beside it for now
        self.stream: IO[bytes] = cast("IO[bytes]", OutputFile(fd, self.path))
        self.published = False

    def publish(self) -> None:
        """Move the file over ``path`` (the input works: the old content may go)."""
        if not self.published:
            self.stream.flush()
            os.replace(self.tmp, self.path)
            self.published = True

    def discard(self) -> None:
        """Forget the new file; ``path`` stays as it was."""
        with contextlib.suppress(OSError):
            self.stream.close()
        if not self.published:
            self.tmp.unlink(missing_ok=True)

    def close(self) -> None:
        """Close the stream; an unpublished file is discarded."""
        if self.published:
            with contextlib.suppress(OSError):
                self.stream.close()
        else:
            self.discard()
