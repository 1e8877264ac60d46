"""Atomic file replacement: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

# mkstemp creates 0600 files; specs and sidecars are meant to be read by other users and tools.
_DEFAULT_MODE = 0o644


def write_atomic(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace `path` with `data` via a temp file in the same directory and os.replace.

    durable: fsync the file before the rename and the directory after it, so the new content
    survives a power loss or kernel crash. Without it the write is still atomic (a reader, or
    the next process after a crash of ours, sees the old file or the new one), but an OS crash
    may roll it back; only write so what the next pass can derive again.
    """
    parent = path.parent
    parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mode = _DEFAULT_MODE
    # Same directory, so os.replace is a rename on one filesystem; the leading "." hides the
    # temp file from the store's scan.
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    try:
        with os.fdopen(fd, "wb") as tmp:
            tmp.write(data)
            tmp.flush()
            os.fchmod(tmp.fileno(), mode)
            _mark_complete(tmp.fileno())
            if durable:
                os.fsync(tmp.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    if durable:
        _fsync_dir(parent)


def _mark_complete(fd: int) -> None:
    """Leave the file with its change time strictly after its modification time.

    The store trusts such a file at once, without a settle wait (see specs/store.py): the last
    thing done to it was not a data write. The rename below makes that true by itself only when
    the clock ticked since the write (a coarse tick is a few ms); moving the modification time
    1 ns back makes it true always. utimensat sets the change time to now, which is at least
    the write's own timestamp.
    """
    st = os.fstat(fd)
    os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns - 1))


def _fsync_dir(directory: Path) -> None:
    """Persist the rename itself. Best effort: some filesystems refuse to open directories."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
