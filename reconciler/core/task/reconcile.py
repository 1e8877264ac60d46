"""One task's own part of a pass: decided from its spec, its status, its run's job, the
pass-wide TaskEnv and `now` alone (see TaskResult), before dependencies and admission look at
all tasks."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from functools import lru_cache

from reconciler.core import scaling as scaling_core
from reconciler.core.admission import policies
from reconciler.core.decisions import Event, Submit
from reconciler.core.preemption import victims
from reconciler.core.task import depnames, lifecycle, overuse
from reconciler.core.task.jobs import bundles_of, make_uid, request_of, submit_request, uid_at
from reconciler.core.task.runs import check_timeouts, keep_active, note_ended, observe_run
from reconciler.core.task.step import QueueKey, TaskEnv, TaskResult, TaskStep, Waiter
from reconciler.core.timestamps import to_datetime, to_epoch
from specs.cluster import (
    META_SPEC_HASH,
    Capacity,
    RayJob,
)
from specs.task import ownership
from specs.task.arrays import order_key
from specs.task.errors import SpecError
from specs.task.inputs import TaskInput
from specs.task.models import ConditionType, Phase, Reason
from specs.task.quantity import human_memory
from specs.task.records import Task
from specs.task.status import TaskStatus, TaskStatusBody


def unschedulable(req: Capacity, capacity: Capacity, grows: bool = False) -> str | None:
    """Why `req` can never fit `capacity` (the whole cluster, or with `grows` its ceiling)."""
    whole = "the cluster can grow to at most" if grows else "the whole cluster has"
    if req.cpu > capacity.cpu + 1e-9:
        return f"asks for {req.cpu:g} CPU; {whole} {capacity.cpu:g}"
    if req.gpu > capacity.gpu + 1e-9:
        return f"asks for {req.gpu:g} GPU; {whole} {capacity.gpu:g}"
    if req.memory > capacity.memory + 1e-9:
        return (
            f"asks for {human_memory(req.memory)} memory; {whole} {human_memory(capacity.memory)}"
        )
    return None


def reconcile_task(
    env: TaskEnv, spec: TaskInput, prev: TaskStatus | None, now: float
) -> TaskResult:
    """One task's own part of a pass (see TaskResult). Pure."""
    task = spec.task
    if task is not None and task.spec.depends_on and env.options.visibility.readers:
        hidden = depnames.hidden(spec.name, task.spec.depends_on, env.options.visibility)
        if hidden is not None:
            message = f"spec.dependsOn: {hidden!r} is not visible to this task's folder"
            spec = refused(spec, message)
    plain = plain_wait(env, spec, prev, now)
    if plain is not None:
        return plain
    return reconcile_steps(env, spec, prev, now)


def refused(spec: TaskInput, message: str) -> TaskInput:
    """`spec` turned Invalid by a rule of the pass (`message`: why), not by its file: its last
    valid spec is the spec itself, so a run it already has goes on; it is never submitted
    again while the rule holds."""
    error = SpecError.unplaced(message)
    return replace(spec, task=None, error=error, last_valid=spec.task, spec_hash=None)


def plain_wait(
    env: TaskEnv, spec: TaskInput, prev: TaskStatus | None, now: float
) -> TaskResult | None:
    """The common case in one go (as after a cold start): a task that simply waits, seen for
    the first time with no job of it in Ray, or whose Queued status already records its spec
    and sits out no backoff. Its result is what `reconcile_steps` gives (first sight, follow
    the spec, settle, enqueue), built without them; None: any other case, for the steps.
    tests/unit/core/task/test_plain_wait.py checks it against them."""
    task = spec.task
    obs = env.obs
    if task is None or not obs.available or task.spec.suspend or obs.scaling is not None:
        return None
    name = spec.name
    spec_hash = spec.hash_of(task)
    if prev is None:
        if name in env.by_task:  # Ray may hold a live run of it to adopt
            return None
        stamp, iso = _instant(now)  # depends on `now`: the result holds for this instant only
        uid = uid_at(env.options.queue_id, name, iso)
        body = lifecycle.first_queued(uid, spec_hash, stamp)
        since, until = now, now
    else:
        body = prev.status
        if (
            body.phase is not Phase.QUEUED
            or body.spec_hash != spec_hash
            or body.next_retry_at is not None
            or body.submission_id is not None  # no run of ours is queued: the steps judge it
            or (body.conditions and overuse.stopped_for_it(body))  # the steps keep saying so
        ):
            return None
        since, until = -math.inf, math.inf
    req = request_of(task)
    capacity = obs.capacity
    assert capacity is not None
    if unschedulable(req, capacity) is not None:
        return None
    queued = to_epoch(body.queued_at)
    if not queued:  # its place would be read from the clock
        queued, since, until = now, now, now
    key = QueueKey(-task.spec.priority, queued, order_key(name))
    candidate = policies.Candidate(name, req, task.spec.timeout_seconds, task.spec.preemptible)
    waiter = Waiter(key, candidate, task, bool(task.spec.depends_on))
    # Only clock reads pin this result (first sight, a place read from the clock), and they
    # pin its read-back too (TaskStep.now): settles_until is valid_until.
    return TaskResult(body, waiter=waiter, valid_from=since, valid_until=until, settles_until=until)


