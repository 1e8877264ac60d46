"""Who starts: dependency gating, the policy's (or the queues') admission, and why everyone
else waits."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from reconciler.core import (
    arrays,
    dependencies,
    fairshare,
    lifecycle,
    policies,
    preemption,
    queueing,
    victims,
)
from reconciler.core.decisions import Submit
from reconciler.core.depnames import DependencyViews
from reconciler.core.inputs import TaskInput
from reconciler.core.jobs import (
    claim_of,
    foreign_claim,
    make_uid,
    request_of,
    submission_id_for,
    submit_request,
)
from reconciler.core.preemption import preempt
from reconciler.core.quotas import resources_text
from reconciler.core.timestamps import EARLY, to_datetime, to_epoch
from reconciler.core.waits import AwaitingVictims, PreemptedBy, Preempting, Waiting
from specs.cluster import (
    META_QUEUE,
    Capacity,
)
from specs.models import (
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
    # A victim waits until its stopped run is gone from Ray, so it never holds two runs.
    eligible = [c for c in queue if c.name not in stopping]
    # An array at its maxParallel starts no more elements: they are not candidates at all.
    eligible, capped = arrays.cap(eligible, ctx.bodies, ctx.tasks)
    starting = sum(1 for b in ctx.bodies.values() if b.phase is Phase.STARTING)
    slots = max(ctx.options.max_inflight - starting, 0)
    policy = policies.POLICIES[ctx.options.policy]
    admission: policies.Admission | queueing.QueueAdmission
    if ctx.queues is None:
        admission = policy(eligible, free, ctx.claims, ctx.now, slots)
    else:
        capacity = ctx.obs.capacity
        assert capacity is not None
        admission = queueing.admit_by_queue(
            ctx.queues,
            capacity,
            free,
            eligible,
            ctx.in_use,
            ctx.claims,
            ctx.now,
            slots,
            policy,
            fairshare.RESERVATION_OF_POLICY.get(ctx.options.policy, fairshare.STRICT_RESERVATION),
            preemption.ready(ctx.bodies, ctx.tasks, all_stopping),
        )
        ctx.queue_admission = admission
    started = set(admission.start)
    preempting = preempt(ctx, eligible, admission, free, all_stopping)
    _until_of_age(ctx)
    positions: dict[str, int] = {}  # per queue with queues; one count without
    for candidate in queue:
        name = candidate.name
        if name in started:
            _start(ctx, candidate)
            continue
        owner = ctx.queues.queue_of(candidate.name) if ctx.queues is not None else ""
        positions[owner] = positions.get(owner, 0) + 1
        waiting = capped.get(name) or _why_waiting(ctx, name, admission, stopping_for, preempting)
        eta = waiting.estimated_start if waiting else None
        if eta is not None:
            # A reserved start is max(the claims' end, now): once the clock passes that end, it
            # moves with the clock, so this pass's answer holds up to the end at most.
            ctx.until = min(ctx.until, max(eta, ctx.now))
        body, place, at = ctx.bodies[name], positions[owner], to_datetime(eta) if eta else None
        if waiting is None:
            ctx.bodies[name] = lifecycle.queue(body, place, Reason.QUEUED, "queued", at)
        elif waiting.reason is Reason.PREEMPTING:
            ctx.bodies[name] = lifecycle.wait_for_victims(body, place, waiting.message, at)
        else:
            ctx.bodies[name] = lifecycle.queue(body, place, waiting.reason, waiting.message, at)


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
    body = lifecycle.start_run(body, uid, sid, ctx.stamp, ctx.sources.get(name))
    ctx.bodies[name] = body
    ctx.used = ctx.used + candidate.request
    ctx.plan.submits.append(Submit(name, submit_request(ctx.env, name, task, body)))
    ctx.plan.note(
        Reason.SUBMITTED,
        f"submitted {name} (priority {task.spec.priority}, "
        f"{resources_text(candidate.request)}) as {sid}",
    )
