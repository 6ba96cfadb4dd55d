"""Outputs that never destroy what is already there.

A verb that writes a file checks the path before its run (:func:`check_writable`:
one clear error instead of a failure after minutes of work; an existing file
is refused unless the user asked to replace it) and does not truncate an
existing file until its input works: :class:`PendingFile` writes beside the
target and moves itself over it (an atomic rename, the stream stays open) once
the run has started, or removes itself when the start fails;
:func:`write_whole` puts a generated text in place whole. New files get the
user's umask, as a plain ``open()`` makes them.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import IO

from fwbridge.protocols.errors import CaptureError

__all__ = ["OutputError", "PendingFile", "check_writable", "write_whole"]


class OutputError(CaptureError):
    """An output path that cannot be written; the message names it and why."""


def check_writable(path: str | os.PathLike[str], *, replace: bool = True) -> Path:
    """``path`` as a Path if a file can be created (or, with ``replace``, replaced) there;
    else OutputError."""
    p = Path(path)
    parent = p.parent
    if p.is_dir():
        raise OutputError(f"{p}: is a directory, not a file")
    if not parent.is_dir():
        raise OutputError(f"{p}: no such directory {str(parent)!r}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{p}: cannot create files in {str(parent)!r} (permission denied)")
    if p.exists() and not replace:
        raise OutputError(f"{p}: exists already; give a new name, or --force to replace it")
    if p.exists() and not os.access(p, os.W_OK):
        raise OutputError(f"{p}: permission denied")
    return p


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _new_beside(path: Path, suffix: str = ".partial") -> tuple[int, Path]:
    """A new file next to ``path`` (same folder: the rename stays atomic), mode per umask."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    except OSError as exc:
        raise OutputError(f"{path}: cannot be written: {exc.strerror}") from None
    os.fchmod(fd, 0o666 & ~_umask())  # as open() would make it, not mkstemp's 0600
    return fd, Path(tmp)


def write_whole(path: str | os.PathLike[str], text: str) -> None:
    """Put ``text`` at ``path`` whole (written beside it, then renamed): a failure leaves
    what was there. Raises OutputError."""
    p = Path(path)
    fd, tmp = _new_beside(p)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, p)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise OutputError(f"{p}: cannot be written: {exc.strerror or exc}") from None


class PendingFile:
    """A new file for ``path``, written beside it until :meth:`publish` moves it in place.

    Until then ``path`` is untouched: :meth:`discard` (or closing unpublished)
    removes the new file. After it the stream keeps writing, now to ``path``.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = check_writable(path)
        fd, self.tmp = _new_beside(self.path)
        self.stream: IO[bytes] = os.fdopen(fd, "wb")
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
