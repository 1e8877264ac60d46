"""What a pass reads besides Ray: the tasks folder as planner inputs, the queue file, the
planner's options."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace

from reconciler.shell.loop.queuefile import QueueFile
from specs.folder.store import TaskStore
from specs.queues.config import CONFIG_FILE
from specs.settings.process import PlanOptions, Settings
from specs.task.inputs import TaskInput
from specs.tenancy.access import team_visibility


def plan_options(settings: Settings) -> PlanOptions:
    """The settings' planner options, with what each task may see of the others as the team
    tokens file draws the folders (AccessError if that file is unusable)."""
    options = settings.plan_options()
    if settings.team_tokens is None:
        return options
    return replace(options, visibility=team_visibility(settings))


def scan_specs(store: TaskStore, changed: set[str] | None = None) -> dict[str, TaskInput]:
    """The folder as planner inputs; raises FolderUnavailable. `changed`: look only at these
    paths (file events); None: walk the folder."""
    return store.scan(changed)


def queue_file(
    settings: Settings, settle_seconds: float = 0.0, clock: Callable[[], float] = time.monotonic
) -> QueueFile:
    """`--queues PATH`, else `<tasks>/_queues.yaml`; its status beside it or in --status-dir.
    `settle_seconds`: the loop's settle wait for files still being written (a one-off read,
    as `plan` makes, takes the file as it is)."""
    path = settings.queues_path or settings.tasks_dir / CONFIG_FILE
    return QueueFile(
        path,
        settings.status_dir,
        settings.tasks_dir,
        settings.queue_depth,
        settle_seconds=settle_seconds,
        clock=clock,
    )


class SpecInputs:
    """The folder as planner inputs, kept between passes and updated by the names the store
    says a scan may have changed (a pass that follows file events costs what they named; a
    full walk compares every input's generation)."""

    def __init__(self) -> None:
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
        read, looked_at = store.scan_changes(changed)
        names = read.keys() | self.inputs.keys() if looked_at is None else looked_at
        differ: set[str] = set()
        for name in names:
            now = read.get(name)
            kept = self.inputs.get(name)
            if now is None:
                if kept is not None:
                    del self.inputs[name]
                    differ.add(name)
                continue
            if kept is None or kept.generation != now.generation:  # else the same input
                self.inputs[name] = now
                differ.add(name)
        return differ