@lru_cache(maxsize=2)
def _instant(now: float) -> tuple[datetime, str]:
    """`now` as a status's timestamp and its ISO text: built once for all the tasks a pass
    sees first at that instant (equal values, as the steps build them per task)."""
    stamp = to_datetime(now)
    return stamp, stamp.isoformat()


def reconcile_steps(
    env: TaskEnv, spec: TaskInput, prev: TaskStatus | None, now: float
) -> TaskResult:
    """`reconcile_task` step by step: every case."""
    step = TaskStep(env, spec.name, now)
    try:
        _reconcile_task(step, spec, prev)
    except lifecycle.IllegalTransition as exc:
        return _refused_transition(env, spec, prev, now, exc)
    settled, task = step.body, spec.task
    if (
        settled is not None
        and settled.phase is Phase.RUNNING
        and task is not None
        and settled.started_at
    ):
        # A run under a broken spec is never a victim: it could not be queued again. What it
        # frees is what it is charged (keep_active), as admission counts it.
        held = step.in_use.request if step.in_use is not None else request_of(task)
        return step.result(
            victims.Running(
                spec.name,
                task.spec.priority,
                held,
                settled.started_at.timestamp(),
                task.spec.preemptible,
                settled.preemptions,
                task.spec.resumable,
                # Its share of the ceiling, as quotas and fair shares count it (admission).
                victims.dominant_share(
                    held,
                    scaling_core.ceiling_of(env.obs.capacity or Capacity(), env.obs.scaling),
                ),
                env.preemption.stop_wait(spec.name) or 0.0,
            )
        )
    return step.result(None)


def _refused_transition(
    env: TaskEnv,
    spec: TaskInput,
    prev: TaskStatus | None,
    now: float,
    exc: lifecycle.IllegalTransition,
) -> TaskResult:
    """The state machine refused a transition: a bug in the planner, never the user's doing.
    One task must not stop the pass for all the others, so this one keeps its status (and a
    running job keeps its resources) and the pass logs an error every time until it is fixed.
    The test worlds assert that no pass logs it (tests/support/planner_world.py)."""
    step = TaskStep(env, spec.name, now)
    step.note(
        Reason.ILLEGAL_TRANSITION,
        f"{spec.name}: {exc}; its status is left as it was (a bug: please report it)",
        logging.ERROR,
    )
    if prev is None:
        step.body = lifecycle.invalidate(None, f"internal error: {exc}")
        return step.result(None)
    step.body = prev.status
    if prev.status.phase.active:
        keep_active(step, prev.status, spec.task or spec.last_valid)
    return step.result(None)


def _reconcile_task(step: TaskStep, spec: TaskInput, prev: TaskStatus | None) -> None:
    name = spec.name
    body = prev.status if prev is not None else None
    if not step.obs.available:
        step.conds[ConditionType.CLUSTER_UNAVAILABLE] = (
            Reason.RAY_UNREACHABLE,
            f"Ray could not be asked: {step.obs.error or 'unavailable'}; nothing is stopped",
        )
    elif body is not None and body.submission_id:
        body = _believed(step, spec, body)
    task = _usable_task(step, spec, body)
    if task is None:
        return
    spec_hash = spec.hash_of(task)
    if body is None:
        body = _first_sight(step, name, task, spec_hash, step.env.by_task.get(name, ()))
    job = _job_of(step, body)
    # Ray's job under the run's id, when it is this run's: the only one whose state is shown.
    own = job if job is not None and _names_run(step, name, body, job) else None

    if not step.obs.available:
        # Without Ray we can only keep what we had; never act, never re-derive phases.
        if body.phase.active:
            keep_active(step, body, task)
        step.body = lifecycle.record_spec_hash(body, body.spec_hash or spec_hash)
        return

    if body.phase.active:
        body = observe_run(step, name, task, body, job)
    body = _follow_spec(step, name, task, body, own, spec_hash, edited=spec.task is not None)
    _settle(step, name, task, body, own)


