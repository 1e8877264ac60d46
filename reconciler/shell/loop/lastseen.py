"""What the loop last saw, kept for the HTTP API and health checks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from specs.cluster import Capacity, RayJob


@dataclass
class LoopState:
    """What the loop last saw; read by the HTTP API and health checks."""

    last_pass_at: float | None = None
    last_ray_ok_at: float | None = None
    ray_error: str | None = None
    ray_failures: int = 0  # consecutive failed observations; 0 once Ray answers again
    ray_backoff_seconds: float = 0.0  # the wait before Ray is asked again; grows, then resets
    folder_error: str | None = None
    capacity: Capacity | None = None
    used: Capacity = field(default_factory=Capacity)
    queued: int = 0
    starting: int = 0
    running: int = 0
    passes: int = 0
    queues: dict[str, object] | None = None  # the latest _queues.status.yaml document
    # Ray's jobs as last listed: the API refuses an explicit submission id one of them holds.
    jobs: Mapping[str, RayJob] | None = None
    # The last plan's waiting tasks per queue ("" without queues), in place order: the API's
    # exact queue positions, which sidecars show only for the first few.
    queue_order: Mapping[str, Sequence[str]] = field(default_factory=dict)
