"""Arrays in the store: the expansion of array entries into element entries
(`ElementEntries`), and the one sidecar per array holding its elements' statuses
(`ArrayFiles`).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from specs.folder.atomic import write_atomic
from specs.folder.paths import ReadFile, StatKey, check_relative, stat_key
from specs.task import arrays, arraystatus
from specs.task.inputs import TaskInput
from specs.task.status import TaskStatus
from specs.yamlio.parse import MAX_FILE_BYTES

log = logging.getLogger("rayqueue.store")


class ElementEntries:
    """The scan's entries as handed out: every array replaced by its elements, expanded once
    per generation of the array's entry."""

    def __init__(self) -> None:
        # The elements of each array entry, by its generation.
        self._expanded: dict[str, tuple[int, dict[str, TaskInput]]] = {}
        # What the last expansion handed out, kept to update it by the names a scan of
        # events looked at rather than rebuild it.
        self._shown: dict[str, TaskInput] | None = None

    def expand(
        self, entries: dict[str, TaskInput], looked_at: set[str] | None = None
    ) -> tuple[dict[str, TaskInput], set[str] | None]:
        """`entries` with every array replaced by its elements (cached per generation), and
        the names that may differ from the last call's. `looked_at`: the only names whose
        entry may have changed since the last call; None: any may (all are expanded anew)."""
        shown = self._shown
        if looked_at is None or shown is None:
            out: dict[str, TaskInput] = {}
            kept: dict[str, tuple[int, dict[str, TaskInput]]] = {}
            for name, entry in entries.items():
                source = entry.task or entry.last_valid
                if source is None or source.spec.array is None:
                    out[name] = entry
                    continue
                cached = self._expanded.get(name)
                if cached is None or cached[0] != entry.generation:
                    cached = (entry.generation, element_entries(entry))
                kept[name] = cached
                out.update(cached[1])
            self._expanded = kept
            self._shown = out
            return dict(out), None
        changes: set[str] = set()
        for name in looked_at:
            was = self._expanded.pop(name, None)
            for gone in was[1] if was is not None else (name,):
                if shown.pop(gone, None) is not None:
                    changes.add(gone)
            now = entries.get(name)
            if now is None:
                continue
            source = now.task or now.last_valid
            if source is None or source.spec.array is None:
                shown[name] = now
                changes.add(name)
                continue
            if was is None or was[0] != now.generation:
                was = (now.generation, element_entries(now))
            self._expanded[name] = was
            shown.update(was[1])
            changes.update(was[1])
        return dict(shown), changes

    def shown(self, entries: dict[str, TaskInput]) -> dict[str, TaskInput]:
        """What the last expansion handed out (of `entries`, the scan's, if none yet)."""
        shown = self._shown
        return dict(shown) if shown is not None else self.expand(dict(entries))[0]


def element_entries(entry: TaskInput) -> dict[str, TaskInput]:
    """The entries of an array's elements: each with its own task (or, while the file is
    invalid, its error and its last valid element)."""
    tasks = arrays.expand(entry.name, entry.task) if entry.task is not None else {}
    last = entry.last_valid
    if last is entry.task:
        lasts = tasks
    else:
        lasts = arrays.expand(entry.name, last) if last is not None and last.spec.array else {}
    names = tasks or lasts
    out: dict[str, TaskInput] = {}
    for name in names:
        task = tasks.get(name)
        spec_hash = task.spec_hash() if task is not None else None
        out[name] = replace(
            entry, name=name, task=task, last_valid=lasts.get(name), spec_hash=spec_hash
        )
    return out


@dataclass
class ArraySidecar:
    """One array's sidecar: its elements' statuses (by index) and what is on disk."""

    key: StatKey | None
    data: bytes
    elements: dict[int, TaskStatus]
    generations: dict[int, int]
    dirty: bool = False
    durable: bool = False


class ArrayFiles:
    """The array sidecars of one store: what it holds of each array, read from disk or set by
    its writes, and the writes of those that changed."""

    def __init__(
        self,
        sidecar_root: Path,
        *,
        generations: Iterator[int],
        warn: Callable[[str, str], None],
        read_file: ReadFile,
    ) -> None:
        self._sidecar_root = sidecar_root
        self._generations = generations
        self._warn = warn
        self._read_file = read_file
        # Each array's one sidecar, by array name.
        self.held: dict[str, ArraySidecar] = {}

    def read_disk(self, array: str) -> dict[int, TaskStatus]:
        """The element statuses in the sidecar of `array` on disk, by index (empty when there
        is none or it is unreadable)."""
        try:
            read = self._read_file(self.path(array), 16 * MAX_FILE_BYTES)
        except OSError:
            return {}
        if read is None:
            return {}
        try:
            return arraystatus.load(read[0])[1]
        except arraystatus.ArrayStatusError:
            return {}

    def load(self, array: str, entry: os.DirEntry[str]) -> ArraySidecar | None:
        """The sidecar of `array` a walk found at `entry` (what is held, if its stat is)."""
        try:
            st = entry.stat()
            key = (st.st_mtime_ns, st.st_size, st.st_ino)
            held = self.held.get(array)
            if held is not None and held.key == key:
                return held
            read = self._read_file(entry.path, -1)
        except OSError as exc:
            self._warn(entry.path, f"cannot read sidecar: {exc}")
            return self.held.get(array)
        if read is None:
            return None
        try:
            _, elements = arraystatus.load(read[0])
        except arraystatus.ArrayStatusError as exc:
            log.warning("ignoring unreadable array sidecar %s: %s", entry.path, exc)
            return None
        generation = next(self._generations)
        return ArraySidecar(key, read[0], elements, dict.fromkeys(elements, generation))

    def found(self, on_disk: dict[str, ArraySidecar]) -> None:
        """Hold what a full read found on disk, but what is not written yet as it is held."""
        on_disk.update({a: held for a, held in self.held.items() if held.dirty})
        self.held = on_disk

    def set_status(self, array: str, index: int, status: TaskStatus | None, durable: bool) -> bool:
        """Set (or with None forget) one element's status, to be written by write_changed;
        False when there was nothing to forget."""
        held = self.held.setdefault(array, ArraySidecar(None, b"", {}, {}))
        if status is None:
            if held.elements.pop(index, None) is None:
                return False
            held.generations.pop(index, None)
        else:
            held.elements[index] = status
            held.generations[index] = next(self._generations)
        held.dirty = True
        held.durable = held.durable or durable
        return True

    def write_changed(self) -> set[str]:
        """Write every changed array sidecar; the elements of those that failed (kept dirty)."""
        failed: set[str] = set()
        for array, held in list(self.held.items()):
            if not held.dirty:
                continue
            path = self.path(array)
            try:
                if not held.elements:
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()
                    del self.held[array]
                    continue
                data = arraystatus.dump(array, held.elements)
                if data != held.data:
                    write_atomic(path, data, durable=held.durable)
                    held.key, held.data = stat_key(path), data
            except OSError as exc:
                log.error("cannot write the status of array %s: %s", array, exc)
                failed |= {arrays.element_name(array, i) for i in held.elements}
                continue
            held.dirty = held.durable = False
        return failed

    def path(self, array: str) -> Path:
        check_relative(array)
        return self._sidecar_root / f"{array}{arraystatus.SUFFIX}"
