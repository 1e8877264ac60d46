"""File events wake the loop early and tell it which paths changed
(reconciler/shell/watch/events.py).

On Linux the events come from inotify (through inotify_simple), which also says when a file is
complete: renamed into place (IN_MOVED_TO) or closed after a write (IN_CLOSE_WRITE); such a
file is read at once, without the settle time. watchfiles cannot say so: it reports a rename
into the folder only as "added" and a closed write only as "modified", so a file published
whole looks like one still being written. Elsewhere (macOS), or where inotify cannot be had,
watchfiles reports changes and the settle time decides when a file is whole. inotify is not
recursive: the watcher adds a watch per folder.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from inotify_simple import Event as InotifyEvent
from inotify_simple import INotify, flags
from watchfiles import Change, watch

from reconciler.shell.watch.events import FileEvents

log = logging.getLogger("rayqueue.watcher")


_POLL_MS = 200  # between checks that the root link still points where it did
# After a read that held only our own writes (a start writes a sidecar per task, five events
# each), wait this long before the next, so that one read takes a burst's events at once
# instead of the thread waking for every file: a file dropped meanwhile is seen this much later.
_OWN_WRITES_PAUSE = 0.01
_IGNORED_SUFFIXES = (".status.yaml", "~", ".swp")

# What a folder watch asks for: every way a file can change, appear or go.
WATCH_MASK = (
    flags.MODIFY
    | flags.ATTRIB
    | flags.CLOSE_WRITE
    | flags.MOVED_FROM
    | flags.MOVED_TO
    | flags.CREATE
    | flags.DELETE
    | flags.DELETE_SELF
    | flags.MOVE_SELF
    | flags.ONLYDIR
)
_COMPLETE = flags.CLOSE_WRITE | flags.MOVED_TO  # the content is what its writer meant


def _relevant(change: Change | None, path: str) -> bool:
    del change
    # Our own sidecar and temp-file writes must not wake us into a busy loop.
    return not (_ignored_name(os.path.basename(path)) or "/.rayqueue" in path)


def _ignored_name(name: str) -> bool:
    """A hidden file (temp files of atomic writes), a sidecar, an editor's backup or swap."""
    return name.startswith(".") or name.endswith(_IGNORED_SUFFIXES)


@dataclass(frozen=True)
class Batch:
    """One read of inotify: the events of files we follow, and how many it left out (our own
    writes, hidden files, backups)."""

    events: list[InotifyEvent]
    skipped: int


