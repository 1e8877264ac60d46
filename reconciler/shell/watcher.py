"""File events wake the loop early and tell it which paths changed (reconciler/shell/events.py)."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from watchfiles import Change, watch

from reconciler.shell.events import FileEvents

log = logging.getLogger("rayqueue.watcher")


def _relevant(change: Change, path: str) -> bool:
    del change
    name = Path(path).name
    # Our own sidecar and temp-file writes must not wake us into a busy loop.
    return not (
        name.startswith(".") or name.endswith((".status.yaml", "~", ".swp")) or "/.rayqueue" in path
    )


class Watcher:
    """Sets `wake` whenever something under the folder changes, and hands the changed paths to
    `events` if given. Survives the folder vanishing; follows a swap of the root symlink."""

    def __init__(
        self,
        root: Path,
        wake: threading.Event,
        stop: threading.Event,
        events: FileEvents | None = None,
    ) -> None:
        self.root = root
        self.wake = wake
        self.stop = stop
        self.events = events
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="rayqueue-watcher", daemon=True)
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self.stop.is_set():
            # The watch is on the link's target of the moment: git-sync's swap of the root link
            # is noticed on the next tick (at most rust_timeout), and the watch starts over.
            target = os.path.realpath(self.root)
            armed = False
            try:
                for changes in watch(
                    self.root,
                    watch_filter=_relevant,
                    # watchfiles' Rust side wakes every `step` ms while it waits: 10 ms costs
                    # 0.8 % of a core idle here, 20 ms 0.4 %, but 20 ms added 10 ms to the
                    # p50 of a drop (benchmarks.latency, in-process: 30 -> 40 ms).
                    debounce=20,
                    step=10,
                    stop_event=self.stop,
                    rust_timeout=200,
                    yield_on_timeout=True,
                    raise_interrupt=False,
                ):
                    if not armed:
                        # The first tick means the watch is set up: events are complete from
                        # here, and one full walk covers what changed before.
                        armed = True
                        if self.events is not None:
                            self.events.armed()
                    if changes:
                        if self.events is not None:
                            self.events.add(path for _change, path in changes)
                        self.wake.set()
                    if os.path.realpath(self.root) != target:
                        break
            except (FileNotFoundError, OSError, RuntimeError) as exc:
                # Folder missing or swapped: the periodic rescan covers us until it is back.
                log.debug("watcher restarting: %s", exc)
                self.stop.wait(1.0)
            finally:
                if self.events is not None:
                    self.events.lost()
