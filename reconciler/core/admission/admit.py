"""Who starts: dependency gating, the policy's (or the queues') admission, and why everyone
else waits."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from reconciler.core import scaling
from reconciler.core.admission import arraycap as arrays
from reconciler.core.admission import policies
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
from reconciler.core.decisions import Submit
from reconciler.core.inputs import TaskInput
from reconciler.core.preemption import preempt as preemption
from reconciler.core.preemption import victims
from reconciler.core.preemption.preempt import preempt
from reconciler.core.queues import dispatch as queueing
from reconciler.core.queues import fairshare
from reconciler.core.queues.quotas import resources_text
from reconciler.core.task import dependencies, lifecycle
from reconciler.core.task.depnames import DependencyViews
from reconciler.core.task.jobs import (
    claim_of,
    foreign_claim,
    make_uid,
    request_of,
    submission_id_for,
    submit_request,
)
from reconciler.core.timestamps import EARLY, to_datetime, to_epoch
from specs.cluster import (
    META_QUEUE,
    Capacity,
)
from specs.task.models import (
    Phase,
    Reason,
)

if TYPE_CHECKING:
    from reconciler.core.planner import PassState


def gate_dependencies(ctx: PassState, specs: Mapping[str, TaskInput]) -> None:
    """Take out of the queue whatever waits for dependencies; date the rest's FIFO age from
    when their last dependency was met, so a task dropped in early does not jump the queue.

    Only tasks that have not started are judged: a running or finished dependent is never
    stopped because a dependency starts a new run."""
    if not ctx.gated:
        return
    graph = {
        name: task.spec.depends_on
        for name, spec in specs.items()
        if (task := spec.task or spec.last_valid) is not None and task.spec.depends_on
    }
    names = _dependency_views(ctx)  # names resolved in the dependent's folder first
    edges = {n: [t for d in deps for t in names.targets(n, d.name)] for n, deps in graph.items()}
    cycles = dependencies.find_cycles(edges)
    kept: list[tuple[tuple[int, float, str], policies.Candidate]] = []
    for key, candidate in ctx.queue:  # cycles first, so dependents see them as they end up
        name = candidate.name
        if name in cycles:
            ctx.bodies[name] = lifecycle.dependency_cycle(ctx.bodies[name], cycles[name])
        else:
            kept.append((key, candidate))
    views = _dependency_views(ctx)
    ctx.queue, kept = kept, []
    for key, candidate in ctx.queue:
        name = candidate.name
        deps = ctx.tasks[name].spec.depends_on
        body = ctx.bodies[name]
        if lifecycle.in_cycle(body):
            body = ctx.bodies[name] = lifecycle.cycle_resolved(body)
        if not deps:
            kept.append((key, candidate))
            continue
        judgement = dependencies.judge(deps, views.of(name, deps))
        if not judgement.met:
            ctx.bodies[name] = lifecycle.hold(body, judgement.gate, judgement.message)
            continue
        queued = to_epoch(body.queued_at) or ctx.now
        if judgement.met_at is not None and judgement.met_at > queued:
            queued = judgement.met_at
            body = lifecycle.date_queue_entry(body, to_datetime(queued))
        ctx.bodies[name] = body
        kept.append(((key[0], queued, key[2]), candidate))
    ctx.queue = kept


def _dependency_views(ctx: PassState) -> DependencyViews:
    return DependencyViews(
        {
            name: dependencies.RunView(body.phase, to_epoch(body.finished_at))
            for name, body in ctx.bodies.items()
        }
    )


def admit(ctx: PassState) -> None:
    """Let the policy pick who starts now; everyone else waits, numbered in queue order. Then,
    if the policy's next pick still does not fit, it may preempt (`preempt`)."""
    ctx.queue.sort(key=lambda item: item[0])
    queue = [candidate for _, candidate in ctx.queue]
    all_stopping = preemption.stopping_victims(ctx.bodies, ctx.jobs_by_task, claim_of)
    stopping_for = {by: s for by, s in all_stopping.items() if by in ctx.tasks}
    stopping = {victim for s in all_stopping.values() for victim in s.victims}
    # A preemptor's room is reserved while its victims stop: nobody else may take from today's
    # free resources what it will need beyond what they free.
    free = _free(ctx)
    for by, pending in stopping_for.items():
        free = free - victims.still_needed(request_of(ctx.tasks[by]), pending.freeing)
    # A task beyond its queue's maxQueued is not counted: it waits as QueueFull.
    full = {}
    if ctx.queues is not None:
        full = queueing.queue_full(ctx.queues, [(key[1], c.name) for key, c in ctx.queue])
    # A victim waits until its stopped run is gone from Ray, so it never holds two runs.
    eligible = [c for c in queue if c.name not in stopping and c.name not in full]
    # An array at its maxParallel starts no more elements: they are not candidates at all.
    eligible, capped = arrays.cap(eligible, ctx.bodies, ctx.tasks)
    slots = _slots(ctx)
    admission = _admission(ctx, eligible, free, slots, all_stopping)
    if isinstance(admission, policies.Admission):
        ctx.until = min(ctx.until, max(admission.until, ctx.now))
        tail_at, lack = admission.tail or (None, None)
        ctx.walk = (tail_at, lack, len(admission.start))
    if isinstance(admission, queueing.QueueAdmission):
        admission.waiting.update(full)
        ctx.queue_admission = admission
        ctx.until = min(ctx.until, max(admission.until, ctx.now))
    started = set(admission.start)
    scale = _scale_up(ctx, eligible, free, slots, all_stopping, admission, stopping_for)
    if scale.demand and ctx.options.policy != "besteffort":
        _keep_for_scale_up(ctx, eligible, free, slots, admission, scale)
        started = set(admission.start)
    # Work that new nodes will serve waits for them rather than preempting (issue 26).
    preempting = preempt(ctx, eligible, admission, free, all_stopping, frozenset(scale.demand))
    _until_of_age(ctx)
    positions: dict[str, int] = {}  # per queue with queues; one count without
    known = admission.queue_of if isinstance(admission, queueing.QueueAdmission) else {}
    bodies, queues, order, now = ctx.bodies, ctx.queues, ctx.order, ctx.now
    exact_places = ctx.options.exact_queue_positions
    # A far task's message names its reason, bucket and queue only: one per such triple.
    far: dict[tuple[str, Reason | None, str], str] = {}
    # Tasks of a full queue are not counted in it: their places come after its counted tasks.
    for candidate in [c for c in queue if c.name not in full] + [
        c for c in queue if c.name in full
    ]:
        name = candidate.name
        if name in started:
            _start(ctx, candidate)
            continue
        owner = ""
        if queues is not None:  # the queues' admission found most already
            owner = known.get(name) or queues.queue_of(name)
        place = positions[owner] = positions.get(owner, 0) + 1
        order.setdefault(owner, []).append(name)
        waiting = capped.get(name) or _why_waiting(ctx, name, admission, stopping_for, preempting)
        waiting, asked_at = _scale_wait(ctx, scale, candidate, waiting)
        reason = None if waiting is None else waiting.reason
        if waiting is not None and isinstance(waiting.lacks, NotConsidered):
            ctx.not_considered += 1
        eta = waiting.estimated_start if waiting is not None else None
        if eta is not None:
            # A reserved start is max(the claims' end, now): once the clock passes that end, it
            # moves with the clock, so this pass's answer holds up to the end at most.
            ctx.until = min(ctx.until, max(eta, now))
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
                body, exact, message or waiting.message, at, bucket
            )
        else:
            assert reason is not None
            bodies[name] = lifecycle.queue(
                body, exact, reason, message or waiting.message, at, asked_at, bucket
            )


