"""File events between the watcher thread and the loop: which paths changed since the last pass.

The loop trusts these between periodic full rescans (controller-runtime's informer and resync);
when events may have been lost (no watcher yet, the watcher restarted after an error or an
overflow, the root link swapped), the next pass walks the whole folder.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable


class FileEvents:
    """Changed paths, collected by the watcher and taken by the loop. Thread-safe."""

    def __init__(self, wake: threading.Event) -> None:
        self._wake = wake
        self._lock = threading.Lock()
        self._paths: set[str] = set()
        self._armed = False  # no watcher running: every pass walks the folder
        self._full = True  # the next pass walks the folder
        # Stat keys (mtime_ns, size, inode) of files a writer finished: closed after writing,
        # or renamed into place (inotify, in watcher.py). Read without a settle wait.
        self._complete: set[tuple[int, int, int]] = set()
        self._armed_now = threading.Event()  # set while _armed, for wait_armed

    @property
    def is_armed(self) -> bool:
        with self._lock:
            return self._armed

    def wait_armed(self, timeout: float) -> bool:
        """Wait until a watcher is armed, at most `timeout` seconds; whether it is."""
        return self._armed_now.wait(timeout)

    def add(self, paths: Iterable[str], complete: Iterable[tuple[int, int, int]] = ()) -> None:
        with self._lock:
            self._paths.update(paths)
            self._complete.update(complete)
        self._wake.set()

    def take_complete(self) -> set[tuple[int, int, int]]:
        """The stat keys of files known complete since the last call."""
        with self._lock:
            keys, self._complete = self._complete, set()
            return keys

    def armed(self) -> None:
        """A watcher runs; events from now on are complete. The next pass still walks the
        folder, for whatever changed while the watcher was being set up."""
        with self._lock:
            self._armed = self._full = True
            self._armed_now.set()
        self._wake.set()

    def lost(self) -> None:
        """The watcher failed or restarts: trust no events until it is armed again."""
        with self._lock:
            self._armed = False
            self._full = True
            self._armed_now.clear()
        self._wake.set()

    def take(self) -> set[str] | None:
        """The paths named since the last call; None if only a full walk is safe."""
        with self._lock:
            paths, self._paths = self._paths, set()
            if self._full or not self._armed:
                self._full = False
                return None
            return paths
