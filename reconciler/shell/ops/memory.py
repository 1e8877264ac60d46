"""Giving memory back to the system after a start.

A start parses every spec and decides every status in one pass, and then writes the backlog of
sidecars: transient objects that grow with the number of tasks. Python returns its own
small-object arenas when they empty, but glibc keeps the freed larger blocks (dict tables, the
parse's buffers) for reuse, so the process keeps its peak size while it idles. malloc_trim
hands those pages back; it is called when a backlog clears, not every pass.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import sys
from collections.abc import Callable

log = logging.getLogger("rayqueue.memory")


@functools.cache
def _trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim: Callable[[int], int] = libc.malloc_trim  # glibc only (not musl)
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]  # type: ignore[attr-defined]
    trim.restype = ctypes.c_int  # type: ignore[attr-defined]
    return trim


def release_free_memory() -> bool:
    """Return the C allocator's free pages to the system; False where it cannot (not glibc)."""
    trim = _trim()
    if trim is None:
        return False
    trim(0)
    return True
