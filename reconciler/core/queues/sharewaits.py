"""Why each queue's tasks wait after fair share's admission (core/queues/fairshare.py), in
typed lacks: the queues' states for the status file and the API, a running limit, a quota or
a cluster that is full, a reservation for another queue's front."""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

from reconciler.core.admission import policies
from reconciler.core.admission.policies import Candidate
from reconciler.core.admission.waits import (
    BehindTask,
    BorrowBound,
    KeptForQueue,
    NextPass,
    QuotaShortfall,
    RunningLimit,
    Shortfall,
    Waiting,
    shortfall,
)
from reconciler.core.queues.quotas import (
    EPS,
    RESOURCES,
    Share,
    min_of,
    of,
    pos,
    scale,
)
from reconciler.core.queues.shareresult import FairAdmission, HeldRoom, QueueState
from reconciler.core.queues.tree import QueueNode, parents_first
from specs.cluster import Capacity


class FairShareRun(Protocol):
    """What the explanation reads of fair share's run over the queues (fairshare):
    the tree as the pass left it, its result to complete, and the pass's own arithmetic."""

    queues: list[QueueNode]
    leaves: list[QueueNode]
    free: Capacity
    lend: Capacity
    lend_in: dict[int, Capacity]
    result: FairAdmission
    unfit: dict[str, Waiting]
    reserved_by: dict[str, HeldRoom]
    held: dict[str, Candidate]
    version: int
    lacks: dict[tuple[int, int, Capacity], Shortfall | QuotaShortfall]

    def front(self, queue: QueueNode) -> Candidate | None: ...
    def ask(
        self, queue: QueueNode, budget: Capacity, seen: int | None = None
    ) -> policies.Admission: ...
    def share(self, queue: QueueNode, usage: Capacity) -> Share: ...
    def above_nominal(self, queue: QueueNode) -> Capacity: ...
    def can_borrow(self, queue: QueueNode) -> Capacity: ...
    def quota_limit(self, queue: QueueNode) -> Capacity: ...
    def budget(self, queue: QueueNode) -> Capacity: ...
    def slack_for(self, queue: QueueNode) -> Capacity: ...


def explain(run: FairShareRun) -> None:
    _explain_level(run, run.queues)
    for node in parents_first(run.queues):
        if node.children:
            _explain_level(run, node.children)
    for queue in run.leaves:
        _waiting(run, queue)
    run.result.waiting.update(run.unfit)


def _explain_level(run: FairShareRun, level: list[QueueNode]) -> None:
    """Each queue of one set of siblings after the pass."""
    borrowed_total, lend_total = Capacity(), Capacity()
    for queue in level:
        borrowed_total = borrowed_total + queue.borrowed
        lend_total = lend_total + min_of(
            queue.quota.lending_limit, pos(queue.quota.nominal - queue.usage)
        )
    # Who lent what is not tracked per loan; lenders share the total in proportion.
    fraction = Capacity(
        *(
            min(1.0, of(borrowed_total, r) / of(lend_total, r)) if of(lend_total, r) > 0 else 0.0
            for r in RESOURCES
        )
    )
    for queue in level:
        if queue.own:  # the tasks directly in a divided queue's folder: shown as the queue
            continue
        name = queue.quota.name
        offered = min_of(queue.quota.lending_limit, pos(queue.quota.nominal - queue.usage))
        run.result.queues[name] = QueueState(
            name=name,
            nominal=queue.quota.nominal,
            usage=queue.usage,
            borrowed=queue.borrowed,
            lent=scale(offered, fraction),
            share=run.share(queue, queue.usage).weighted,
            admitted=tuple(queue.admitted),
            above_nominal=run.above_nominal(queue),
            front=front.name if (front := run.front(queue)) is not None else None,
            parent=queue.parent.quota.name if queue.parent is not None else None,
            weight=queue.quota.weight,
            past=queue.past,
            lend=run.lend if queue.parent is None else run.lend_in[id(queue.parent)],
        )


