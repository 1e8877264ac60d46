"""Admission policies: given the ordered queue and free resources, which tasks start now.

Pure functions of their arguments. The planner hands them the queue in order (priority high to
low, then FIFO, then name); they decide how far the front of the queue may be overtaken.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from reconciler.core.admission.waits import (
    BehindReservation,
    BehindTask,
    InflightLimit,
    Lack,
    NoEstimate,
    NotConsidered,
    ReservedStart,
    Waiting,
    shortfall,
)
from specs.cluster import Capacity


@dataclass(frozen=True, slots=True)  # one per waiting task, kept between passes: no __dict__
class Candidate:
    """A queued task as a policy sees it."""

    name: str
    request: Capacity
    timeout_seconds: float  # 0: no declared bound on its run time
    preemptible: bool = True  # false: with team queues, it never borrows


@dataclass(frozen=True)
class Claim:
    """Resources held by a run in Ray, and the latest time it may hold them (None: unbounded)."""

    request: Capacity
    ends_by: float | None
    task: str = ""  # whose run it is: with team queues, the claims of a queue free its quota


@dataclass(frozen=True)
class QuotaView:
    """With team queues, what a queue's quota lets it take: `room` now, and its own runs'
    claims, the only ones whose end gives it more. Backfill's estimate must wait for both
    this and the cluster, or it promises a start the quota will not allow."""

    room: Capacity
    claims: Sequence[Claim]
    free: Capacity  # the cluster's free resources (the policy's budget is the smaller)


class WalkTail(NamedTuple):
    """Where a policy's walk ended: from index `at` of the queue on, every task waits for the
    same `lack` (its place aside), whatever comes after it."""

    at: int
    lack: Lack


@dataclass
class Admission:
    start: list[str] = field(default_factory=list)
    waiting: dict[str, Waiting] = field(default_factory=dict)
    # Where the walk ended; None: the walk reached the end. The incremental planner gives the
    # policy only the front of a long queue and fills in the rest.
    tail: WalkTail | None = None
    # The latest `now` at which this answer holds: a task started (or, where a caller starts
    # fewer, let start) only because it ends before the front's reserved start is not once it
    # would end after it.
    until: float = math.inf


def _in_order(
    queue: Sequence[Candidate],
    free: Capacity,
    slots: int,
    *,
    blocking: bool,
    bound: int | None = None,
) -> Admission:
    """Walk the queue in order, starting what fits. `blocking`: the first task that cannot
    start holds back everything behind it (strict); otherwise later tasks may overtake, up to
    `bound` of them past the first that could not start (None: no bound)."""
    admission = Admission()
    blocked_by: str | None = None
    tested = -1  # candidates tested past the first that could not start; -1: none failed yet
    for position, task in enumerate(queue):
        index = len(admission.waiting)
        if blocked_by is not None:
            admission.waiting[task.name] = Waiting(BehindTask(blocked_by), index)
            continue
        if slots <= 0 and not blocking and admission.tail is None:
            admission.tail = WalkTail(position, InflightLimit())  # slots never come back in a pass
        if bound is not None and tested >= bound and slots > 0:
            _not_considered(admission, queue[position:], bound)
            admission.tail = WalkTail(position, NotConsidered(bound))
            return admission
        if tested >= 0:
            tested += 1
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
        tested = max(tested, 0)
        if blocking:
            blocked_by = task.name
            admission.tail = WalkTail(position + 1, BehindTask(task.name))
    return admission


def _not_considered(admission: Admission, rest: Sequence[Candidate], bound: int) -> None:
    """The tasks past the bound: in the queue's order, not tested this pass."""
    waiting, lack = admission.waiting, NotConsidered(bound)  # one lack for all (frozen)
    for ahead, task in enumerate(rest, len(waiting)):
        waiting[task.name] = Waiting(lack, ahead)