def read_events(ino: INotify, timeout_ms: int) -> Batch:
    """The events queued, waiting up to `timeout_ms` for the first, less those of the files
    the store never reads (a start writes a sidecar per task, five events each: they are left
    out here, before anything else looks at them)."""
    events = ino.read(timeout=timeout_ms)
    kept = [e for e in events if not (e.name and _ignored_name(e.name))]
    return Batch(kept, len(events) - len(kept))


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
        if sys.platform.startswith("linux"):
            try:
                INotify().close()
            except (OSError, AttributeError) as exc:  # no inotify_init1 in this libc
                log.info("inotify unavailable (%s); files settle before they count", exc)
            else:
                self._run_inotify()
                return
        self._run_watchfiles()

    def _run_inotify(self) -> None:
        while not self.stop.is_set():
            target = os.path.realpath(self.root)
            try:
                with INotify() as ino:
                    self._follow(ino, target)
            except OSError as exc:
                # Folder missing, swapped, a watch limit, an overflow: the periodic rescan
                # covers us until the watch is set up again.
                log.debug("watcher restarting: %s", exc)
                self.stop.wait(1.0)
            finally:
                if self.events is not None:
                    self.events.lost()

    def _follow(self, ino: INotify, target: str) -> None:
        """Watch every folder under `target` and report what changes until the root link is
        swapped or the watch fails (OSError)."""
        folders: dict[int, str] = {}
        _watch_tree(ino, target, folders)
        if self.events is not None:
            self.events.armed()
        pending: list[InotifyEvent] = []
        checked = time.monotonic()
        while not self.stop.is_set():
            read = Batch(pending, 0) if pending else read_events(ino, _POLL_MS)
            now = time.monotonic()
            if read.events or now - checked >= _POLL_MS / 1000:
                checked = now
                if os.path.realpath(self.root) != target:
                    return
            if not read.events:
                if read.skipped:
                    self.stop.wait(_OWN_WRITES_PAUSE)
                continue
            changed: set[str] = set()
            complete: dict[str, bool] = {}
            self._sort(ino, read.events, target, folders, changed, complete)
            # A writer that opened the file again since it closed it: not complete after all.
            # (Events already queued say so; the stat below then describes unfinished bytes.)
            keys = _keys([p for p, whole in complete.items() if whole])
            pending = read_events(ino, 0).events
            for event in pending:
                if event.mask & flags.MODIFY:
                    keys.pop(os.path.join(folders.get(event.wd, ""), event.name), None)
            if changed:
                if self.events is not None:
                    self.events.add(changed, keys.values())
                self.wake.set()

    @staticmethod
    def _sort(
        ino: INotify,
        batch: list[InotifyEvent],
        top: str,
        folders: dict[int, str],
        changed: set[str],
        complete: dict[str, bool],
    ) -> None:
        """Paths of `batch` into `changed`, and whether each file's writer finished it."""
        for event in batch:
            if event.mask & flags.Q_OVERFLOW:
                raise OSError("inotify queue overflowed; events were lost")
            if event.mask & flags.IGNORED:
                if folders.pop(event.wd, None) == top:
                    raise OSError("the watched folder went away")  # watched again once back
                continue
            base = folders.get(event.wd)
            if base is None:
                continue
            path = os.path.join(base, event.name) if event.name else base
            if not _relevant(None, path):
                continue
            if event.mask & flags.ISDIR:
                if event.mask & (flags.CREATE | flags.MOVED_TO):
                    with contextlib.suppress(OSError):  # gone again already: nothing to watch
                        _watch_tree(ino, path, folders)  # a new team folder: watch it too
                changed.add(path)  # a folder: the next pass walks
                continue
            changed.add(path)
            if event.mask & _COMPLETE:
                complete[path] = True
            elif event.mask & (flags.MODIFY | flags.CREATE):
                complete[path] = False  # written again after it was finished

    def _run_watchfiles(self) -> None:
        while not self.stop.is_set():
            # The watch is on the link's target of the moment: git-sync's swap of the root link
            # is noticed on the next tick (at most rust_timeout), and the watch starts over.
            target = os.path.realpath(self.root)
            armed = False
            try:
                for changes in watch(
                    self.root,
                    watch_filter=_relevant,
                    # watchfiles' Rust side wakes every `step` ms while it waits: a shorter
                    # step costs more CPU while idle, a longer one delays every drop by it.
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


def _watch_tree(ino: INotify, top: str, folders: dict[int, str]) -> None:
    """Watch `top` and every folder under it (not hidden ones: ours, .git), not following
    links, as the store's walk does not."""
    folders[ino.add_watch(top, WATCH_MASK)] = top  # raises OSError if `top` is gone
    for folder, subfolders, _files in os.walk(top):
        subfolders[:] = [d for d in subfolders if not d.startswith(".")]
        if folder == top:
            continue
        # Gone since listed, or unreadable: the walk in the store reports it.
        with contextlib.suppress(OSError):
            folders[ino.add_watch(folder, WATCH_MASK)] = folder


def _keys(paths: list[str]) -> dict[str, tuple[int, int, int]]:
    """The stat key (as the store keys a parse) of each path that is a regular file now."""
    keys: dict[str, tuple[int, int, int]] = {}
    for path in paths:
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            continue
        keys[path] = (st.st_mtime_ns, st.st_size, st.st_ino)
    return keys