def position_bucket(place: int, exact: int) -> str:
    """The bucket of a place beyond the first `exact`: ">E", ">10E", ">100E", ... the largest
    E * 10**k below it, so a task's bucket changes about once per tenfold move."""
    bound = exact
    while place > bound * 10:
        bound *= 10
    return f">{bound}"


def far_message(bucket: str, waiting: Waiting | None, queue: str | None) -> str:
    """A far task's message: its reason and its bucket, without what moves with every start
    (the count ahead, the head's name, the free resources, an estimate)."""
    where = f" in {queue}" if queue else ""
    reason = waiting.reason if waiting is not None else Reason.QUEUED
    return f"{reason.value}; at least {bucket[1:]} tasks ahead{where}"


def _admission(
    ctx: PassState,
    eligible: list[policies.Candidate],
    free: Capacity,
    slots: int,
    all_stopping: Mapping[str, preemption.StoppingVictims],
    cut: Collection[str] = (),
) -> policies.Admission | queueing.QueueAdmission:
    """The policy's (or the queues') pick from `eligible` with `free` resources. Quotas are
    shares of what the cluster can grow to (its ceiling), not of what it has now. `cut`: the
    team queues of which `eligible` holds only the head (walk_queues)."""
    policy = policies.POLICIES[ctx.options.policy]
    if ctx.queues is None:
        bound = ctx.options.backfill_candidates
        return policies.admit_bounded(
            ctx.options.policy, eligible, free, ctx.claims, ctx.now, slots, bound
        )
    capacity = ctx.obs.capacity
    assert capacity is not None
    return queueing.admit_by_queue(
        ctx.queues,
        scaling.ceiling_of(capacity, ctx.obs.scaling),
        free,
        eligible,
        ctx.in_use,
        ctx.claims,
        ctx.now,
        slots,
        policy,
        fairshare.RESERVATION_OF_POLICY.get(ctx.options.policy, fairshare.STRICT_RESERVATION),
        preemption.ready(ctx.bodies, ctx.tasks, all_stopping),
        ctx.usage,
        ctx.options.backfill_candidates,
        cut,
    )


