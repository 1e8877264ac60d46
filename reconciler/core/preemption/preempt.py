"""Preemption in a pass: each queue's rules, who may preempt, with how much room, and the link
from preemptors to victims that are still stopping. Pure, like the planner that calls it.

`reconciler.core.preemption.victims` answers "which victims" for one preemptor; this module
decides which waiting fronts ask, and what "fits" means for each:

- Without `_queues.yaml` there is one queue, set by the `serve` flags; its front may preempt
  when it waits for resources.
- With team queues, each queue's front (the task its policy would start next) may preempt,
  under its queue's `preemption:` block alone (a field left out takes its default):
  `withinQueue` lets it stop lower-priority runs of its own queue when the cluster or its
  quota is full; `reclaimWithinCohort` lets it take lent quota back from queues that borrow,
  whenever its queue is below its nominal quota (combined with its own lower-priority
  victims when `withinQueue` allows), never so that it borrows; a front below
  `minPreemptorPriority` does neither (it waits, as without preemption).
  Fronts that reclaim ask first, then the others, each by lowest weighted share; the room a
  preemptor is promised is reserved before the next one asks.
- One ledger (`Ledger`): what victims still stopping will free is committed to their
  preemptor; a front that overtakes it takes the claim over, and what stops for a preemptor
  no longer waiting goes to the first front that asks; after each decision the victims' queues
  are lowered in usage and in commitments together.

Everything here is read from the sidecars and Ray's job list each pass, never remembered.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import NamedTuple

from reconciler.core.admission import policies
from reconciler.core.preemption import betweenqueues, victims
from reconciler.core.preemption.rules import ONE_QUEUE, Setup
from reconciler.core.preemption.victims import NEVER, Preemptor, QueueLoad, Rules, Running, Victim
from reconciler.core.queues import dispatch
from reconciler.core.queues.quotas import EPS, RESOURCES, of
from reconciler.core.queues.shareresult import HeldRoom, QueueState, fits_needed
from specs.cluster import Capacity, RayJob
from specs.task.models import Reason
from specs.task.status import TaskStatusBody

# --- preemptors whose victims are still stopping ------------------------------------------------


@dataclass(frozen=True)
class StoppingVictims:
    """A preemptor whose victims are still stopping: who they are, and what each still uses."""

    victims: tuple[str, ...]
    using: tuple[Capacity, ...]  # by victim, in the same order

    @property
    def freeing(self) -> Capacity:
        return sum(self.using, Capacity())


def stopping_victims(
    bodies: Mapping[str, TaskStatusBody],
    jobs_by_task: Mapping[str, Sequence[RayJob]],
    claim_of: Callable[[RayJob], Capacity],
    preemptor_of: Callable[[str, TaskStatusBody], str],
) -> dict[str, StoppingVictims]:
    """Preemptors whose victims' jobs are still live, read from the victims' sidecars
    (`preemptedBy`, as `preemptor_of(victim, body)` reads it back: task.preemptedby) and Ray's
    job list: after a crash the next pass finds the same. A victim whose sidecar names no
    preemptor the planner trusts stops for a key that is no task's: it still waits for its run
    to be gone, and nobody waits for it."""
    victims: dict[str, list[tuple[str, Capacity]]] = {}
    # Only a few bodies name a preemptor: pick them out before sorting, not all of them.
    marked = sorted(name for name, body in bodies.items() if body.preempted_by is not None)
    for name in marked:
        body = bodies[name]
        if body.phase.active:
            continue
        # The task's run is not active, so any live job of it is the preempted run's.
        live = [job for job in jobs_by_task.get(name, ()) if not job.terminal]
        if live:
            held = sum((claim_of(job) for job in live), Capacity())
            victims.setdefault(preemptor_of(name, body), []).append((name, held))
    return {
        by: StoppingVictims(tuple(n for n, _ in pairs), tuple(c for _, c in pairs))
        for by, pairs in victims.items()
    }


# --- who preempts whom ------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """One preemptor and its minimal victims; `free` is the cluster room it had without them."""

    preemptor: Preemptor
    queue: str
    victims: tuple[Victim, ...]
    free: Capacity


def decide(
    plan_setup: Setup,
    queue: Sequence[policies.Candidate],
    admission: policies.Admission | dispatch.QueueAdmission,
    free: Capacity,
    stopping: Mapping[str, StoppingVictims],
    running: Sequence[Running],
    priorities: Mapping[str, int],
    now: float,
) -> list[Decision]:
    """Every preemption of this pass. `queue`: the eligible candidates in global order; `free`:
    what the admission had (reservations taken off); `stopping`: by preemptor."""
    if not plan_setup.any_on:
        return []
    started = set(admission.start)
    for candidate in queue:
        if candidate.name in started:
            free = free - candidate.request
    by_name = {c.name: c for c in queue}
    if isinstance(admission, dispatch.QueueAdmission):
        return _decide_by_queue(
            plan_setup, admission, by_name, free, stopping, running, priorities, now
        )
    front = next((c for c in queue if c.name not in started), None)
    rules = plan_setup.queues[ONE_QUEUE].rules
    if (
        front is None
        or front.name in stopping
        or rules.within_queue == NEVER
        or not victims.may_ask(rules, priorities[front.name])
    ):
        return []  # below the threshold the front waits, as without preemption
    waiting = admission.waiting.get(front.name)
    if waiting is None or waiting.reason != Reason.WAITING_FOR_RESOURCES:
        return []  # an in-flight slot, not resources, holds it back
    ledger = Ledger(stopping, by_name, [c.name for c in queue])
    coming = ledger.draw(front.name, lambda _by: True).room
    preemptor = Preemptor(front.name, priorities[front.name], front.request)
    picked = victims.choose_in_cohort(
        preemptor,
        ONE_QUEUE,
        ((ONE_QUEUE, run) for run in running),
        {ONE_QUEUE: rules},
        {},
        lambda freed, _own: front.request.fits_in(free + coming + freed),
        now,
        reclaim=False,
    )
    return [Decision(preemptor, ONE_QUEUE, picked, free + coming)] if picked else []


@dataclass(frozen=True)
class Drawn:
    """What a front may count on of the room committed to others: `room` in the cluster, and
    `promised`, the quota its own queue had promised to the preemptors it overtakes."""

    room: Capacity
    promised: Capacity


class Ledger:
    """The resources of victims still stopping, each committed to its preemptor (the task its
    victims name). A front that overtakes a waiting preemptor (comes before it in the queue
    order, in a scope where it could have preempted the same runs) takes its claim over: the
    victims' room and what was reserved of today's free for it. What stops for a preemptor
    that is no longer waiting (it started, or was deleted) is nobody's: the first front that
    asks counts it. Each claim is drawn once per pass, so nothing is counted twice."""

    def __init__(
        self,
        stopping: Mapping[str, StoppingVictims],
        waiting: Mapping[str, policies.Candidate],
        order: Sequence[str],
    ) -> None:
        self.stopping = stopping
        self.waiting = waiting
        self.place = {name: i for i, name in enumerate(order)}
        self.drawn: set[str] = set()

    def draw(self, front: str, same_scope: Callable[[str], bool]) -> Drawn:
        room, promised = Capacity(), Capacity()
        for by, pending in sorted(self.stopping.items()):
            if by == front or by in self.drawn:
                continue
            owner = self.waiting.get(by)
            if owner is None:  # its preemptor no longer waits: nobody's room
                room = room + pending.freeing
            elif (
                same_scope(by)
                and by in self.place
                and front in self.place
                and self.place[by] > self.place[front]
            ):
                reserved = victims.still_needed(owner.request, pending.freeing)
                room = room + pending.freeing + reserved
                promised = promised + owner.request
            else:
                continue
            self.drawn.add(by)
        return Drawn(room, promised)


class QueueFront(NamedTuple):
    """A queue's front that may ask to preempt, and its place in the order fronts ask in."""

    order: tuple[bool, tuple[float, ...], str]  # beyond its guarantee, shares down the tree, name
    queue: str
    candidate: policies.Candidate


