"""After each pass: the metrics and the resource history, fed from what the pass decided.

Kept out of the loop so the loop stays the order of reads, writes and Ray calls, and this one
place says what a pass reports.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from collections.abc import Set as AbstractSet
from typing import Any, Protocol

from reconciler.shell.ops.history import ResourceHistory
from reconciler.shell.ops.metrics import QueueMetrics
from specs.cluster import Capacity
from specs.task.status import TaskStatus

log = logging.getLogger("rayqueue.loop")


class PassSummary(Protocol):
    """The counts a plan carries (the planner's Summary)."""

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


def history_record(summary: PassSummary, ray_available: bool) -> dict[str, Any]:
    cap = summary.capacity
    return {
        "ray_available": ray_available,
        "capacity": None if cap is None else {"cpu": cap.cpu, "gpu": cap.gpu, "memory": cap.memory},
        "used": {"cpu": summary.used.cpu, "gpu": summary.used.gpu, "memory": summary.used.memory},
        "queued": summary.queued,
        "starting": summary.starting,
        "running": summary.running,
    }


class PassObserver:
    def __init__(self, history: ResourceHistory, metrics: QueueMetrics | None = None) -> None:
        self.history = history
        self.metrics = metrics

    def observe(
        self,
        now: float,
        before: Mapping[str, TaskStatus],
        after: Mapping[str, TaskStatus],
        summary: PassSummary,
        *,
        ray_available: bool,
        priorities: Mapping[str, int],
        submitted: AbstractSet[str] = frozenset(),
        changed: Collection[str] | None = None,
    ) -> None:
        """`changed`: the names whose status changed (None: look at every status)."""
        if self.metrics is not None:
            self.metrics.observe_pass(
                before,
                after,
                capacity=summary.capacity,
                reserved=summary.used,
                ray_available=ray_available,
                priorities=priorities,
                submitted=submitted,
                changed=changed,
            )
        self.heartbeat(now, summary, ray_available=ray_available)

    def heartbeat(self, now: float, summary: PassSummary, *, ray_available: bool) -> None:
        """A pass that changed nothing: the gauges stand; only the history's heartbeat."""
        try:
            self.history.record(now, history_record(summary, ray_available))
        except OSError as exc:
            log.warning("cannot append resource history: %s", exc)