def strict(
    queue: Sequence[Candidate], free: Capacity, claims: Sequence[Claim], now: float, slots: int
) -> Admission:
    """The strict rule: start the front while it fits; the first misfit blocks the rest."""
    del claims, now  # strict needs no estimate of when running jobs end
    return _in_order(queue, free, slots, blocking=True)


def besteffort(
    queue: Sequence[Candidate],
    free: Capacity,
    claims: Sequence[Claim],
    now: float,
    slots: int,
    bound: int | None = None,
) -> Admission:
    """Kueue's BestEffortFIFO: anything that fits starts, in queue order. Can starve big tasks.
    `bound`: at most this many tasks tested past the first that cannot start."""
    del claims, now
    return _in_order(queue, free, slots, blocking=False, bound=bound)


@dataclass(frozen=True)
class Reservation:
    """When the blocked front is sure to fit, and what is left over for others at that time."""

    start: float  # the shadow time: every claim the front needs has ended by then
    extra: Capacity  # free at `start` beyond the front's request; may be held past `start`
    quota_extra: Capacity | None = None  # with a QuotaView: its quota's room beyond the front


def reserve(
    request: Capacity,
    free: Capacity,
    claims: Sequence[Claim],
    now: float,
    quota: QuotaView | None = None,
) -> Reservation | None:
    """The earliest time `request` fits if every bounded claim runs to its bound: in the
    cluster, and (given `quota`) in its queue's quota too.

    Unbounded claims count as held for ever, which is still a true upper bound; None when the
    request needs resources only unbounded claims hold, so no time can be promised.
    """
    bounded = sorted((c for c in claims if c.ends_by is not None), key=_end)
    own = sorted((c for c in quota.claims if c.ends_by is not None), key=_end) if quota else []
    available, room = free, quota.room if quota is not None else Capacity()
    i = j = 0
    while i < len(bounded) or j < len(own):
        # Claims ending at the same moment all release at once; take them together.
        shadow = min(_end(c) for c in (bounded[i : i + 1] + own[j : j + 1]))
        while i < len(bounded) and _end(bounded[i]) == shadow:
            available = available + bounded[i].request
            i += 1
        while j < len(own) and _end(own[j]) == shadow:
            room = room + own[j].request
            j += 1
        if not request.fits_in(available):
            continue
        if quota is None:
            return Reservation(max(shadow, now), available - request)
        if request.fits_in(room):
            return Reservation(max(shadow, now), available - request, room - request)
    return None


def _end(claim: Claim) -> float:
    assert claim.ends_by is not None
    return claim.ends_by


