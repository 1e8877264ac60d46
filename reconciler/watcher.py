"""File events only wake the loop early; the loop itself always rescans everything."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from watchfiles import Change, watch

log = logging.getLogger("rayqueue.watcher")


def _relevant(change: Change, path: str) -> bool:
    del change
    name = Path(path).name
    # Our own sidecar and temp-file writes must not wake us into a busy loop.
    return not (
        name.startswith(".") or name.endswith((".status.yaml", "~", ".swp")) or "/.rayqueue" in path
    )


class Watcher:
    """Sets `wake` whenever something under the folder changes. Survives the folder vanishing."""

    def __init__(self, root: Path, wake: threading.Event, stop: threading.Event) -> None:
        self.root = root
        self.wake = wake
        self.stop = stop
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="rayqueue-watcher", daemon=True)
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                for _changes in watch(
                    self.root,
                    watch_filter=_relevant,
                    debounce=20,
                    step=10,
                    stop_event=self.stop,
                    rust_timeout=500,
                    yield_on_timeout=False,
                    raise_interrupt=False,
                ):
                    self.wake.set()
            except (FileNotFoundError, OSError, RuntimeError) as exc:
                # Folder missing or swapped: the periodic rescan covers us until it is back.
                log.debug("watcher restarting: %s", exc)
                self.stop.wait(1.0)
