"""What the HTTP API needs of the reconcile loop, as Protocols.

The API reads the loop's last observations, its clock, wakes it after a write and reads job
logs through its Ray adapter; nothing more. Typing against these, not the loop's classes,
keeps `api` below `reconciler`: the composition root (reconciler/app/daemon.py) hands the real
loop in, and any object of the same shape (a test double) does as well.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from specs.cluster import Capacity, RayAdapter, RayJob


class LoopState(Protocol):
    """The loop's last pass, as it recorded it."""

    @property
    def last_pass_at(self) -> float | None: ...
    @property
    def last_ray_ok_at(self) -> float | None: ...
    @property
    def ray_error(self) -> str | None: ...
    @property
    def folder_error(self) -> str | None: ...
    @property
    def capacity(self) -> Capacity | None: ...
    @property
    def used(self) -> Capacity: ...
    @property
    def queued(self) -> int: ...
    @property
    def starting(self) -> int: ...
    @property
    def running(self) -> int: ...
    @property
    def queue_order(self) -> Mapping[str, Sequence[str]]:
        """The waiting tasks of each queue ("" without queues) in place order, last pass."""
        ...

    @property
    def jobs(self) -> Mapping[str, RayJob] | None:
        """Ray's jobs by submission id as last listed; None before the first listing."""
        ...


class Wake(Protocol):
    def set(self) -> None: ...


class Loop(Protocol):
    """A running reconcile loop (reconciler.shell.loop.runner.Reconciler satisfies this)."""

    @property
    def state(self) -> LoopState: ...
    @property
    def clock(self) -> Callable[[], float]: ...
    @property
    def wake(self) -> Wake: ...
    @property
    def ray(self) -> RayAdapter: ...


class Exposition(Protocol):
    """Prometheus text and its content type (reconciler.shell.ops.metrics.Exposition)."""

    @property
    def body(self) -> bytes: ...
    @property
    def content_type(self) -> str: ...


@dataclass(frozen=True)
class Observability:
    """What /metrics and the web view read, handed in by the composition root.

    `metrics()` renders the metrics registry; `history(window, now)` the downsampled resource
    history of a window ("1h", "1d", "1w"; KeyError for others); `dashboard` is the Ray
    dashboard's address, for links to a job's page.
    """

    metrics: Callable[[], Exposition] | None = None
    history: Callable[[str, float], Mapping[str, Any]] | None = None
    dashboard: str | None = None
