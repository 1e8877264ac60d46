"""The still-pass shortcut's memory: what a pass that changed nothing read, generation for
generation, so that the next pass can tell it would plan the same again."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from reconciler.core.planner import Observation, Plan
from reconciler.shell.loop.gitrev import SourceRevision
from specs.cluster import Capacity, Scaling


class Version(NamedTuple):
    """What one task's inputs are made of, as generations: equal versions, equal inputs."""

    spec: int  # the store's generation of the spec entry
    source: int  # of the git revision answer its source was taken from (0: git not asked)
    status: int  # the store's generation of its status (0: none)


@dataclass(frozen=True)
class StillPass:
    """A pass whose plan changed nothing, and what it read: while none of it changes and the
    plan's `still_until` has not passed, a full pass would give that same plan again."""

    plan: Plan
    at: float  # the pass's `now`
    jobs: Mapping[str, object] | None
    capacity: Capacity | None
    error: str | None
    queues: int  # the generation of the queue config
    revision: SourceRevision | None
    versions: Mapping[str, Version]  # of the specs the pass planned from
    statuses: Mapping[str, int]  # the generation of every status it read
    scaling: Scaling | None = None  # what the cluster could grow to

    def holds(self, observed: Observation, now: float, queues: int, revision: object) -> bool:
        until = self.plan.still_until
        return (
            until is not None
            and self.at <= now <= until
            and queues == self.queues
            and revision == self.revision
            and observed.capacity == self.capacity
            and observed.error == self.error
            and observed.jobs == self.jobs
            and observed.scaling == self.scaling
        )

    def read_the_same(self, versions: Mapping[str, Version], statuses: Mapping[str, int]) -> bool:
        """Whether a read of the folder gave the inputs this pass planned from, generation for
        generation (the store keeps an unchanged file's generation)."""
        return versions == self.versions and statuses == self.statuses