_WAITS_FOR_ROOM = (Reason.WAITING_FOR_RESOURCES, Reason.QUOTA_EXCEEDED)


def _decide_by_queue(
    plan_setup: Setup,
    admission: dispatch.QueueAdmission,
    by_name: Mapping[str, policies.Candidate],
    free: Capacity,
    stopping: Mapping[str, StoppingVictims],
    running: Sequence[Running],
    priorities: Mapping[str, int],
    now: float,
) -> list[Decision]:
    states = admission.states
    usage, committed = _usage_and_commitments(plan_setup, states, by_name, stopping)
    fronts = _ordered_fronts(states, by_name, stopping, committed)
    # Fronts that may ask by share: a sub-queue's asks only if none of these is less served
    # than it among its siblings (betweenqueues.least_served_below_top).
    asking = [
        front.queue
        for front in fronts
        if front.candidate.preemptible
        and (waiting := admission.waiting.get(front.candidate.name)) is not None
        and waiting.reason in _WAITS_FOR_ROOM
    ]
    ledger = Ledger(stopping, by_name, list(by_name))  # by_name: in the global order
    pool = [(plan_setup.queue_of(run.name), run) for run in running]
    rules = plan_setup.rules()
    decisions: list[Decision] = []
    for asker in fronts:
        name, front = asker.queue, asker.candidate
        own = rules.get(name, Rules())
        if not victims.may_ask(own, priorities[front.name]):
            continue  # it waits as without preemption; nobody behind it asks instead
        waiting = admission.waiting.get(front.name)
        state = states[name]
        waits = waiting is not None and waiting.reason in _WAITS_FOR_ROOM
        # Reclaim: its queue is below its nominal quota in something the front needs (Kueue:
        # a queue may always get back to its nominal quota); with withinQueue it may add its
        # own lower-priority victims to fit.
        below = _below_nominal(front.request, committed[name], state.nominal)
        reclaim = own.reclaim_within_cohort != NEVER and below and waits
        within = own.within_queue != NEVER and waits
        # In pure sharing all a queue holds is borrowed, so a non-preemptible front (which
        # never borrows) cannot start on what fair share would free: it would preempt anew
        # each time its victims were gone.
        fair = (
            plan_setup.fair
            and waits
            and front.preemptible
            and betweenqueues.takes_part(states, name)
            and betweenqueues.least_served_below_top(states, name, asking)
            and _clears_hold(admission.held, name, front)
        )
        if not (reclaim or within or fair):
            continue
        drawn = ledger.draw(front.name, _same_queue(plan_setup, name))
        # Its quota room grows by what its own victims free (they count in its usage), and by
        # what its queue had promised to the preemptors it overtakes.
        nominal_room = state.nominal - committed[name] + drawn.promised
        room, request = free + drawn.room, front.request
        # A run nobody may stop never borrows (admission holds it at its nominal quota), so a
        # non-preemptible front must fit its nominal quota: counting what its queue may borrow
        # would stop too few of its own runs, and it would preempt again once they are gone.
        borrow = state.above_nominal if front.preemptible else Capacity()
        preemptor = Preemptor(front.name, priorities[front.name], request)
        picked: tuple[Victim, ...] = ()
        if reclaim or within:
            loads = _loads(states, usage, committed, name, front.request)
            fits = _fits_quota(room, request, nominal_room, borrow)
            picked = victims.choose_in_cohort(
                preemptor, name, pool, rules, loads, fits, now, reclaim=reclaim
            )
        if not picked and fair:
            # By share: other queues' runs give back borrowed room, never the own queue's.
            fits_share = _fits_borrowing(room, request, nominal_room + borrow)
            picked = betweenqueues.choose(
                preemptor, name, pool, rules, states, usage, fits_share, now
            )
        if not picked:
            continue
        decisions.append(Decision(preemptor, name, picked, room))
        chosen = {v.run.name for v in picked}
        pool = [(q, run) for q, run in pool if run.name not in chosen]
        freed = _commit(states, usage, committed, name, picked, request, drawn.promised)
        # Reserved for it from now on: the next preemptor may not count on this room.
        free = free - victims.still_needed(request, freed + drawn.room)
    return decisions


