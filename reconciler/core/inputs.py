"""What a pass reads: each spec file as the store read it, and what Ray reported."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from specs.cluster import (
    Capacity,
    RayJob,
    Scaling,
)
from specs.task.models import SourceRef
from specs.task.records import Task


@dataclass(frozen=True, slots=True)  # one per task, kept between passes: no __dict__
class TaskInput:
    """One spec file as the store read it."""

    name: str
    task: Task | None
    error: str | None = None
    last_valid: Task | None = None  # keeps a running job going while its file is broken
    spec_hash: str | None = None  # of `task`, computed once per parse by the shell
    source: SourceRef | None = None  # the git commit the file came from, if in a work tree

    def hash_of(self, task: Task) -> str:
        return self.spec_hash if task is self.task and self.spec_hash else task.spec_hash()


@dataclass(frozen=True)
class Observation:
    """What Ray reported this pass. `jobs is None` means Ray could not be asked."""

    jobs: Mapping[str, RayJob] | None
    capacity: Capacity | None
    error: str | None = None
    # What the cluster can grow to; None: a fixed cluster.
    scaling: Scaling | None = None

    @property
    def available(self) -> bool:
        return self.jobs is not None and self.capacity is not None