def _waiting(run: FairShareRun, queue: QueueNode) -> None:
    if not queue.remaining:
        return
    limiting = queue.limiting()
    limit = limiting.quota.max_running if limiting is not None else None
    if limiting is not None and limit is not None:
        lack = RunningLimit(limiting.quota.name, limit)
        for ahead, candidate in enumerate(queue.remaining):
            run.result.waiting[candidate.name] = Waiting(lack, ahead, queue.quota.name)
        run.result.tails[queue.quota.name] = policies.WalkTail(0, lack)
        return
    budget = run.budget(queue)
    admission = run.ask(queue, budget)
    held = run.held.get(queue.quota.name)
    if admission.tail is not None and held is None:
        # Past the tail every task waits for a lack no queue's reservation rewords.
        run.result.tails[queue.quota.name] = admission.tail
    # Tasks the policy would start but the pass did not: its answers past them assumed they
    # started, so they are not counted ahead; the first one kept back for another queue.
    assumed = 0
    kept_back: Candidate | None = None
    for ahead, candidate in enumerate(queue.remaining):
        waiting = admission.waiting.get(candidate.name)
        if held is not None and candidate is held:
            waiting = Waiting(_not_preemptible(run, queue, candidate.request), ahead)
        elif held is not None and waiting is None:
            waiting = Waiting(BehindTask(held.name), ahead)
        elif assumed and waiting is not None and waiting.ahead is not None:
            waiting = replace(waiting, ahead=waiting.ahead + assumed)
        if waiting is None:
            assumed += 1
            # held at its own level (between sub-queues) or above
            reservation = next(
                (
                    run.reserved_by[n.quota.name]
                    for n in queue.chain()
                    if n.quota.name in run.reserved_by
                ),
                None,
            )
            if reservation is not None:
                kept = KeptForQueue(queue.quota.name, reservation.queue, reservation.front)
                waiting = Waiting(kept)
                kept_back = kept_back or candidate
            else:  # its policy would start it, but nothing more fit in this pass
                waiting = Waiting(_lack(run, queue, candidate.request), note=NextPass())
        waiting = _reword(run, queue, candidate, waiting)
        if kept_back is not None and _nothing_short(waiting):
            # Neither its quota nor the cluster stops it: the task kept back ahead of it does.
            waiting = Waiting(BehindTask(kept_back.name), ahead, queue.quota.name)
        run.result.waiting[candidate.name] = waiting


def _nothing_short(waiting: Waiting) -> bool:
    lacks = waiting.lacks
    return isinstance(lacks, Shortfall) and lacks.asked <= lacks.free + EPS


def _reword(run: FairShareRun, queue: QueueNode, candidate: Candidate, waiting: Waiting) -> Waiting:
    """Name the queue, and tell a full quota from a full cluster."""
    lacks = waiting.lacks
    if isinstance(lacks, Shortfall):
        # The policy measured the shortfall against the budget; its place and note still hold.
        lacks = _lack(run, queue, candidate.request)
    return Waiting(lacks, waiting.ahead, queue.quota.name, waiting.note)


def _not_preemptible(run: FairShareRun, queue: QueueNode, request: Capacity) -> QuotaShortfall:
    room = pos(queue.quota.nominal - queue.usage)
    r = next((r for r in RESOURCES if of(request, r) > of(room, r) + EPS), "cpu")
    quota = queue.quota
    return QuotaShortfall(
        quota.name,
        r,
        of(queue.usage, r),
        of(quota.nominal, r),
        0.0,
        BorrowBound.NOT_PREEMPTIBLE,
        0.0,
    )


def _lack(run: FairShareRun, queue: QueueNode, request: Capacity) -> Shortfall | QuotaShortfall:
    """What `request` lacks beyond its budget: the cluster's free resources, or (when they
    would do) its queue's quota. The same for every request alike until an admission."""
    key = (run.version, id(queue), request)
    found = run.lacks.get(key)
    if found is None:
        found = run.lacks[key] = _lack_anew(run, queue, request)
    return found


def _lack_anew(
    run: FairShareRun, queue: QueueNode, request: Capacity
) -> Shortfall | QuotaShortfall:
    budget = run.quota_limit(queue)
    if request.fits_in(budget):  # the quota allows it: the cluster is full
        return shortfall(request, pos(run.free))
    r = next((r for r in RESOURCES if of(request, r) > of(budget, r) + EPS), "cpu")
    quota = queue.quota
    limit = of(quota.borrowing_limit, r)
    slack = of(run.slack_for(queue), r) - of(queue.borrowed, r)
    if limit <= of(run.slack_for(queue), r):
        bound = BorrowBound.BORROWING_LIMIT
    elif slack > EPS:
        bound, limit = BorrowBound.OTHERS_LEND, slack
    else:
        bound, limit = BorrowBound.NOTHING_TO_LEND, 0.0
    return QuotaShortfall(
        quota.name,
        r,
        of(queue.usage, r),
        of(quota.nominal, r),
        of(run.can_borrow(queue), r),
        bound,
        limit,
    )
