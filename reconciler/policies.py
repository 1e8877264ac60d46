"""Admission policies: given the ordered queue and free resources, which tasks start now.

Pure functions of their arguments. The planner hands them the queue in order (priority high to
low, then FIFO, then name); they decide how far the head of the queue may be overtaken.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from reconciler.ray_types import Capacity
from specs.quantity import human_memory

WAITING_FOR_RESOURCES = "WaitingForResources"
INFLIGHT_LIMIT = "InflightLimit"
BLOCKED_BY_HIGHER = "WaitingBehindHigherPriority"


@dataclass(frozen=True)
class Candidate:
    """A queued task as a policy sees it."""

    name: str
    request: Capacity
    timeout_seconds: float  # 0: no declared bound on its run time


@dataclass(frozen=True)
class Claim:
    """Resources held by a run in Ray, and the latest time it may hold them (None: unbounded)."""

    request: Capacity
    ends_by: float | None


@dataclass(frozen=True)
class Waiting:
    reason: str
    message: str
    estimated_start: float | None = None


@dataclass
class Admission:
    start: list[str] = field(default_factory=list)
    waiting: dict[str, Waiting] = field(default_factory=dict)


def describe_shortfall(request: Capacity, free: Capacity) -> str:
    """'needs 2 CPU; 0 of 4 free' for the first resource that does not fit."""
    if request.cpu > free.cpu + 1e-9:
        return f"needs {request.cpu:g} CPU; {max(free.cpu, 0):g} free"
    if request.gpu > free.gpu + 1e-9:
        return f"needs {request.gpu:g} GPU; {max(free.gpu, 0):g} free"
    return f"needs {human_memory(request.memory)} memory; {human_memory(max(free.memory, 0))} free"


def _ahead(count: int) -> str:
    if count == 0:
        return "first in queue"
    return "1 task ahead" if count == 1 else f"{count} tasks ahead"


def strict(
    queue: Sequence[Candidate], free: Capacity, claims: Sequence[Claim], now: float, slots: int
) -> Admission:
    """The old service's rule: start the head while it fits; the first misfit blocks the rest."""
    del claims, now  # strict needs no estimate of when running jobs end
    admission = Admission()
    blocked_by: str | None = None
    for task in queue:
        index = len(admission.waiting)
        if blocked_by is not None:
            admission.waiting[task.name] = Waiting(
                BLOCKED_BY_HIGHER, f"waits behind {blocked_by}; {_ahead(index)}"
            )
        elif slots <= 0:
            admission.waiting[task.name] = Waiting(
                INFLIGHT_LIMIT, f"too many jobs starting at once; {_ahead(index)}"
            )
            blocked_by = task.name
        elif task.request.fits_in(free):
            admission.start.append(task.name)
            free = free - task.request
            slots -= 1
        else:
            admission.waiting[task.name] = Waiting(
                WAITING_FOR_RESOURCES, f"{describe_shortfall(task.request, free)}; {_ahead(index)}"
            )
            blocked_by = task.name
    return admission


def besteffort(
    queue: Sequence[Candidate], free: Capacity, claims: Sequence[Claim], now: float, slots: int
) -> Admission:
    """Kueue's BestEffortFIFO: anything that fits starts, in queue order. Can starve big tasks."""
    del claims, now
    admission = Admission()
    for task in queue:
        index = len(admission.waiting)
        if slots <= 0:
            admission.waiting[task.name] = Waiting(
                INFLIGHT_LIMIT, f"too many jobs starting at once; {_ahead(index)}"
            )
        elif task.request.fits_in(free):
            admission.start.append(task.name)
            free = free - task.request
            slots -= 1
        else:
            admission.waiting[task.name] = Waiting(
                WAITING_FOR_RESOURCES, f"{describe_shortfall(task.request, free)}; {_ahead(index)}"
            )
    return admission


Policy = Callable[[Sequence[Candidate], Capacity, Sequence[Claim], float, int], Admission]

POLICIES: dict[str, Policy] = {"strict": strict, "besteffort": besteffort}
