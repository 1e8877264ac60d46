"""Who starts: the admission stage of a pass (reconciler.core.stages): the policy's (or the
queues') pick, the autoscaler's demand, preemption, and why everyone else waits."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from operator import attrgetter

from reconciler.core import charges, scaling
from reconciler.core.admission import arraycap, policies
from reconciler.core.admission.waits import (
    AwaitingVictims,
    BehindReservation,
    BehindScaleUp,
    BehindTask,
    NotConsidered,
    PreemptedBy,
    Preempting,
    ScaleUp,
    ScaleUpTimedOut,
    Waiting,
)
from reconciler.core.decisions import Event, Preemption, Stop, Submit, Wanted
from reconciler.core.gates import Gated
from reconciler.core.inputs import Observation
from reconciler.core.preemption import preempt as preemption
from reconciler.core.preemption import victims
from reconciler.core.preemptions import preempt, ready
from reconciler.core.queues import dispatch, fairshare
from reconciler.core.queues.usage import QueueUsage
from reconciler.core.resources import resources_text
from reconciler.core.stages import Holdings, PassInputs, Reconciled, WalkEnd, walk_end
from reconciler.core.task import lifecycle
from reconciler.core.task.jobs import (
    charged_claim,
    claim_of,
    make_uid,
    request_of,
    submit_request,
)
from reconciler.core.task.preemptedby import Preemptors, shown
from reconciler.core.timestamps import EARLY, to_datetime, to_epoch
from specs.cluster import Capacity, RayJob
from specs.queues.config import QueueConfig
from specs.settings.process import PlanOptions
from specs.task import submission_ids
from specs.task.models import (
    ConditionType,
    Phase,
    Reason,
)
from specs.task.records import Task
from specs.task.status import TaskStatusBody

__all__ = [
    "Admitted",
    "LeftOver",
    "QueueShares",
    "ScaleUpState",
    "Start",
    "admission_of",
    "admit",
    "charged_claims",
    "far_message",
    "free_capacity",
    "keep_for_scale_up",
    "position_bucket",
    "queue_shares",
    "scale_up",
    "scale_wait",
    "start_slots",
    "start_task",
    "until_of_age",
]


@dataclass(frozen=True)
class Admitted:
    """The admission stage's outcome: every body after it, the conditions with the victims'
    Preempted ones, what runs hold with the starts, and what it asks of Ray, in order."""

    bodies: Mapping[str, TaskStatusBody]
    conds: Mapping[str, Wanted]
    used: Capacity
    submits: Sequence[Submit]  # the starts
    stops: Sequence[Stop]  # the preempted runs
    preemptions: Sequence[Preemption]
    events: Sequence[Event]
    until: float  # the latest `now` at which its answer still holds
    # Where the policy's walk ended; None with team queues (the incremental planner reads it).
    walk: WalkEnd | None
    queue_admission: dispatch.QueueAdmission | None
    order: Mapping[str, list[str]]  # the waiting tasks, per queue, in place order
    not_considered: int  # waiting tasks past the bound of admission's walk
    scale_demand: Sequence[str]  # tasks that wait for new nodes


@dataclass
class _Admitting:
    """The admission stage while it runs; `admit` freezes it into `Admitted`."""

    inputs: PassInputs
    bodies: dict[str, TaskStatusBody]
    tasks: Mapping[str, Task]
    used: Capacity
    until: float = math.inf
    submits: list[Submit] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    order: dict[str, list[str]] = field(default_factory=dict)
    not_considered: int = 0
    scale_demand: list[str] = field(default_factory=list)

    def narrow(self, until: float) -> None:
        """The answer holds up to `until` at most (never before `now`)."""
        self.until = min(self.until, max(until, self.inputs.now))


def admit(inputs: PassInputs, reconciled: Reconciled, holdings: Holdings, gated: Gated) -> Admitted:
    """Let the policy pick who starts now; everyone else waits, numbered in queue order. Then,
    if the policy's next pick still does not fit, it may preempt (`preempt`). `holdings`: what
    runs hold, stray jobs counted; `gated`: the bodies and the queue after the gates."""
    options, queues, tasks = inputs.options, inputs.queues, reconciled.tasks
    run = _Admitting(inputs, dict(gated.bodies), tasks, holdings.used)
    bodies = run.bodies
    ordered = sorted(gated.queue, key=attrgetter("key"))
    queue = [waiting.candidate for waiting in ordered]
    # Read before this pass's preemptions change any body: the fast pass reads the same.
    preemptors = Preemptors(options.visibility, lambda: list(bodies.items()))
    all_stopping = preemption.stopping_victims(
        bodies, inputs.env.by_task, charged_claims(inputs.obs), preemptors.key_of
    )
    stopping_for = {by: s for by, s in all_stopping.items() if by in tasks}
    held = charges.room(inputs.obs, options, holdings.used, holdings.unobserved)
    free = _free_for_admission(held.free, tasks, stopping_for)
    # A task beyond its queue's maxQueued is not counted: it waits as QueueFull.
    full = {}
    if queues is not None:
        full = dispatch.queue_full(queues, [(w.key.queued_at, w.candidate.name) for w in ordered])
    # A victim waits until its stopped run is gone from Ray, so it never holds two runs.
    stopping = {victim for s in all_stopping.values() for victim in s.victims}
    eligible = [c for c in queue if c.name not in stopping and c.name not in full]
    # An array at its maxParallel starts no more elements: they are not candidates at all.
    eligible, capped = arraycap.cap(eligible, bodies, tasks)
    slots = start_slots(options, bodies)
    shares = queue_shares(inputs, holdings, bodies, tasks, all_stopping, preemptors)
    admission = admission_of(
        options,
        inputs.obs,
        inputs.now,
        holdings.claims,
        eligible,
        free,
        slots,
        shares,
        in_fact=held.in_fact,
    )
    queue_admission = None
    if isinstance(admission, dispatch.QueueAdmission):
        admission.waiting.update(full)
        queue_admission = admission
    run.narrow(admission.until)
    started = set(admission.start)
    scale = scale_up(
        inputs, bodies, holdings.claims, eligible, free, slots, shares, admission, stopping_for
    )
    run.narrow(scale.until)
    run.scale_demand.extend(scale.demand)
    if scale.demand and options.policy != "besteffort":
        keep_for_scale_up(inputs, eligible, free, slots, admission, scale)
        started = set(admission.start)
    # Where the walk ended, and what it started once the autoscaler's demand kept its own.
    walk = walk_end(admission) if isinstance(admission, policies.Admission) else None
    # Work that new nodes will serve waits for them rather than preempting.
    preempted = preempt(
        inputs,
        tasks,
        reconciled.running,
        bodies,
        eligible,
        admission,
        free,
        all_stopping,
        bodies,
        frozenset(scale.demand),
    )
    bodies.update(preempted.bodies)
    conds = _with_preempted(reconciled.conds, preempted.conds)
    run.events.extend(preempted.events)
    run.narrow(until_of_age(inputs, reconciled.running))
    _place(run, queue, full, started, capped, admission, stopping_for, preempted.waits, scale)
    return Admitted(
        bodies=bodies,
        conds=conds,
        used=run.used,
        submits=run.submits,
        stops=preempted.stops,
        preemptions=preempted.preemptions,
        events=run.events,
        until=run.until,
        walk=walk,
        queue_admission=queue_admission,
        order=run.order,
        not_considered=run.not_considered,
        scale_demand=run.scale_demand,
    )


def _free_for_admission(
    free: Capacity,
    tasks: Mapping[str, Task],
    stopping_for: Mapping[str, preemption.StoppingVictims],
) -> Capacity:
    """What admission may give out now of what is `free`. A preemptor's room is reserved
    while its victims stop: nobody else may take from today's free resources what it will
    need beyond what they free."""
    for by, pending in stopping_for.items():
        free = free - victims.still_needed(request_of(tasks[by]), pending.freeing)
    return free


def _with_preempted(
    conds: Mapping[str, Wanted], preempted: Mapping[str, tuple[Reason, str]]
) -> Mapping[str, Wanted]:
    """The conditions, with each victim's Preempted one added to its own."""
    if not preempted:
        return conds
    result = dict(conds)
    for name, wanted in preempted.items():
        result[name] = {**result.get(name, {}), ConditionType.PREEMPTED: wanted}
    return result