def _believed(step: TaskStep, spec: TaskInput, body: TaskStatusBody) -> TaskStatusBody | None:
    """The status as read, unless the run it names is not this task's by our own record
    (specs/task/ownership.py, Proof.stands): the file is then ignored as if it were missing
    (a live run of the task is adopted, or it is queued anew) and its status written over it.
    Only with Ray listed: without, nothing is acted on, shown or stopped, and the next pass
    judges."""
    known = spec.task or spec.last_valid
    explicit = known.spec.submission_id if known is not None else None
    job = _job_of(step, body)
    proof = ownership.prove(spec.name, body, explicit, job, step.options.queue_id)
    # An Invalid status holds no live run (a spec is invalidated only while its task has
    # none): the id it records is never followed, submitted or stopped (a start takes the
    # next run's id, an outcome is read only from a job Ray lists). It stands as the finished
    # status it was made from did, or the pass after one that invalidates an ended run would
    # disown that pass's own write.
    if proof.stands(ended=body.phase.finished or body.phase is Phase.INVALID):
        return body
    message = (
        f"the status file of {spec.name} names job {body.submission_id!r}, which by our own "
        "record is not a run of this task: ignored, and written anew"
    )
    step.events.append(Event(logging.WARNING, Reason.STATUS_IGNORED, message, spec.name))
    return None


def _names_run(step: TaskStep, name: str, body: TaskStatusBody, job: RayJob) -> bool:
    return ownership.names_run(job, step.options.queue_id, name, body.uid, body.run)


def _usable_task(step: TaskStep, spec: TaskInput, body: TaskStatusBody | None) -> Task | None:
    """The spec to plan with; None when the task is settled already (its file is broken)."""
    if spec.task is not None:
        return spec.task
    message = str(spec.error) if spec.error is not None else "invalid spec"
    if body is None or not body.phase.active:
        step.body = lifecycle.invalidate(body, message)
        return None
    # A broken file never stops a healthy job: it runs on under the last valid spec.
    step.conds[ConditionType.SPEC_INVALID] = (
        ConditionType.SPEC_INVALID,
        f"{message}; the job keeps running",
    )
    if spec.last_valid is None:  # nothing remembered (we restarted): leave it untouched
        keep_active(step, body, None)
        step.body = body
    return spec.last_valid


def _job_of(step: TaskStep, body: TaskStatusBody) -> RayJob | None:
    """Ray's job under the run's id, whoever's it is (another's: an id conflict)."""
    sid = body.submission_id
    if not sid:
        return None
    job = step.env.ours.get(sid)
    if job is None and step.obs.jobs is not None:
        job = step.obs.jobs.get(sid)
    return job


def _follow_spec(
    step: TaskStep,
    name: str,
    task: Task,
    body: TaskStatusBody,
    job: RayJob | None,
    spec_hash: str,
    *,
    edited: bool,  # False: planning under the last valid spec of a broken file
) -> TaskStatusBody:
    """A run-defining change, a suspend, or a re-run request all end the current run."""
    suspend, phase = task.spec.suspend, body.phase
    if phase.active:
        if suspend:
            suspended = lifecycle.suspend(body, body.spec_hash, step.stamp)
            return note_ended(step, name, suspended, Reason.SUSPENDED)
        if body.spec_hash != spec_hash and edited:
            step.note(
                Reason.SPEC_CHANGED, f"spec of {name} changed while running; stopping old run"
            )
            return lifecycle.restart(body, spec_hash, step.stamp)
        return body
    if phase is Phase.SUSPENDED:
        return body if suspend else lifecycle.resume(body, spec_hash, step.stamp)
    if lifecycle.in_cycle(body) and body.spec_hash == spec_hash:
        # Invalid only through its dependencies: it waits; the dependency gate judges it anew.
        return lifecycle.suspend(body, spec_hash, step.stamp) if suspend else body
    if phase is Phase.INVALID and _outcome_stands(body, job, spec_hash):
        assert job is not None
        return lifecycle.end_run(body, job)
    if phase.finished or phase is Phase.INVALID:
        if body.spec_hash == spec_hash and phase is not Phase.INVALID:
            return body
        if suspend:
            return lifecycle.suspend(body, spec_hash, step.stamp)
        return lifecycle.restart(body, spec_hash, step.stamp)
    if phase in (Phase.QUEUED, Phase.UNSCHEDULABLE):
        if body.spec_hash != spec_hash:
            body = lifecycle.fresh_series(body)  # a fixed spec need not sit out a backoff
        body = lifecycle.record_spec_hash(body, spec_hash)
        return lifecycle.suspend(body, spec_hash, step.stamp) if suspend else body
    return body


