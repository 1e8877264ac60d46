"""What a pass reads of Ray (each spec file as read is a specs.task.inputs.TaskInput)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from specs.cluster import (
    Capacity,
    RayJob,
    Scaling,
)


@dataclass(frozen=True)
class Observation:
    """What Ray reported this pass. `jobs is None` means Ray could not be asked.

    `held`: what Ray says each job holds now (its placement groups, actors and tasks, in Ray's
    logical resources), by submission id; a job not in it was not observed (reconciler/core/
    charges.py charges it what it declares). A key that is no listed job's is a holder Ray
    does not list as a submitted job (a driver connected directly). `ray_available`: what Ray
    reported available when `held` was read; None: not read (free room is then what the
    capacity less the charges leaves)."""

    jobs: Mapping[str, RayJob] | None
    capacity: Capacity | None
    error: str | None = None
    # What the cluster can grow to; None: a fixed cluster.
    scaling: Scaling | None = None
    held: Mapping[str, Capacity] = field(default_factory=dict)
    ray_available: Capacity | None = None

    @property
    def available(self) -> bool:
        return self.jobs is not None and self.capacity is not None