def _usage_and_commitments(
    plan_setup: Setup,
    states: Mapping[str, QueueState],
    by_name: Mapping[str, policies.Candidate],
    stopping: Mapping[str, StoppingVictims],
) -> tuple[dict[str, Capacity], dict[str, Capacity]]:
    """What each queue holds, without the runs already stopping for someone else; and what it
    is committed to: that, plus its preemptors still waiting for their victims (their room is
    promised, so the queue's quota must count them)."""
    usage = {name: state.usage for name, state in states.items()}
    for pending in stopping.values():
        for stopped, held in zip(pending.victims, pending.using, strict=True):
            # and from each queue it lies in (a divided queue's usage is its sub-queues')
            for owner in betweenqueues.chain(states, plan_setup.queue_of(stopped)):
                usage[owner] = usage[owner] - held
    committed = dict(usage)
    for by in stopping:
        waiting_preemptor = by_name.get(by)
        owner = plan_setup.queue_of(by)
        if waiting_preemptor is not None and owner in committed:
            committed[owner] = committed[owner] + waiting_preemptor.request
    return usage, committed


def _ordered_fronts(
    states: Mapping[str, QueueState],
    by_name: Mapping[str, policies.Candidate],
    stopping: Mapping[str, StoppingVictims],
    committed: Mapping[str, Capacity],
) -> list[QueueFront]:
    """Each queue's front that waits with none of its victims still stopping, in the order they
    ask: those within their guarantee first, then by share down the tree (the top queue's,
    then its sub-queue's among its siblings: the order the fair share's admission picks in)."""
    fronts: list[QueueFront] = []
    divided = {state.parent for state in states.values() if state.parent is not None}
    for name, state in states.items():
        if name in divided:
            continue  # a divided queue's front is one of its sub-queues' (nested queues)
        front = by_name.get(state.front) if state.front is not None else None
        if front is None or front.name in stopping:
            continue
        guaranteed = (committed[name] + front.request).fits_in(state.nominal)
        shares = tuple(states[q].share for q in reversed(betweenqueues.chain(states, name)))
        fronts.append(QueueFront((not guaranteed, shares, name), name, front))
    fronts.sort(key=attrgetter("order"))
    return fronts