def _place(
    run: _Admitting,
    queue: list[policies.Candidate],
    full: Mapping[str, Waiting],
    started: set[str],
    capped: Mapping[str, Waiting],
    admission: policies.Admission | dispatch.QueueAdmission,
    stopping_for: Mapping[str, preemption.StoppingVictims],
    preempting: Mapping[str, Preempting],
    scale: ScaleUpState,
) -> None:
    """Start who starts; give everyone else its place and why it waits."""
    positions: dict[str, int] = {}  # per queue with queues; one count without
    known = admission.queue_of if isinstance(admission, dispatch.QueueAdmission) else {}
    inputs, bodies, order = run.inputs, run.bodies, run.order
    queues = inputs.queues
    exact_places = inputs.options.exact_queue_positions
    visibility = inputs.options.visibility
    # A far task's message names its reason, bucket and queue only: one per such triple.
    far: dict[tuple[str, Reason | None, str], str] = {}
    # Tasks of a full queue are not counted in it: their places come after its counted tasks.
    for candidate in [c for c in queue if c.name not in full] + [
        c for c in queue if c.name in full
    ]:
        name = candidate.name
        if name in started:
            begun = start_task(inputs, candidate, bodies[name], run.tasks[name])
            bodies[name] = begun.body
            run.used = run.used + candidate.request
            run.submits.append(begun.submit)
            run.events.append(begun.event)
            continue
        owner = ""
        if queues is not None:  # the queues' admission found most already
            owner = known.get(name) or queues.queue_of(name)
        place = positions[owner] = positions.get(owner, 0) + 1
        order.setdefault(owner, []).append(name)
        waiting = capped.get(name) or _why_waiting(run, name, admission, stopping_for, preempting)
        if waiting is not None and waiting.estimated_start is not None:
            # The reserved start the tasks behind it are told of, also when it now waits for
            # nodes instead: it moves with the clock once passed.
            run.narrow(waiting.estimated_start)
        waiting, asked_at = scale_wait(inputs, scale, candidate, waiting)
        reason = None if waiting is None else waiting.reason
        if waiting is not None and isinstance(waiting.lacks, NotConsidered):
            run.not_considered += 1
        eta = waiting.estimated_start if waiting is not None else None
        if eta is not None:
            # A reserved start is max(the claims' end, now): once the clock passes that end, it
            # moves with the clock, so this pass's answer holds up to the end at most.
            run.narrow(eta)
        body = bodies[name]
        if place > exact_places:
            # Beyond the exact places only what moves seldom is written (see position_bucket).
            bucket = position_bucket(place, exact_places)
            message = far.get((bucket, reason, owner))
            if message is None:
                message = far[bucket, reason, owner] = far_message(bucket, waiting, owner or None)
            exact: int | None = None
            at = None
        else:
            exact, bucket, message = place, None, None
            at = to_datetime(eta) if eta else None
        if waiting is None:
            bodies[name] = lifecycle.queue(
                body, exact, Reason.QUEUED, message or "queued", at, asked_at, bucket
            )
        elif reason is Reason.PREEMPTING:
            bodies[name] = lifecycle.wait_for_victims(
                body, exact, message or waiting.message_to(name, visibility), at, bucket
            )
        else:
            assert reason is not None
            said = message or waiting.message_to(name, visibility)
            bodies[name] = lifecycle.queue(body, exact, reason, said, at, asked_at, bucket)


