"""What a pass reads besides Ray: the tasks folder as planner inputs, the queue file, the
planner's options."""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.core.planner import TaskInput
from reconciler.shell.loop.queuefile import QueueFile
from specs.folder.store import SpecEntry, TaskStore
from specs.queues.config import CONFIG_FILE
from specs.settings.process import PlanOptions, Settings


def plan_options(settings: Settings) -> PlanOptions:
    return settings.plan_options()


def task_input(entry: SpecEntry) -> TaskInput:
    """What the planner needs of one scanned file; the spec hash is computed once per parse."""
    error = str(entry.error) if entry.error else None
    spec_hash = entry.task.spec_hash() if entry.task is not None else None
    return TaskInput(entry.name, entry.task, error, entry.last_valid, spec_hash)


def scan_specs(
    store: TaskStore,
    cache: dict[str, tuple[SpecEntry, TaskInput]] | None = None,
    changed: set[str] | None = None,
) -> dict[str, TaskInput]:
    """The folder as planner inputs; raises FolderUnavailable. `cache`, updated in place, keeps
    the TaskInput of every entry the store handed back unchanged (same generation). `changed`:
    look only at these paths (file events); None: walk the folder."""
    entries = store.scan(changed)
    previous = dict(cache) if cache is not None else {}
    inputs: dict[str, TaskInput] = {}
    kept: dict[str, tuple[SpecEntry, TaskInput]] = {}
    for name, entry in entries.items():
        cached = previous.get(name)
        if cached is None or cached[0].generation != entry.generation:
            cached = (entry, task_input(entry))
        kept[name] = cached
        inputs[name] = cached[1]
    if cache is not None:
        cache.clear()
        cache.update(kept)
    return inputs


def queue_file(settings: Settings) -> QueueFile:
    """`--queues PATH`, else `<tasks>/_queues.yaml`; its status beside it or in --status-dir."""
    path = settings.queues_path or settings.tasks_dir / CONFIG_FILE
    return QueueFile(path, settings.status_dir, settings.tasks_dir, settings.queue_depth)


class SpecInputs:
    """The folder as planner inputs, kept between passes and updated by the names the store
    says a scan may have changed (a pass that follows file events costs what they named; a
    full walk compares every entry's generation)."""

    def __init__(self) -> None:
        # By name: the entry each input was made of (two dicts, not a tuple more per task).
        self.cache: dict[str, SpecEntry] = {}
        self.inputs: dict[str, TaskInput] = {}
        self._handed: dict[str, TaskInput] | None = None

    def handed(self, inputs: Mapping[str, TaskInput], changed: bool) -> dict[str, TaskInput]:
        """A copy of `inputs` (these or the loop's sourced ones) for a pass: the last one
        handed out again when `changed` says nothing in them changed since. A pass keeps what
        it is handed (the read-back, the planner's memo) and no one changes a handed map."""
        if changed or self._handed is None:
            self._handed = dict(inputs)
        return self._handed

    def read(self, store: TaskStore, changed: set[str] | None = None) -> set[str]:
        """Scan (`changed`: the paths events named; None: walk); raises FolderUnavailable.
        Returns the names whose input is new, different or gone."""
        entries, looked_at = store.scan_changes(changed)
        names = entries.keys() | self.cache.keys() if looked_at is None else looked_at
        differ: set[str] = set()
        for name in names:
            entry = entries.get(name)
            cached = self.cache.get(name)
            if entry is None:
                if cached is not None:
                    del self.cache[name], self.inputs[name]
                    differ.add(name)
                continue
            if cached is None or cached.generation != entry.generation:
                self.cache[name] = entry
                self.inputs[name] = task_input(entry)
                differ.add(name)
            elif cached is not entry:
                self.cache[name] = entry  # the same generation: the same input
        return differ
