"""A small binding of Linux's inotify (ctypes on libc), for what watchfiles does not say.

watchfiles reports a rename into the folder only as "added" and a closed write only as
"modified", so a file published whole (written, then renamed into place, in the same clock
tick) looks like one still being written and waits out the settle time. inotify says it
directly: IN_MOVED_TO (a rename landed) and IN_CLOSE_WRITE (a writer closed the file) mean the
content is complete. Not recursive by itself: the watcher adds a watch per folder.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

# What a folder watch asks for: every way a file can change, appear or go.
WATCH_MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
)
COMPLETE = IN_CLOSE_WRITE | IN_MOVED_TO  # the content is what its writer meant

_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len (struct inotify_event)
_BUFFER = 64 * 1024

_libc: Any = None


@dataclass(frozen=True)
class Event:
    wd: int
    mask: int
    name: str  # the file's name within the watched folder; "" for the folder itself


def _lib() -> Any:
    global _libc
    if _libc is None:
        if not sys.platform.startswith("linux"):
            raise OSError("inotify is Linux only")
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        _libc.inotify_init1.argtypes = [ctypes.c_int]
        _libc.inotify_init1.restype = ctypes.c_int
        _libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        _libc.inotify_add_watch.restype = ctypes.c_int
    return _libc


def _raise(what: str) -> None:
    err = ctypes.get_errno()
    raise OSError(err, f"{what}: {os.strerror(err)}")


class Inotify:
    """One inotify instance. Raises OSError where inotify is unavailable (not Linux, no libc
    symbol, the per-user instance limit reached)."""

    def __init__(self) -> None:
        try:
            lib = _lib()
        except (AttributeError, OSError) as exc:
            raise OSError(f"inotify unavailable: {exc}") from exc
        fd = lib.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            _raise("inotify_init1")
        self.fd: int = fd
        self.skipped = 0  # events the last read left out by `skip`

    def add_watch(self, path: str, mask: int = WATCH_MASK) -> int:
        wd: int = _lib().inotify_add_watch(self.fd, os.fsencode(path), mask)
        if wd < 0:
            _raise(f"inotify_add_watch {path}")
        return wd

    def read(self, timeout: float, skip: Callable[[bytes], bool] | None = None) -> list[Event]:
        """The events queued, waiting up to `timeout` seconds for the first; [] if none.
        `skip`: leave out the events of files whose (raw) name it is true for."""
        self.skipped = 0
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return []
        try:
            data = os.read(self.fd, _BUFFER)
        except BlockingIOError:
            return []
        events: list[Event] = []
        offset = 0
        while offset + _HEADER.size <= len(data):
            wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
            offset += _HEADER.size
            raw = data[offset : offset + length].split(b"\0", 1)[0]
            offset += length
            if raw and skip is not None and skip(raw):
                self.skipped += 1
                continue
            events.append(Event(wd, mask, os.fsdecode(raw)))
        return events

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Inotify:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