def position_bucket(place: int, exact: int) -> str:
    """The bucket of a place beyond the first `exact`: ">E", ">10E", ">100E", ... the largest
    E * 10**k below it, so a task's bucket changes about once per tenfold move."""
    bound = exact
    while place > bound * 10:
        bound *= 10
    return f">{bound}"


def far_message(bucket: str, waiting: Waiting | None, queue: str | None) -> str:
    """A far task's message: its reason and its bucket, without what moves with every start
    (the count ahead, the front's name, the free resources, an estimate)."""
    where = f" in {queue}" if queue else ""
    reason = waiting.reason if waiting is not None else Reason.QUEUED
    return f"{reason.value}; at least {bucket[1:]} tasks ahead{where}"


@dataclass(frozen=True)
class QueueShares:
    """What the team queues' admission reads beyond what one queue's does."""

    config: QueueConfig
    usage: QueueUsage | None  # the queues' decayed past use
    in_use: Mapping[str, Capacity]  # by task: what its jobs hold
    # preemptors whose victims have all stopped: admitted first (preemptions.ready)
    ready: frozenset[str]


def queue_shares(
    inputs: PassInputs,
    holdings: Holdings,
    bodies: Mapping[str, TaskStatusBody],
    tasks: Mapping[str, Task],
    stopping: Mapping[str, preemption.StoppingVictims],
    preemptors: Preemptors,
) -> QueueShares | None:
    """What the team queues' admission reads (None without team queues)."""
    if inputs.queues is None:
        return None
    waiting_ready = ready(bodies, tasks, stopping, preemptors)
    return QueueShares(inputs.queues, inputs.usage, holdings.in_use, waiting_ready)