def _below_nominal(request: Capacity, committed: Capacity, nominal: Capacity) -> bool:
    """Whether a queue is below its nominal quota in something `request` asks for."""
    return any(of(request, r) > 0 and of(committed, r) < of(nominal, r) - EPS for r in RESOURCES)


def _fits_quota(
    room: Capacity, request: Capacity, nominal_room: Capacity, borrow: Capacity
) -> Callable[[Capacity, Capacity], bool]:
    """Preemption within a queue or by reclaim: whether the front fits once victims free
    `freed` (of which `freed_own` in its own queue): in the cluster's `room`, and in its
    quota's room. Taking quota back never makes the preemptor a borrower: only without
    reclaim victims may it fit above its nominal quota, up to what it may `borrow`."""

    def fits(freed: Capacity, freed_own: Capacity) -> bool:
        if not request.fits_in(room + freed):
            return False
        if fits_needed(request, nominal_room + freed_own):
            return True
        return freed == freed_own and fits_needed(request, nominal_room + borrow + freed_own)

    return fits


def _commit(
    states: Mapping[str, QueueState],
    usage: dict[str, Capacity],
    committed: dict[str, Capacity],
    queue: str,
    picked: Sequence[Victim],
    request: Capacity,
    promised: Capacity,
) -> Capacity:
    """One ledger: what the victims free leaves their queues' usage and commitments at once
    (and those of the queues they lie in), so the next front sees each queue as it will be;
    `queue`'s (and its parents') commitments grow by its preemptor's `request`, less what
    they had `promised` to the preemptors it overtakes (already counted).
    Returns what the victims free."""
    freed = Capacity()
    for victim in picked:
        freed = freed + victim.run.request
        for owner in betweenqueues.chain(states, victim.queue):
            usage[owner] = usage[owner] - victim.run.request
            committed[owner] = committed[owner] - victim.run.request
    for owner in betweenqueues.chain(states, queue):
        committed[owner] = committed[owner] + request - promised
    return freed


def _clears_hold(held: HeldRoom | None, queue: str, front: policies.Candidate) -> bool:
    """Fair-share preemption takes no room held for a less-served queue's blocked front (one
    too wide to preempt for itself): the preemptor may go only where admission would let it
    past that hold, were its victims gone (beside the front, now or at its reserved start).
    Else a queue above the least-served one jumps its hold: the victims' room, which
    would have drained for that front, goes to a new run that ends later, and the
    least-served queue may hold nothing for ever while two others preempt each other."""
    # The hold is the queue's own, or, held by a divided queue, its own front's (a sub-queue's).
    return held is None or held.queue == queue or held.front == front.name or held.lets_past(front)


def _fits_borrowing(
    room: Capacity, request: Capacity, quota_room: Capacity
) -> Callable[[Capacity], bool]:
    """Fair-share preemption: what other queues' victims free is room in the cluster and
    borrowable room alike (it is all borrowed, in pure sharing)."""
    return lambda freed: request.fits_in(room + freed) and fits_needed(request, quota_room + freed)


def _loads(
    states: Mapping[str, QueueState],
    usage: Mapping[str, Capacity],
    committed: Mapping[str, Capacity],
    name: str,
    request: Capacity,
) -> dict[str, QueueLoad]:
    """Whom the front of `name` may reclaim from, and how much each borrows. Flat queues: every
    other queue, by its own quota. Nested queues: a victim's queue is judged where the two
    branches meet (the two ancestors that are siblings): the victim's side must borrow there,
    and the preemptor's side be below its nominal quota there, so a sub-queue takes back only
    what its own side lent at that level."""
    mine = betweenqueues.chain(states, name)
    loads: dict[str, QueueLoad] = {}
    for other in states:
        if other == name or other in mine:
            continue
        theirs = betweenqueues.chain(states, other)
        met = next((q for q in theirs if q in mine), None)
        side = theirs[theirs.index(met) - 1] if met is not None else theirs[-1]
        own = mine[mine.index(met) - 1] if met is not None else mine[-1]
        if own != name:
            nominal = states[own].nominal
            below = any(
                of(request, r) > 0 and of(committed[own], r) < of(nominal, r) - EPS
                for r in RESOURCES
            )
            if not below:
                continue
        loads[other] = QueueLoad(states[side].nominal, usage[side])
    return loads


def _same_queue(plan_setup: Setup, queue: str) -> Callable[[str], bool]:
    return lambda task: plan_setup.queue_of(task) == queue
