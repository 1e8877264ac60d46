"""One spec file as read: the record the store builds for each task, hands to the loop and
the API alike, and the planner takes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from specs.task.errors import SpecError
from specs.task.models import SourceRef
from specs.task.records import Task


# One per task, kept between passes (by the store, the loop and the planner's memo alike): slots,
# no __dict__.
@dataclass(frozen=True, slots=True)
class TaskInput:
    """One task as read from its spec file.

    A task with no file behind it (the simulator's, a test's) has no `base`: `path` is None.
    """

    name: str  # relative path without extension, "/" separated: team-a/train
    task: Task | None  # None when invalid
    error: SpecError | None = None  # the first error when invalid; str(error) is the message
    last_valid: Task | None = None  # keeps a running job going while its file is broken
    spec_hash: str | None = None  # of `task`, computed once per read
    source: SourceRef | None = None  # the git commit the file came from, if in a work tree
    # The file (`path`), under the root as given (not resolved), so it survives a git-sync
    # swap. The store gives the root (one Path shared by every entry) and `rel`, the file's
    # relative path: not a Path of its own per entry.
    base: Path | None = None
    rel: str = ""  # "": `base` is the file itself
    raw_hash: str = ""  # sha256 of the file bytes; "" when the file was too large to read
    generation: int = 0  # the store's: a new one whenever anything above changes

    @property
    def path(self) -> Path | None:
        if self.base is None:
            return None
        return self.base / self.rel if self.rel else self.base

    def hash_of(self, task: Task) -> str:
        return self.spec_hash if task is self.task and self.spec_hash else task.spec_hash()

    def _compared(self) -> tuple[object, ...]:
        return (self.name, self.path, self.task, self.error, self.last_valid, self.spec_hash,
                self.source, self.raw_hash, self.generation)  # fmt: skip

    def __eq__(self, other: object) -> bool:  # by the path, however it is kept
        if not isinstance(other, TaskInput):
            return NotImplemented
        return self._compared() == other._compared()

    def __hash__(self) -> int:  # the fields that hash (a Task's labels are a dict)
        return hash((self.name, self.path, self.raw_hash, self.generation))