def admission_of(
    options: PlanOptions,
    obs: Observation,
    now: float,
    claims: Sequence[policies.Claim],
    eligible: list[policies.Candidate],
    free: Capacity,
    slots: int,
    shares: QueueShares | None = None,
    cut: Collection[str] = (),
    *,
    in_fact: charges.InFact | None = None,
) -> policies.Admission | dispatch.QueueAdmission:
    """The policy's (or, with `shares`, the team queues') pick from `eligible` with `free`
    resources and `slots` starts. Quotas are shares of what the cluster can grow to (its
    ceiling), not of what it has now. `cut`: the team queues of which `eligible` holds only
    the front (walk_queues). `in_fact`: how the cluster is held beyond what its jobs declare
    (charges.room), said in the waits it causes."""
    admission = _admission_of(options, obs, now, claims, eligible, free, slots, shares, cut)
    charges.explain(admission, in_fact)
    return admission


def _admission_of(
    options: PlanOptions,
    obs: Observation,
    now: float,
    claims: Sequence[policies.Claim],
    eligible: list[policies.Candidate],
    free: Capacity,
    slots: int,
    shares: QueueShares | None,
    cut: Collection[str],
) -> policies.Admission | dispatch.QueueAdmission:
    if shares is None:
        bound = options.backfill_candidates
        return policies.admit_bounded(options.policy, eligible, free, claims, now, slots, bound)
    capacity = obs.capacity
    assert capacity is not None
    return dispatch.admit_by_queue(
        shares.config,
        scaling.ceiling_of(capacity, obs.scaling),
        free,
        eligible,
        shares.in_use,
        claims,
        now,
        slots,
        policies.POLICIES[options.policy],
        fairshare.RESERVATION_OF_POLICY.get(options.policy, fairshare.STRICT_RESERVATION),
        shares.ready,
        shares.usage,
        options.backfill_candidates,
        cut,
    )


@dataclass(frozen=True)
class ScaleUpState:
    """Who waits for nodes this pass (`demand`, in queue order) and who gave up on them
    (`backoff`), each with when its request began (epoch seconds); `until`: the latest `now`
    at which this holds; `walk_ended`: the policy's walk at the ceiling ended before the end of
    the queue it was given (policies.Admission.tail), so any queue with the same front gives
    the same demand."""

    demand: Mapping[str, float]
    backoff: Mapping[str, float]
    until: float = math.inf
    walk_ended: bool = True


_NO_SCALING = ScaleUpState({}, {})


def scale_up(
    inputs: PassInputs,
    bodies: Mapping[str, TaskStatusBody],
    claims: Sequence[policies.Claim],
    eligible: list[policies.Candidate],
    free: Capacity,
    slots: int,
    shares: QueueShares | None,
    admission: policies.Admission | dispatch.QueueAdmission,
    stopping_for: Mapping[str, preemption.StoppingVictims],
) -> ScaleUpState:
    """The demand for the autoscaler: the tasks the same policy, quotas and --max-inflight
    would start if the cluster were at its ceiling, that do not start now and do not fit what
    is left free now. A task whose request timed out sits out a backoff as long as the timeout
    (`ScaleUpTimeout`), and the others are judged without it. `bodies`: at least each of
    `eligible`'s."""
    grow = inputs.obs.scaling
    capacity = inputs.obs.capacity
    if grow is None or capacity is None:
        return _NO_SCALING
    now = inputs.now
    until = math.inf
    limit = inputs.options.scale_up_timeout_seconds
    backoff: dict[str, float] = {}
    for candidate in eligible:
        since = to_epoch(bodies[candidate.name].scale_up_requested_at)
        if since is not None and since + limit <= now < since + 2 * limit:
            backoff[candidate.name] = since
            until = min(until, since + 2 * limit - EARLY)
    hopeful = [c for c in eligible if c.name not in backoff]
    room = free + scaling.headroom(capacity, grow)
    at_ceiling = admission_of(inputs.options, inputs.obs, now, claims, hopeful, room, slots, shares)
    left = free
    for candidate in eligible:
        if candidate.name in admission.start:
            left = left - candidate.request
    started = set(admission.start)
    demand: dict[str, float] = {}
    for candidate in hopeful:
        name = candidate.name
        if (
            name not in at_ceiling.start
            or name in started
            or name in stopping_for
            or candidate.request.fits_in(left)
        ):
            continue
        since = to_epoch(bodies[name].scale_up_requested_at)
        if since is None or not now < since + limit:
            since = now  # a new request (or a new one after its backoff)
        demand[name] = since
        until = min(until, since + limit - EARLY)
    ended = not isinstance(at_ceiling, policies.Admission) or at_ceiling.tail is not None
    return ScaleUpState(demand, backoff, until, ended)


