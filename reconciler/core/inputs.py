"""What a pass reads of Ray (each spec file as read is a specs.task.inputs.TaskInput)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from specs.cluster import (
    Capacity,
    RayJob,
    Scaling,
)


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