def _outcome_stands(body: TaskStatusBody, job: RayJob | None, spec_hash: str) -> bool:
    """Fixed back to the spec of a run that already ended: its outcome stands."""
    return bool(
        body.spec_hash == spec_hash and job is not None and job.terminal and body.submission_id
    )


def _settle(
    step: TaskStep,
    name: str,
    task: Task,
    body: TaskStatusBody,
    job: RayJob | None,
) -> None:
    """Time limits, resources held, resubmits and the queue, for the task's final phase."""
    if body.phase.active:
        body = check_timeouts(step, name, task, body)
    if body.phase is Phase.RUNNING:
        body = overuse.judge(step, name, task, body)
    elif body.phase is Phase.QUEUED:
        overuse.keep_stopped(step, body)
    if body.phase.active:
        keep_active(step, body, task)
    if step.resubmit and body.phase is Phase.STARTING and body.submission_id:
        step.submits.append(Submit(name, submit_request(step.env, name, task, body)))
    if body.phase in (Phase.QUEUED, Phase.UNSCHEDULABLE) or lifecycle.in_cycle(body):
        if step.due(to_epoch(body.next_retry_at)):
            body = _enqueue(step, name, task, body)
        elif not lifecycle.in_cycle(body):  # a cycle keeps it off the queue already
            body = lifecycle.hold(body, Reason.RETRY_BACKOFF, body.message or "retry backoff")
    elif job is not None and body.phase.finished and body.ray_status != job.status:
        body = lifecycle.note_ray_status(body, job.status)  # e.g. STOPPED after a timeout
    step.body = body


def _first_sight(
    step: TaskStep, name: str, task: Task, spec_hash: str, task_jobs: Sequence[RayJob]
) -> TaskStatusBody:
    """A task with no sidecar: adopt its live job if Ray has one, else queue it."""
    live = [j for j in task_jobs if not j.terminal and j.metadata.get(META_SPEC_HASH) == spec_hash]
    if live:
        # The latest started; of equal starts, the greatest id (Ray lists jobs in no order).
        job = max(live, key=lambda j: (j.start_time or 0, j.submission_id))
        step.note(
            Reason.ADOPTED, f"adopted {name}: Ray job {job.submission_id} (status file was missing)"
        )
        return lifecycle.adopted(job, spec_hash, step.stamp)
    stamp = step.stamp  # one instant, built once
    return lifecycle.first_queued(make_uid(step.options.queue_id, name, stamp), spec_hash, stamp)


def _enqueue(step: TaskStep, name: str, task: Task, body: TaskStatusBody) -> TaskStatusBody:
    """Into the admission queue, unless it could never fit. Its phase and place in the queue
    are written by admit, which always follows."""
    req = request_of(task)
    capacity = step.obs.capacity
    assert capacity is not None
    scaling = step.obs.scaling
    # On an autoscaling cluster, what it can grow to decides; what is free now decides later.
    too_big = unschedulable(req, scaling_core.ceiling_of(capacity, scaling), scaling is not None)
    if too_big is None and scaling is not None:
        too_big = scaling_core.misfit(bundles_of(task), scaling.node_types)
    if too_big is not None:
        # A task held in a dependency cycle stays so: the cycle is what the user must fix first.
        return body if lifecycle.in_cycle(body) else lifecycle.unschedulable(body, too_big)
    # An array's elements share priority and first sight: they queue in index order.
    key = QueueKey(-task.spec.priority, to_epoch(body.queued_at) or step.now, order_key(name))
    candidate = policies.Candidate(name, req, task.spec.timeout_seconds, task.spec.preemptible)
    step.waiter = Waiter(
        key, candidate, task, bool(task.spec.depends_on) or lifecycle.in_cycle(body)
    )
    return body