def keep_for_scale_up(
    inputs: PassInputs,
    eligible: list[policies.Candidate],
    free: Capacity,
    slots: int,
    admission: policies.Admission | dispatch.QueueAdmission,
    scale: ScaleUpState,
) -> LeftOver:
    """A task waiting for nodes keeps its claim on what is free now: the autoscaler is asked
    for its whole request beside what runs, so the nodes that come complete today's free
    resources, and a task behind it in its queue that took them would delay it by another
    launch. So one that overtook it starts only on what is free beyond its need (per resource
    it asks for). The other way round, under backfill without team queues, a front that waits
    for nodes does not hold back what does not need its resources: a task the policy kept
    behind it starts if it fits that spare (a GPU front waiting for a GPU node leaves the CPUs
    of today to CPU work). Strict never overtakes; besteffort lets anything that fits start.
    Returns what it leaves for a task behind `eligible`."""
    queues = inputs.queues
    add = inputs.options.policy == "backfill" and queues is None
    spare: dict[str, Capacity] = {}  # per queue ("" without queues)
    holder: dict[str, str] = {}  # per queue: the first task in it that waits for nodes
    ahead: dict[str, int] = {}
    left, room = free, slots - len(admission.start)
    for candidate in eligible:
        if candidate.name in admission.start:
            left = left - candidate.request
    for candidate in eligible:
        name, request = candidate.name, candidate.request
        owner = queues.queue_of(name) if queues is not None else ""
        have = spare.get(owner, free)
        if name in scale.demand:
            holder.setdefault(owner, name)
            spare[owner] = have - request
        elif name in admission.start:
            if owner in holder and not _fits_asked(request, have):
                admission.start.remove(name)
                admission.waiting[name] = Waiting(BehindScaleUp(holder[owner]), ahead.get(owner))
                left, room = left + request, room + 1
            else:
                spare[owner] = have - request
                continue
        elif (
            add
            and owner in holder
            and _behind(admission.waiting.get(name), holder[owner])
            and _fits_asked(request, have)
            and request.fits_in(left)
            and room > 0
        ):
            admission.start.append(name)
            del admission.waiting[name]
            spare[owner], left, room = have - request, left - request, room - 1
            continue
        ahead[owner] = ahead.get(owner, 0) + 1
    return LeftOver(add, spare, holder, left, room)


@dataclass(frozen=True)
class LeftOver:
    """What `keep_for_scale_up` leaves for a task further back in its queue."""

    add: bool  # whether a task behind a front that waits for nodes may start on its spare
    spare: Mapping[str, Capacity]  # by queue: free beyond the needs of its tasks so far
    holder: Mapping[str, str]  # by queue: its first task that waits for nodes
    left: Capacity  # free, the starts so far taken
    room: int  # starts left

    def starts(self, queue: str, request: Capacity, free: Capacity) -> bool:
        """Whether a task of `queue` asking `request`, which the policy kept waiting behind
        the queue's holder only, would start (`free`: the one given to keep_for_scale_up)."""
        return (
            self.add
            and queue in self.holder
            and self.room > 0
            and _fits_asked(request, self.spare.get(queue, free))
            and request.fits_in(self.left)
        )


def _behind(waiting: Waiting | None, front: str) -> bool:
    """Whether the policy kept it waiting only for `front`'s sake (not for its own lack)."""
    if waiting is None:
        return False
    lack = waiting.lacks
    return (isinstance(lack, BehindTask) and lack.task == front) or (
        isinstance(lack, BehindReservation) and lack.front == front
    )


def _fits_asked(request: Capacity, room: Capacity) -> bool:
    """`request` fits `room` in every resource it asks for (room may be negative elsewhere)."""
    return all(
        asked <= 1e-9 or asked <= have + 1e-9
        for asked, have in (
            (request.cpu, room.cpu),
            (request.gpu, room.gpu),
            (request.memory, room.memory),
        )
    )