def backfill(
    queue: Sequence[Candidate],
    free: Capacity,
    claims: Sequence[Claim],
    now: float,
    slots: int,
    quota: QuotaView | None = None,
    bound: int | None = None,
) -> Admission:
    """EASY backfilling, as Slurm does it.

    Start the front while it fits, as strict does. The first task that does not fit gets a
    reservation: the earliest time it fits with every running claim held to its declared bound
    (`reserve`). A later task may start now only if it fits in the free resources and either
    ends by its own timeoutSeconds before that time, or uses only the reservation's spare
    resources. A task without a timeout can only use the spare. If no reservation can be
    computed (the front needs what unbounded claims hold), the pass falls back to strict.
    With team queues, `quota` is the queue's view: its reservation waits for the queue's
    quota as well as for the cluster, and what runs past it must fit in both. `bound` (Slurm's
    bf_max_job_test): at most this many tasks are tested past the front that cannot start; the
    rest wait NotConsidered.
    """
    admission = Admission()
    # Jobs started in this pass hold resources too; without them the shadow time would be early.
    claims = list(claims)
    own = list(quota.claims) if quota is not None else []
    index = 0
    while index < len(queue) and slots > 0 and queue[index].request.fits_in(free):
        task = queue[index]
        admission.start.append(task.name)
        free = free - task.request
        slots -= 1
        ends_by = now + task.timeout_seconds if task.timeout_seconds > 0 else None
        claims.append(Claim(task.request, ends_by, task.name))
        own.append(claims[-1])
        index += 1
    if index == len(queue):
        return admission
    front = queue[index]
    if slots <= 0:
        for task in queue[index:]:
            admission.waiting[task.name] = Waiting(InflightLimit(), len(admission.waiting))
        admission.tail = WalkTail(index, InflightLimit())
        return admission

    lacks = shortfall(front.request, free)
    view, cluster_free = None, free
    if quota is not None:  # `free` is the budget: the smaller of the cluster and the quota
        used = sum((task.request for task in queue[:index]), Capacity())
        view = QuotaView(quota.room - used, own, quota.free - used)
        cluster_free = view.free
    reservation = reserve(front.request, cluster_free, claims, now, view)
    if reservation is None:
        # The front needs resources held by jobs with no declared end (no timeoutSeconds): no
        # promise is possible, so nobody may overtake it (strict for this pass).
        admission.waiting[front.name] = Waiting(lacks, 0, note=NoEstimate())
        for task in queue[index + 1 :]:
            admission.waiting[task.name] = Waiting(BehindTask(front.name), len(admission.waiting))
        admission.tail = WalkTail(index + 1, BehindTask(front.name))
        return admission

    shadow, extra = reservation.start, reservation.extra
    if any(task.timeout_seconds > 0 for task in queue[:index]):
        # A start of this pass is bounded from now, so the reserved start may move with the
        # clock: the answer holds for this instant only (where the caller starts fewer than
        # this walk does, as fair share may, nothing else would say so).
        admission.until = min(admission.until, now)
    if reservation.quota_extra is not None:  # what runs past the start holds both
        extra = Capacity(
            min(extra.cpu, reservation.quota_extra.cpu),
            min(extra.gpu, reservation.quota_extra.gpu),
            min(extra.memory, reservation.quota_extra.memory),
        )
    admission.waiting[front.name] = Waiting(lacks, 0, note=ReservedStart(shadow))
    for tested, task in enumerate(queue[index + 1 :]):
        ahead = len(admission.waiting)
        if bound is not None and tested >= bound and slots > 0:
            _not_considered(admission, queue[index + 1 + tested :], bound)
            admission.tail = WalkTail(index + 1 + tested, NotConsidered(bound))
            break
        if slots <= 0:
            admission.waiting[task.name] = Waiting(InflightLimit(), ahead)
            if admission.tail is None:
                admission.tail = WalkTail(index + 1 + tested, InflightLimit())
        elif not task.request.fits_in(free):
            admission.waiting[task.name] = Waiting(shortfall(task.request, free), ahead)
        elif task.timeout_seconds > 0 and now + task.timeout_seconds <= shadow:
            # Ends before the front's reserved start, so it cannot delay it.
            admission.until = min(admission.until, shadow - task.timeout_seconds)
            admission.start.append(task.name)
            free = free - task.request
            slots -= 1
        elif task.request.fits_in(extra):
            # May run past the reserved start, but only on what the front leaves over.
            admission.start.append(task.name)
            free = free - task.request
            extra = extra - task.request
            slots -= 1
        else:
            behind = BehindReservation(front.name, shadow, task.timeout_seconds)
            admission.waiting[task.name] = Waiting(behind, ahead)
    return admission


def admit_bounded(
    name: str,
    queue: Sequence[Candidate],
    free: Capacity,
    claims: Sequence[Claim],
    now: float,
    slots: int,
    bound: int | None,
) -> Admission:
    """The policy `name` on one queue, its walk bounded as `backfill_candidates` says."""
    if name == "backfill":
        return backfill(queue, free, claims, now, slots, bound=bound)
    if name == "besteffort":
        return besteffort(queue, free, claims, now, slots, bound=bound)
    return strict(queue, free, claims, now, slots)


Policy = Callable[[Sequence[Candidate], Capacity, Sequence[Claim], float, int], Admission]

POLICIES: dict[str, Policy] = {"strict": strict, "backfill": backfill, "besteffort": besteffort}
