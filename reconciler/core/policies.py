"""Admission policies: given the ordered queue and free resources, which tasks start now.

Pure functions of their arguments. The planner hands them the queue in order (priority high to
low, then FIFO, then name); they decide how far the head of the queue may be overtaken.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from reconciler.core.waits import (
    BehindReservation,
    BehindTask,
    InflightLimit,
    NoEstimate,
    ReservedStart,
    Waiting,
    shortfall,
)
from specs.cluster import Capacity


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


@dataclass
class Admission:
    start: list[str] = field(default_factory=list)
    waiting: dict[str, Waiting] = field(default_factory=dict)


def _in_order(
    queue: Sequence[Candidate], free: Capacity, slots: int, *, blocking: bool
) -> Admission:
    """Walk the queue in order, starting what fits. `blocking`: the first task that cannot
    start holds back everything behind it (strict); otherwise later tasks may overtake."""
    admission = Admission()
    blocked_by: str | None = None
    for task in queue:
        index = len(admission.waiting)
        if blocked_by is not None:
            admission.waiting[task.name] = Waiting(BehindTask(blocked_by), index)
            continue
        if slots <= 0:
            waiting = Waiting(InflightLimit(), index)
        elif task.request.fits_in(free):
            admission.start.append(task.name)
            free = free - task.request
            slots -= 1
            continue
        else:
            waiting = Waiting(shortfall(task.request, free), index)
        admission.waiting[task.name] = waiting
        if blocking:
            blocked_by = task.name
    return admission


def strict(
    queue: Sequence[Candidate], free: Capacity, claims: Sequence[Claim], now: float, slots: int
) -> Admission:
    """The old service's rule: start the head while it fits; the first misfit blocks the rest."""
    del claims, now  # strict needs no estimate of when running jobs end
    return _in_order(queue, free, slots, blocking=True)


def besteffort(
    queue: Sequence[Candidate], free: Capacity, claims: Sequence[Claim], now: float, slots: int
) -> Admission:
    """Kueue's BestEffortFIFO: anything that fits starts, in queue order. Can starve big tasks."""
    del claims, now
    return _in_order(queue, free, slots, blocking=False)


@dataclass(frozen=True)
class Reservation:
    """When the blocked head is sure to fit, and what is left over for others at that time."""

    start: float  # the shadow time: every claim the head needs has ended by then
    extra: Capacity  # free at `start` beyond the head's request; may be held past `start`


def reserve(
    request: Capacity, free: Capacity, claims: Sequence[Claim], now: float
) -> Reservation | None:
    """The earliest time `request` fits if every bounded claim runs to its bound.

    Unbounded claims count as held for ever, which is still a true upper bound; None when the
    request needs resources only unbounded claims hold, so no time can be promised.
    """
    available = free
    bounded = sorted((c for c in claims if c.ends_by is not None), key=lambda c: c.ends_by or 0)
    index = 0
    while index < len(bounded):
        shadow = bounded[index].ends_by
        assert shadow is not None
        # Claims ending at the same moment all release at once; take them together.
        while index < len(bounded) and bounded[index].ends_by == shadow:
            available = available + bounded[index].request
            index += 1
        if request.fits_in(available):
            return Reservation(max(shadow, now), available - request)
    return None


def backfill(
    queue: Sequence[Candidate], free: Capacity, claims: Sequence[Claim], now: float, slots: int
) -> Admission:
    """EASY backfilling, as Slurm does it.

    Start the head while it fits, as strict does. The first task that does not fit gets a
    reservation: the earliest time it fits with every running claim held to its declared bound
    (`reserve`). A later task may start now only if it fits in the free resources and either
    ends by its own timeoutSeconds before that time, or uses only the reservation's spare
    resources. A task without a timeout can only use the spare. If no reservation can be
    computed (the head needs what unbounded claims hold), the pass falls back to strict.
    """
    admission = Admission()
    # Jobs started in this pass hold resources too; without them the shadow time would be early.
    claims = list(claims)
    index = 0
    while index < len(queue) and slots > 0 and queue[index].request.fits_in(free):
        task = queue[index]
        admission.start.append(task.name)
        free = free - task.request
        slots -= 1
        ends_by = now + task.timeout_seconds if task.timeout_seconds > 0 else None
        claims.append(Claim(task.request, ends_by))
        index += 1
    if index == len(queue):
        return admission
    head = queue[index]
    if slots <= 0:
        for task in queue[index:]:
            admission.waiting[task.name] = Waiting(InflightLimit(), len(admission.waiting))
        return admission

    lacks = shortfall(head.request, free)
    reservation = reserve(head.request, free, claims, now)
    if reservation is None:
        # The head needs resources held by jobs with no declared end (no timeoutSeconds): no
        # promise is possible, so nobody may overtake it (strict for this pass).
        admission.waiting[head.name] = Waiting(lacks, 0, note=NoEstimate())
        for task in queue[index + 1 :]:
            admission.waiting[task.name] = Waiting(BehindTask(head.name), len(admission.waiting))
        return admission

    shadow, extra = reservation.start, reservation.extra
    admission.waiting[head.name] = Waiting(lacks, 0, note=ReservedStart(shadow))
    for task in queue[index + 1 :]:
        ahead = len(admission.waiting)
        if slots <= 0:
            admission.waiting[task.name] = Waiting(InflightLimit(), ahead)
        elif not task.request.fits_in(free):
            admission.waiting[task.name] = Waiting(shortfall(task.request, free), ahead)
        elif task.timeout_seconds > 0 and now + task.timeout_seconds <= shadow:
            # Ends before the head's reserved start, so it cannot delay it.
            admission.start.append(task.name)
            free = free - task.request
            slots -= 1
        elif task.request.fits_in(extra):
            # May run past the reserved start, but only on what the head leaves over.
            admission.start.append(task.name)
            free = free - task.request
            extra = extra - task.request
            slots -= 1
        else:
            behind = BehindReservation(head.name, shadow, task.timeout_seconds)
            admission.waiting[task.name] = Waiting(behind, ahead)
    return admission


Policy = Callable[[Sequence[Candidate], Capacity, Sequence[Claim], float, int], Admission]

POLICIES: dict[str, Policy] = {"strict": strict, "backfill": backfill, "besteffort": besteffort}