@dataclass(frozen=True)
class ScaleUpState:
    """Who waits for nodes this pass (`demand`) and who gave up on them (`backoff`), each with
    when its request began (epoch seconds)."""

    demand: Mapping[str, float]
    backoff: Mapping[str, float]


_NO_SCALING = ScaleUpState({}, {})


def _scale_up(
    ctx: PassState,
    eligible: list[policies.Candidate],
    free: Capacity,
    slots: int,
    all_stopping: Mapping[str, preemption.StoppingVictims],
    admission: policies.Admission | queueing.QueueAdmission,
    stopping_for: Mapping[str, preemption.StoppingVictims],
) -> ScaleUpState:
    """The demand for the autoscaler: the tasks the same policy, quotas and --max-inflight
    would start if the cluster were at its ceiling, that do not start now and do not fit what
    is left free now. A task whose request timed out sits out a backoff as long as the timeout
    (`ScaleUpTimeout`), and the others are judged without it."""
    grow = ctx.obs.scaling
    capacity = ctx.obs.capacity
    if grow is None or capacity is None:
        return _NO_SCALING
    limit = ctx.options.scale_up_timeout_seconds
    backoff: dict[str, float] = {}
    for candidate in eligible:
        since = to_epoch(ctx.bodies[candidate.name].scale_up_requested_at)
        if since is not None and since + limit <= ctx.now < since + 2 * limit:
            backoff[candidate.name] = since
            ctx.until = min(ctx.until, max(since + 2 * limit - EARLY, ctx.now))
    hopeful = [c for c in eligible if c.name not in backoff]
    room = free + scaling.headroom(capacity, grow)
    at_ceiling = _admission(ctx, hopeful, room, slots, all_stopping)
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
        since = to_epoch(ctx.bodies[name].scale_up_requested_at)
        if since is None or not ctx.now < since + limit:
            since = ctx.now  # a new request (or a new one after its backoff)
        demand[name] = since
        ctx.until = min(ctx.until, max(since + limit - EARLY, ctx.now))
        ctx.scale_demand.append(name)
    return ScaleUpState(demand, backoff)


def _keep_for_scale_up(
    ctx: PassState,
    eligible: list[policies.Candidate],
    free: Capacity,
    slots: int,
    admission: policies.Admission | queueing.QueueAdmission,
    scale: ScaleUpState,
) -> None:
    """A task waiting for nodes keeps its claim on what is free now: the autoscaler is asked
    for its whole request beside what runs, so the nodes that come complete today's free
    resources, and a task behind it in its queue that took them would delay it by another
    launch. So one that overtook it starts only on what is free beyond its need (per resource
    it asks for). The other way round, under backfill without team queues, a head that waits
    for nodes does not hold back what does not need its resources: a task the policy kept
    behind it starts if it fits that spare (a GPU head waiting for a GPU node leaves the CPUs
    of today to CPU work). Strict never overtakes; besteffort lets anything that fits start."""
    add = ctx.options.policy == "backfill" and ctx.queues is None
    spare: dict[str, Capacity] = {}  # per queue ("" without queues)
    holder: dict[str, str] = {}  # per queue: the first task in it that waits for nodes
    ahead: dict[str, int] = {}
    left, room = free, slots - len(admission.start)
    for candidate in eligible:
        if candidate.name in admission.start:
            left = left - candidate.request
    for candidate in eligible:
        name, request = candidate.name, candidate.request
        owner = ctx.queues.queue_of(name) if ctx.queues is not None else ""
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


