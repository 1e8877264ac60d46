"""Admission across queues: nominal quotas, borrowing and lending within limits, fair sharing.

Pure functions of their arguments. Each queue keeps its own order and policy (strict, backfill,
besteffort from `reconciler.core.admission.policies`); this module decides, one admission at a
time, which
queue's next pick goes first and how much each queue may take:

- Within its nominal quota a queue is bounded only by what the cluster has free.
- Above nominal it borrows: at most its `borrowingLimit` in total, and only from idle quota the
  other queues lend. A queue lends `min(lendingLimit, nominal - usage - its front's request)`
  when its front fits within its nominal: a queue whose work comes back is not idle, so its
  quota stops being lent at once and returns to it as borrowed jobs end.
- Picks within nominal go first; then the queue with the lowest weighted dominant share of
  what it borrows before its pick, the share counting the pick breaking ties
  (`quotas.dominant_share`: max over cpu, gpu, memory of
  its decayed past use above nominal when given (core/queues/usage.py), plus its usage above
  nominal now (at `CURRENT_USE_WEIGHT` beside a past, in full without one), / what the
  queues can lend, divided by weight). Shares are recomputed
  after every admission, so one pass can never hand a queue more than its turn (kueue #9345).
- A queue's blocked front stops only that queue (kueue #4809); a budget is per resource, and a
  task that needs none of a blocked resource does not see it (kueue #8309).

Why the pool stays sound: with the listed nominals summing to at most the cluster (the default
queue gets the rest), total borrowed <= total lendable implies that what is free always covers
the fronts that are guaranteed, so no borrower can take a returning team's quota.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from reconciler.core.admission import policies
from reconciler.core.admission.policies import Candidate, Claim, Policy, reserve
from reconciler.core.admission.waits import (
    OverQuota,
    QuotaShortfall,
    Shortfall,
    Waiting,
)
from reconciler.core.queues import sharewaits
from reconciler.core.queues.quotas import (
    EPS,
    NO_LIMIT,
    RESOURCES,
    QueueQuota,
    Quotas,
    Share,
    dominant_share,
    lendable,
    min_of,
    of,
    pos,
    resolve,
)
from reconciler.core.queues.shareresult import BACKFILL_RESERVATION as BACKFILL_RESERVATION
from reconciler.core.queues.shareresult import NO_RESERVATION as NO_RESERVATION
from reconciler.core.queues.shareresult import RESERVATION_OF_POLICY as RESERVATION_OF_POLICY
from reconciler.core.queues.shareresult import STRICT_RESERVATION as STRICT_RESERVATION
from reconciler.core.queues.shareresult import FairAdmission as FairAdmission
from reconciler.core.queues.shareresult import HeldRoom, OwnTest
from reconciler.core.queues.shareresult import QueueState as QueueState
from reconciler.core.queues.tree import QueueDemand as QueueDemand  # callers import it here
from reconciler.core.queues.tree import QueueNode, build_tree, parents_first
from specs.cluster import Capacity


def _first_strict(queue: Sequence[Candidate], budget: Capacity) -> Candidate | None:
    return queue[0] if queue and queue[0].request.fits_in(budget) else None


def _first_besteffort(queue: Sequence[Candidate], budget: Capacity) -> Candidate | None:
    return next((c for c in queue if c.request.fits_in(budget)), None)


_FIRST_START: dict[Policy, Callable[[Sequence[Candidate], Capacity], Candidate | None]] = {
    policies.strict: _first_strict,
    policies.besteffort: _first_besteffort,
}


# Which pick starts next, lowest first (_FairShareRun._order).
_OrderKey = tuple[bool, bool, float, int, Share, float, str]


class _FairShareRun:
    def __init__(
        self,
        capacity: Capacity,
        free: Capacity,
        queues: Sequence[QueueDemand],
        claims: Sequence[Claim],
        now: float,
        slots: int,
        reservation: str,
        first: frozenset[str] = frozenset(),
        order: Mapping[str, int] | None = None,
        bound: int | None = None,
    ) -> None:
        self.first = first
        # backfill and besteffort test at most this many of a queue's tasks past its first
        # that cannot start (backfill_candidates); the rest wait NotConsidered
        self.bound = bound
        self.order = order or {}
        self.capacity = capacity
        self.free = free
        self.claims = list(claims)
        self.now = now
        self.slots = slots
        self.queues, self.leaves = build_tree(queues)
        self.owner = {c.name: leaf for leaf in self.leaves for c in leaf.remaining}
        # What shares are measured against, per set of siblings: the top queues, and each
        # divided queue's sub-queues (the same formula at every level).
        self.lend = lendable(q.quota for q in self.queues)
        self.lend_in: dict[int, Capacity] = {}
        for node in parents_first(self.queues):
            if node.children:  # what its sub-queues may borrow: between them, and from above
                above = pos(self._ceiling(node)[0] - node.quota.nominal)
                self.lend_in[id(node)] = lendable(c.quota for c in node.children) + above
        self.result = FairAdmission()
        self.unfit: dict[str, Waiting] = {}
        self.reservation = reservation
        # queues whose borrowing a reservation stopped
        self.reserved_by: dict[str, HeldRoom] = {}
        # queues held by a pick that may not borrow (preemptible: false), by queue
        self.held: dict[str, Candidate] = {}
        # Caches, valid while `version` (bumped by every admission) stands.
        self.version = 0
        self.totals: dict[int, tuple[int, Capacity, Capacity]] = {}
        self.budgets: dict[int, tuple[int, Capacity]] = {}
        self.slacks: dict[int, tuple[int, Capacity]] = {}
        self.lacks: dict[tuple[int, int, Capacity], Shortfall | QuotaShortfall] = {}

    def siblings(self, queue: QueueNode) -> list[QueueNode]:
        return queue.parent.children if queue.parent is not None else self.queues

    def slack_for(self, queue: QueueNode) -> Capacity:
        """What its siblings lend and nobody has borrowed yet (negative: over-borrowed)."""
        cached = self.slacks.get(id(queue))
        if cached is not None and cached[0] == self.version:
            return cached[1]
        lend, borrowed = self._totals(queue.parent)
        slack = (lend - queue.lendable()) - (borrowed - queue.borrowed)
        self.slacks[id(queue)] = (self.version, slack)
        return slack

    def _totals(self, parent: QueueNode | None = None) -> tuple[Capacity, Capacity]:
        """Lendable and borrowed over a set of siblings (the top queues when `parent` is None);
        they change only when a task is admitted."""
        key = id(parent)
        cached = self.totals.get(key)
        if cached is None or cached[0] != self.version:
            lend, borrowed = Capacity(), Capacity()
            for other in parent.children if parent is not None else self.queues:
                lend = lend + other.lendable()
                borrowed = borrowed + other.borrowed
            cached = (self.version, lend, borrowed)
            self.totals[key] = cached
        return cached[1], cached[2]

    def above_nominal(self, queue: QueueNode) -> Capacity:
        """Per resource: the most the queue may hold above its nominal quota right now. A
        sub-queue borrows its siblings' idle quota first, then what its parent may hold above
        its own (the parent's budget, which bounds every sub-queue, counts what is taken)."""
        slack = self.slack_for(queue)
        if queue.parent is not None:
            slack = slack + self.above_nominal(queue.parent)
        return pos(min_of(queue.quota.borrowing_limit, slack))

    def can_borrow(self, queue: QueueNode) -> Capacity:
        """Per resource: how much more it may borrow now."""
        return pos(self.above_nominal(queue) - queue.borrowed)

    def quota_limit(self, queue: QueueNode) -> Capacity:
        """Per resource: what its quota alone lets the next admission take."""
        return pos(queue.quota.nominal - queue.usage + self.above_nominal(queue))

    def budget(self, queue: QueueNode) -> Capacity:
        """Per resource: the most its next admission may take."""
        cached = self.budgets.get(id(queue))
        if cached is not None and cached[0] == self.version:
            return cached[1]
        # A sub-queue never gets more than its parent may take.
        outer = pos(self.free) if queue.parent is None else self.budget(queue.parent)
        budget = min_of(outer, self.quota_limit(queue))
        self.budgets[id(queue)] = (self.version, budget)
        return budget

    def pick(self, queue: QueueNode, least: bool = False) -> Candidate | None:
        """The task the queue's own policy would start next within its budget; for a divided
        queue, the pick of its sub-queue that goes first, by the same key as the top level.
        `least`: the queue is the least served with work waiting (`_own_first`); for a divided
        queue, its least-served sub-queue with work waiting is then too."""
        if queue.children:
            return self._pick_among(queue, least)
        if not queue.remaining or queue.at_limit:
            return None
        budget = self.budget(queue)
        fast = _FIRST_START.get(queue.policy)
        if fast is not None:  # strict and besteffort need neither claims nor the whole walk
            if self.slots <= 0:
                return None
            # The bounded walk tests the first task and `bound` more past it when it misfits.
            seen = queue.remaining if self.bound is None else queue.remaining[: self.bound + 1]
            found = fast(seen, budget)
            # strict reads its first task only; besteffort, all it is given
            seen_all = queue.cut and len(seen) == len(queue.remaining)
            if found is None and seen_all and queue.policy is not policies.strict:
                self.result.short.add(queue.quota.name)
            return found
        key = (budget, self.free, len(queue.remaining), self.slots, len(self.claims))
        if queue.memo is None or queue.memo[0] != key:
            # Bounded, the walk's starts lie in its first slots + 1 + bound tasks: ask on those.
            front = None if self.bound is None else self.slots + 1 + self.bound
            admission = self.ask(queue, budget, front)
            queue.memo = (key, admission.start)
        starts = queue.memo[1]
        if not starts:
            return self._own_first(queue, budget) if least else None
        return next(c for c in queue.remaining if c.name == starts[0])

    def _own_first(self, queue: QueueNode, budget: Capacity) -> Candidate | None:
        """Under backfill, the least-served queue whose front cannot start starts its own next
        task that fits now, judged against the room the cluster holds for that front
        (`_held_room`, which the others may not borrow): its own backfill reserves within
        its quota view, where only its own runs ending free room, so it finds a late start or
        none and lets nothing past. While its wide front waits, the queue behind in share would
        otherwise hold nothing (the room drains idle or goes to the queues ahead of it), and
        the share it is owed is lost for good. As EASY backfill: the task fits
        beside the front (now or at its reserved start) or ends, by its timeout, before that
        start (`OwnTest.lets_start`), so the queue's own narrow work never pushes its wide front
        back."""
        if queue.policy is not policies.backfill:
            return None
        seen = queue.remaining if self.bound is None else queue.remaining[: self.bound + 1]
        more = None if self.bound is None else self.bound + 1 - len(seen)
        # within its nominal quota, the queue's own backfill order stands (OwnTest.lets_start).
        # The room held for its front, whether or not the others are held back for it: its own
        # runs count in its usage, so once one starts the front may no longer fit what its
        # quota gives once lent (`_reservation_for`), yet that run ends and the front's turn
        # comes; a later run of its own must not push it back either way.
        hold = self._held_room(queue, seen[0])
        test = OwnTest(budget, queue.usage, queue.quota.nominal, more, hold, self.now)
        for candidate in seen[1:]:
            if test.lets_start(candidate):
                self.result.until = min(self.result.until, test.until(candidate))
                return candidate
        if queue.cut and len(seen) == len(queue.remaining):
            # Given only its front: a task past what was given might start. The caller tests
            # those (FairAdmission.unread) rather than giving more at once: with the cluster
            # full, none fits, and giving more would redo the whole walk for nothing.
            self.result.unread.setdefault(queue.quota.name, []).append(test)
        return None

    def _pick_among(self, parent: QueueNode, least: bool = False) -> Candidate | None:
        """Between siblings, the top level's rules again (`run`): the least-served sub-queue
        with work waiting (of a least-served parent) starts its own smaller task past its
        blocked front (`_own_first`), and its siblings get past the room held for that front only
        with what fits beside it (`HeldRoom.lets_past`): a team is to its users what the
        cluster is to its teams."""
        if parent.at_limit:
            return None
        best: tuple[_OrderKey, Candidate] | None = None
        hold: HeldRoom | None = None
        for child in sorted(parent.children, key=self._share_key):
            candidate = self.pick(child, least)
            if self.front(child) is not None:
                least = False
            if candidate is None:
                if hold is None and not child.at_limit:
                    hold = self._reservation_for(child)
                continue
            borrows = not (child.usage + candidate.request).fits_in(child.quota.nominal)
            if borrows and not candidate.preemptible:
                self.held[self.owner[candidate.name].quota.name] = candidate
                continue
            if (
                borrows
                and hold is not None
                and candidate.name not in self.first
                and not hold.lets_past(candidate)
            ):
                self.reserved_by[child.quota.name] = hold
                continue
            # The same order as between top queues (run).
            key = self._order(child, candidate, borrows)
            if best is None or key < best[0]:
                best = (key, candidate)
        return best[1] if best is not None else None

    def front(self, queue: QueueNode) -> Candidate | None:
        """Its first waiting task; for a divided queue, that of its least-served sub-queue."""
        if not queue.children:
            return queue.remaining[0] if queue.remaining else None
        for child in sorted(queue.children, key=self._share_key):
            front = self.front(child)
            if front is not None:
                return front
        return None

    def ask(
        self, queue: QueueNode, budget: Capacity, seen: int | None = None
    ) -> policies.Admission:
        """The queue's policy on its waiting tasks (the first `seen` of them, if given: for
        its starts only); backfill also gets the queue's view, so its reservation waits for
        what frees the quota as well as the cluster. Its answer holds as long as the pass's."""
        admission = self._policy(queue, budget, seen)
        self.result.until = min(self.result.until, admission.until)
        if queue.cut and admission.tail is None and (seen is None or seen >= len(queue.remaining)):
            self.result.short.add(queue.quota.name)
        return admission

    def _policy(self, queue: QueueNode, budget: Capacity, seen: int | None) -> policies.Admission:
        if queue.policy is policies.backfill:
            view = policies.QuotaView(self.quota_limit(queue), queue.claims, pos(self.free))
            return policies.backfill(
                queue.remaining if seen is None else queue.remaining[:seen],
                budget,
                self.claims,
                self.now,
                self.slots,
                quota=view,
                bound=self.bound,
            )
        if queue.policy is policies.besteffort:
            return policies.besteffort(
                queue.remaining, budget, self.claims, self.now, self.slots, bound=self.bound
            )
        return queue.policy(queue.remaining, budget, self.claims, self.now, self.slots)

    def run(self) -> FairAdmission:
        for queue in self.leaves:
            self._drop_never_fitting(queue)
        while self.slots > 0:
            best: tuple[tuple[bool, *_OrderKey], QueueNode, Candidate] | None = None
            reservation: HeldRoom | None = None
            self.reserved_by = {}
            self.held = {}
            least = True  # until the first queue with work waiting
            for queue in sorted(self.queues, key=self._share_key):
                candidate = self.pick(queue, least)
                if self.front(queue) is not None:
                    least = False
                if candidate is None:
                    if reservation is None and not queue.at_limit:
                        reservation = self._reservation_for(queue)
                    continue
                borrows = not (queue.usage + candidate.request).fits_in(queue.quota.nominal)
                if borrows and not candidate.preemptible:
                    # Work above nominal must stay reclaimable: a run nobody may stop never
                    # borrows. The queue waits for its own quota, as if its quota were full.
                    self.held[self.owner[candidate.name].quota.name] = candidate
                    continue
                reserved = candidate.name in self.first
                if (
                    borrows
                    and not reserved
                    and reservation is not None
                    and not reservation.lets_past(candidate)
                ):
                    self.reserved_by[queue.quota.name] = reservation
                    continue
                # A preemptor whose victims are gone goes first: the room they left is its;
                # but a borrowing one after the picks within nominal (their quota is never
                # held back, and reclaim would only stop it again).
                order = self._order(queue, candidate, borrows)
                key = (order[0], not reserved, *order[1:])
                if best is None or key < best[0]:
                    best = (key, queue, candidate)
            self.result.held = reservation
            if best is None:
                break
            _, queue, candidate = best
            self._admit(queue, candidate)
        sharewaits.explain(self)
        return self.result

    def _order(self, queue: QueueNode, candidate: Candidate, borrows: bool) -> _OrderKey:
        """Which queue's pick starts next, lowest first (between top queues and between
        siblings alike): picks within nominal; then the least-served queue, by its weighted
        share before the pick: counting the pick would make a wide front lose to any narrow pick
        and to a heavier weight's (Slurm orders by the account's usage, not the job's size).
        Among borrowing picks of equal share, the queue whose front comes first in the cluster's
        order (priority, queuedAt: the longest waiting) goes first: with nothing running every
        queue's share is 0, and a wide front would otherwise lose every tie to a narrow pick.
        Then the share with the pick (the weighted share alone comes first, so a tie on it is
        not decided by the unweighted ratio). A weight-0 queue whose pick borrows goes after
        every other (its share with the pick is inf)."""
        usage = queue.usage + candidate.request
        after = self.share(queue, usage)
        return (
            borrows,
            math.isinf(after.weighted),
            self.share(queue, queue.usage).weighted,
            self._front_place(queue) if borrows else 0,
            after,
            _guarantee_used(queue, usage),
            queue.quota.name,
        )

    def share(self, queue: QueueNode, usage: Capacity) -> Share:
        quota = queue.quota
        lend = self.lend if queue.parent is None else self.lend_in[id(queue.parent)]
        return dominant_share(usage, quota.nominal, lend, quota.weight, queue.past)

    def _share_key(self, queue: QueueNode) -> tuple[Share, float, int, str]:
        return (
            self.share(queue, queue.usage),
            _guarantee_used(queue, queue.usage),
            self._front_place(queue),
            queue.quota.name,
        )

    def _front_place(self, queue: QueueNode) -> int:
        """Where its first waiting task stands in the cluster's order (none: last)."""
        if not queue.children:
            if not queue.remaining:
                return len(self.order)
            return self.order.get(queue.remaining[0].name, len(self.order))
        return min((self._front_place(child) for child in queue.children), default=len(self.order))

    def _reservation_for(self, queue: QueueNode) -> HeldRoom | None:
        """The least-served queue whose front waits for the cluster (not for its quota) keeps
        what is freed for that front: queues above it in share may not borrow it away, or the
        queue with the lowest share would stay lowest for ever. Their nominal stays theirs."""
        front = self.front(queue)
        if self.reservation == NO_RESERVATION or front is None:
            return None
        free = pos(self.free)
        if front.request.fits_in(free) or not front.request.fits_in(self._room_once_lent(queue)):
            return None
        return self._held_room(queue, front)

    def _held_room(self, queue: QueueNode, front: Candidate) -> HeldRoom:
        """What is left beside `front` now and, under backfill, at the earliest time it fits
        the cluster with every claim held to its bound."""
        free = pos(self.free)
        spare = free - front.request
        if self.reservation == BACKFILL_RESERVATION:
            booked = reserve(front.request, free, self.claims, self.now)
            if booked is not None:
                return HeldRoom(queue.quota.name, front.name, spare, booked.start, booked.extra)
        return HeldRoom(queue.quota.name, front.name, spare, None, None)

    def _room_once_lent(self, queue: QueueNode) -> Capacity:
        """Room its quota will give once the others' borrowed jobs end: borrowed resources
        come back to the pool, but nobody's nominal use does. A sub-queue's also within its
        parent's."""
        room = pos(queue.quota.nominal - queue.usage + self._may_borrow(queue))
        if queue.parent is not None:
            room = min_of(room, self._room_once_lent(queue.parent))
        return room

    def _may_borrow(self, queue: QueueNode) -> Capacity:
        """The most it could hold above its nominal quota once others' borrowed jobs end:
        what its siblings lend, and for a sub-queue what its parent could hold above its own."""
        lend, _ = self._totals(queue.parent)
        others = lend - queue.lendable()
        if queue.parent is not None:
            others = others + self._may_borrow(queue.parent)
        return pos(min_of(queue.quota.borrowing_limit, others))

    def _admit(self, queue: QueueNode, candidate: Candidate) -> None:
        self.version += 1
        queue = self.owner[candidate.name]
        queue.remaining.remove(candidate)
        for node in queue.chain():
            node.admitted.append(candidate.name)
            node.usage = node.usage + candidate.request
        self.free = self.free - candidate.request
        self.slots -= 1
        ends_by = self.now + candidate.timeout_seconds if candidate.timeout_seconds > 0 else None
        self.claims.append(Claim(candidate.request, ends_by, candidate.name))
        queue.claims.append(self.claims[-1])
        self.result.start.append(candidate.name)

    def _drop_never_fitting(self, queue: QueueNode) -> None:
        """A task bigger than its queue can ever get can never start while the config stands;
        like a task bigger than the cluster, it must not block its queue. The most a queue can
        get: its nominal quota, plus what it may borrow (its borrowingLimit, and at most what
        the others can ever lend: each min(lendingLimit, nominal)), never more than the cluster.
        A task with preemptible: false never borrows: its queue's nominal quota alone."""
        ceiling = self.ceiling_of(queue)
        for candidate in list(queue.remaining):
            request = candidate.request
            most = ceiling.borrowing if candidate.preemptible else ceiling.own
            for r in RESOURCES:
                if of(request, r) > of(most, r) + EPS:
                    quota = queue.quota
                    if candidate.preemptible:
                        over = OverQuota(
                            quota.name,
                            r,
                            of(request, r),
                            of(quota.nominal, r),
                            of(quota.borrowing_limit, r),
                            of(ceiling.lenders, r),
                        )
                    else:
                        over = OverQuota(
                            quota.name, r, of(request, r), of(ceiling.own, r), 0.0, 0.0, False
                        )
                    self.unfit[candidate.name] = Waiting(over)
                    queue.remaining.remove(candidate)
                    break

    def ceiling_of(self, queue: QueueNode) -> Ceiling:
        borrowing, lenders = self._ceiling(queue)
        own = self.capacity
        for node in queue.chain():  # every level's nominal bounds a start that never borrows
            own = min_of(own, node.quota.nominal)
        return Ceiling(borrowing, own, lenders)

    def _ceiling(self, queue: QueueNode) -> tuple[Capacity, Capacity]:
        """The most a queue can ever hold, and what others can ever lend it: its siblings'
        lendable quota, and for a sub-queue also what its parent can hold above its own."""
        lenders = Capacity()
        for other in self.siblings(queue):
            if other is not queue:
                lenders = lenders + min_of(other.quota.lending_limit, other.quota.nominal)
        outer = self.capacity
        if queue.parent is not None:
            outer, _ = self._ceiling(queue.parent)
            lenders = lenders + pos(outer - queue.parent.quota.nominal)
        borrowable = min_of(queue.quota.borrowing_limit, lenders)
        return min_of(outer, queue.quota.nominal + borrowable), lenders


def _guarantee_used(queue: QueueNode, usage: Capacity) -> float:
    """How much of its nominal quota a queue uses (the largest fraction over resources): among
    queues of equal share (all within nominal have 0), the one that has used least of its own
    guarantee goes first, not the first by name."""
    nominal = queue.quota.nominal
    fractions = [of(usage, r) / of(nominal, r) for r in RESOURCES if of(nominal, r) > EPS]
    return max(fractions, default=0.0)


def admit(
    capacity: Capacity,
    free: Capacity,
    queues: Sequence[QueueDemand],
    claims: Sequence[Claim],
    now: float,
    slots: int,
    reservation: str = STRICT_RESERVATION,
    first: frozenset[str] = frozenset(),
    order: Mapping[str, int] | None = None,
    bound: int | None = None,
) -> FairAdmission:
    """Decide one pass across queues. `free` is what the cluster physically has free now;
    `claims` are every running job's (for backfill's estimates); `slots` caps starts.
    `reservation`: how the least-served queue's blocked front holds back borrowers: `strict`
    (only spare resources may be borrowed), `backfill` (also what is left beside the front at
    its reserved start; the least-served queue's own tasks that fit go first), `none`
    (besteffort: no reservation). `first`: preemptors whose victims have
    stopped; when their queue's policy picks them, they go before every other pick. `order`:
    each task's place in the cluster's order (priority, queuedAt, name), which breaks ties
    between queues of equal share (missing: after every placed task). `bound`: under backfill
    and besteffort, each queue's walk tests at most this many tasks past its first that
    cannot start; those behind wait NotConsidered (None: no bound)."""
    return _FairShareRun(
        capacity, free, queues, claims, now, slots, reservation, first, order, bound
    ).run()


@dataclass(frozen=True)
class Ceiling:
    """The most a queue can ever hold: `borrowing` for a task that may borrow, `own` (its
    nominal quota, and its parents') for one with preemptible: false; `lenders`: the most the
    others can ever lend it."""

    borrowing: Capacity
    own: Capacity
    lenders: Capacity


def ceilings(quotas: Quotas, capacity: Capacity) -> dict[str, Ceiling]:
    """The most each queue can ever hold (by queue name): a task that asks for more waits as
    OverQuota wherever it stands (`_FairShareRun._drop_never_fitting`)."""
    demands = [QueueDemand(q, Capacity(), (), policies.strict) for q in quotas.queues]
    run = _FairShareRun(capacity, capacity, demands, (), 0.0, 0, STRICT_RESERVATION)
    return {leaf.quota.name: run.ceiling_of(leaf) for leaf in run.leaves}


def never_fits(candidate: Candidate, ceiling: Ceiling) -> bool:
    """The same judgement as `_FairShareRun._drop_never_fitting`, for the fast pass's order."""
    most = ceiling.borrowing if candidate.preemptible else ceiling.own
    return any(of(candidate.request, r) > of(most, r) + EPS for r in RESOURCES)


__all__ = [
    "NO_LIMIT",
    "FairAdmission",
    "QueueDemand",
    "QueueQuota",
    "QueueState",
    "Quotas",
    "admit",
    "dominant_share",
    "resolve",
]