def scale_wait(
    inputs: PassInputs,
    scale: ScaleUpState,
    candidate: policies.Candidate,
    waiting: Waiting | None,
) -> tuple[Waiting | None, datetime | None]:
    """Its wait as the autoscaler changes it, and when its request for nodes began (kept in
    its status, so the timeout survives restarts); the wait as given when it asks for none."""
    grow, name = inputs.obs.scaling, candidate.name
    if grow is None or (waiting is not None and waiting.reason in _NOT_FOR_NODES):
        return waiting, None
    ahead, owner = (waiting.ahead, waiting.queue) if waiting is not None else (None, None)
    limit = inputs.options.scale_up_timeout_seconds
    if name in scale.demand:
        since = scale.demand[name]
        lack: ScaleUp | ScaleUpTimedOut = ScaleUp(
            candidate.request, since, len(grow.pending), since + limit
        )
    elif name in scale.backoff:
        since = scale.backoff[name]
        lack = ScaleUpTimedOut(candidate.request, since, limit, since + 2 * limit, grow.failures)
    else:
        return waiting, None
    return Waiting(lack, ahead, owner), to_datetime(since)


# A preemptor's own waits say more than the autoscaler's.
_NOT_FOR_NODES = frozenset({Reason.PREEMPTING, Reason.PREEMPTED})


def until_of_age(inputs: PassInputs, running: Sequence[victims.Running]) -> float:
    """A run too young to be a victim (minRuntimeSeconds) becomes one as time passes: the
    pass's answer holds only until the first such run comes of age (inf: none does)."""
    setup = inputs.env.preemption
    if not setup.any_on:
        return math.inf
    now = inputs.now
    until = math.inf
    ages = {q.rules.min_runtime_seconds for q in setup.queues.values()} - {0}
    for running_run in running:
        for age in ages:
            edge = running_run.started + age
            if edge > now:  # exempt while now - started < age; a little early for rounding
                until = min(until, edge - EARLY)
    return until


def _why_waiting(
    run: _Admitting,
    name: str,
    admission: policies.Admission | dispatch.QueueAdmission,
    stopping_for: Mapping[str, preemption.StoppingVictims],
    preempting: Mapping[str, Preempting],
) -> Waiting | None:
    if name in preempting:
        return Waiting(preempting[name])
    pending = stopping_for.get(name)
    if pending is not None and name not in admission.start:
        return Waiting(AwaitingVictims(pending.victims))
    body = run.bodies[name]
    if name not in admission.waiting and body.preempted_by is not None:
        visibility = run.inputs.options.visibility
        return Waiting(PreemptedBy(shown(visibility, name, body.preempted_by)))
    return admission.waiting.get(name)


def start_slots(options: PlanOptions, bodies: Mapping[str, TaskStatusBody]) -> int:
    """How many more may start this pass: max_inflight less the tasks Starting now."""
    starting = sum(1 for b in bodies.values() if b.phase is Phase.STARTING)
    return max(options.max_inflight - starting, 0)


def free_capacity(
    obs: Observation, options: PlanOptions, used: Capacity, unobserved: Capacity
) -> Capacity:
    """What is free for admission: the capacity less what our runs are charged (`used`, of
    which Ray's holdings do not show `unobserved`) and what other jobs are charged, within
    what Ray reports available (charges.room)."""
    return charges.room(obs, options, used, unobserved).free


def charged_claims(obs: Observation) -> Callable[[RayJob], Capacity]:
    """What a stopping victim's live job holds until it ends: its claim, or what Ray says it
    holds if more (task.jobs.charged_claim)."""
    held = obs.held
    if not held:
        return claim_of
    return lambda job: charged_claim(job, held)


@dataclass(frozen=True)
class Start:
    """A task started: its status with the new run, its submission and the note of it."""

    body: TaskStatusBody
    submit: Submit
    event: Event


def start_task(
    inputs: PassInputs, candidate: policies.Candidate, body: TaskStatusBody, task: Task
) -> Start:
    """Start the next run of `candidate` (whose status body is `body`); the caller counts its
    request as used."""
    name, stamp = candidate.name, inputs.stamp
    uid = body.uid or make_uid(inputs.options.queue_id, name, stamp)
    sid = submission_ids.for_run(name, uid, body.run + 1, task.spec.submission_id)
    read = inputs.read.get(name)
    body = lifecycle.start_run(body, uid, sid, stamp, read.source if read else None)
    submit = Submit(name, submit_request(inputs.env, name, task, body))
    message = (
        f"submitted {name} (priority {task.spec.priority}, "
        f"{resources_text(candidate.request)}) as {sid}"
    )
    return Start(body, submit, Event(logging.INFO, Reason.SUBMITTED, message))
