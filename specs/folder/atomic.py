"""Atomic file replacement: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import tempfile
from pathlib import Path

# (st_mtime_ns, st_size, st_ino): what the store remembers a file by
StatKey = tuple[int, int, int]

# mkstemp creates 0600 files; specs and sidecars are meant to be read by other users and tools.
_DEFAULT_MODE = 0o644


@functools.cache
def _umask() -> int:
    """The process's umask, read once when first needed (replace_file skips a chmod that it
    makes needless). Linux says it in /proc without changing it; elsewhere the only way to
    read it is to set it and put it back, which a thread creating a file meanwhile could see,
    so then the chmod is always done (as if every bit were masked)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o777


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

    The store trusts such a file at once, without a settle wait (see specs/folder/store.py): the
    last
    thing done to it was not a data write. The rename below makes that true by itself only when
    the clock ticked since the write (a coarse tick is a few ms); moving the modification time
    1 ns back makes it true always. utimensat sets the change time to now, which is at least
    the write's own timestamp.
    """
    st = os.fstat(fd)
    os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns - 1))


def _fsync_dir(directory: str | Path) -> None:
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


def replace_file(
    path: str | Path,
    data: bytes,
    *,
    durable: bool,
    mode: int = _DEFAULT_MODE,
    sync_folder: bool = True,
) -> StatKey:
    """write_atomic for the store's own sidecars, at a fraction of its system calls (50,000
    sidecars after a start): returns the new file's stat key (mtime, size, inode).

    The same guarantees: a temp file in the same folder, renamed over `path`, so a reader sees
    the old file or the new one; with `durable`, the file is fsynced before the rename and the
    folder after it. What it leaves out is only needed for other writers: a random temp name
    (one process writes sidecars: serve holds the tasks folder's lock, and the store its own
    lock; the pid keeps two processes apart anyway, and a temp file left by a crash is
    truncated and reused), the folder made up front (only when the open finds none), and the
    mark of a complete file (the store's settle wait applies to specs, not to sidecars).
    Paths as strings: pathlib's parsing costs more than the write's system calls.

    sync_folder=False leaves the folder's fsync to the caller, who does it once for a batch of
    durable writes (sync_folders) before anything relies on them: the renames are durable from
    then on, as if each had been synced, and a crash before leaves each file old or new.
    """
    target = os.fspath(path)
    parent, base = os.path.split(target)
    tmp = os.path.join(parent, f".{base}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        fd = os.open(tmp, flags, mode)
    except FileNotFoundError:
        os.makedirs(parent, exist_ok=True)
        fd = os.open(tmp, flags, mode)
    except FileExistsError:  # left by a crash of ours: its mode is not ours to keep
        os.unlink(tmp)
        fd = os.open(tmp, flags, mode)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if mode & _umask():
                os.fchmod(fd, mode)  # exactly `mode`, whatever the umask
            if durable:
                os.fsync(fd)
            st = os.fstat(fd)  # a rename changes only ctime: this is the key after it too
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable and sync_folder:
        _fsync_dir(parent)
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def sync_folders(folders: set[str]) -> None:
    """The folder fsyncs that replace_file(sync_folder=False) left out, once per folder."""
    for folder in sorted(folders):
        _fsync_dir(folder or ".")