def _behind(waiting: Waiting | None, head: str) -> bool:
    """Whether the policy kept it waiting only for `head`'s sake (not for its own lack)."""
    if waiting is None:
        return False
    lack = waiting.lacks
    return (isinstance(lack, BehindTask) and lack.task == head) or (
        isinstance(lack, BehindReservation) and lack.head == head
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


def _scale_wait(
    ctx: PassState,
    scale: ScaleUpState,
    candidate: policies.Candidate,
    waiting: Waiting | None,
) -> tuple[Waiting | None, datetime | None]:
    """Its wait as the autoscaler changes it, and when its request for nodes began (kept in
    its status, so the timeout survives restarts); the wait as given when it asks for none."""
    grow, name = ctx.obs.scaling, candidate.name
    if grow is None or (waiting is not None and waiting.reason in _NOT_FOR_NODES):
        return waiting, None
    ahead, owner = (waiting.ahead, waiting.queue) if waiting is not None else (None, None)
    limit = ctx.options.scale_up_timeout_seconds
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


def _until_of_age(ctx: PassState) -> None:
    """A run too young to be a victim (minRuntimeSeconds) becomes one as time passes: the
    pass's answer holds only until the first such run comes of age."""
    setup = ctx.env.preemption
    if not setup.any_on:
        return
    ages = {q.rules.min_runtime_seconds for q in setup.queues.values()} - {0}
    for run in ctx.running:
        for age in ages:
            edge = run.started + age
            if edge > ctx.now:  # exempt while now - started < age; a µs early for rounding
                ctx.until = min(ctx.until, max(edge - EARLY, ctx.now))


def _why_waiting(
    ctx: PassState,
    name: str,
    admission: policies.Admission | queueing.QueueAdmission,
    stopping_for: Mapping[str, preemption.StoppingVictims],
    preempting: Mapping[str, Preempting],
) -> Waiting | None:
    if name in preempting:
        return Waiting(preempting[name])
    pending = stopping_for.get(name)
    if pending is not None and name not in admission.start:
        return Waiting(AwaitingVictims(pending.victims))
    body = ctx.bodies[name]
    if name not in admission.waiting and body.preempted_by is not None:
        return Waiting(PreemptedBy(body.preempted_by))
    return admission.waiting.get(name)


def _slots(ctx: PassState) -> int:
    """How many more may start this pass: max_inflight less the tasks Starting now."""
    starting = sum(1 for b in ctx.bodies.values() if b.phase is Phase.STARTING)
    return max(ctx.options.max_inflight - starting, 0)


def _free(ctx: PassState) -> Capacity:
    capacity = ctx.obs.capacity
    assert capacity is not None
    used = ctx.used
    if ctx.options.count_foreign_jobs and ctx.obs.jobs is not None:
        for job in ctx.obs.jobs.values():
            if not job.terminal and job.metadata.get(META_QUEUE) != ctx.options.queue_id:
                used = used + foreign_claim(job)
    return capacity - used


def _start(ctx: PassState, candidate: policies.Candidate) -> None:
    name, body, task = candidate.name, ctx.bodies[candidate.name], ctx.tasks[candidate.name]
    uid = body.uid or make_uid(ctx.options.queue_id, name, ctx.stamp)
    sid = submission_id_for(name, uid, body.run + 1, task.spec.submission_id)
    read = ctx.read.get(name)
    body = lifecycle.start_run(body, uid, sid, ctx.stamp, read.source if read else None)
    ctx.bodies[name] = body
    ctx.used = ctx.used + candidate.request
    ctx.plan.submits.append(Submit(name, submit_request(ctx.env, name, task, body)))
    ctx.plan.note(
        Reason.SUBMITTED,
        f"submitted {name} (priority {task.spec.priority}, "
        f"{resources_text(candidate.request)}) as {sid}",
    )
