"""Following an active run: what Ray says of its job, time limits, a lost job, and retries."""

from __future__ import annotations

from reconciler.core.admission import policies
from reconciler.core.decisions import TimeOut
from reconciler.core.task import lifecycle, retries
from reconciler.core.task.jobs import charged, claim_of, request_of
from reconciler.core.task.step import InUse, TaskStep
from reconciler.core.timestamps import to_datetime, to_epoch
from specs.cluster import (
    PENDING,
    RUNNING,
    Capacity,
    RayJob,
)
from specs.task import ownership
from specs.task.models import ConditionType, Phase, Reason, read_reason
from specs.task.records import Task
from specs.task.status import TaskStatusBody

_VERB = {Phase.TIMED_OUT: "timed out", Phase.SUSPENDED: "suspended", Phase.FAILED: "failed"}


def note_ended(step: TaskStep, name: str, body: TaskStatusBody, reason: Reason) -> TaskStatusBody:
    """Log a run we ended; the stray-job sweep then stops its job until Ray says it ended."""
    verb = _VERB.get(body.phase, body.phase.value.lower())
    step.note(reason, f"{verb} {name}: {body.message}")
    return body


def observe_run(
    step: TaskStep, name: str, task: Task, body: TaskStatusBody, job: RayJob | None
) -> TaskStatusBody:
    """Follow an active run by what Ray says of its job."""
    if job is not None and not ownership.names_run(
        job, step.options.queue_id, name, body.uid, body.run
    ):
        # Held by another queue's job, a foreign one (never adopted), another task's, or an
        # earlier incarnation of a re-created task: the run's id is taken.
        return lifecycle.conflict(body, step.stamp)
    if job is None:
        return _job_missing(step, name, task, body)
    if job.status == PENDING:
        return lifecycle.observe_pending(body, job)
    if job.status == RUNNING:
        # The clock is read only to record a start not recorded yet.
        return lifecycle.observe_running(body, job, step.recorded(body.started_at))
    ended = lifecycle.end_run(body, job)
    sid = body.submission_id or ""
    if ended.phase is Phase.FAILED and sid:
        step.fetch_log = sid
    # end_run of an active run always writes a Reason member; the fallback only satisfies types.
    reason = read_reason(ended.reason) or Reason.JOB_FAILED
    step.note(reason, f"{ended.phase.value.lower()} {name} (job {sid})")
    if ended.phase is Phase.FAILED:
        return _maybe_retry(
            step, name, task, ended, retries.RunEnd(retries.Outcome.FAILED, job.exit_code)
        )
    return ended


def _policy(task: Task) -> retries.RetryPolicy:
    return retries.policy_for(task.spec.retry, task.spec.max_lost_restarts)


def _retries_used(body: TaskStatusBody) -> int:
    # Sidecars written before `retries` existed counted lost restarts in lostRestarts.
    return max(body.retries, body.lost_restarts)


def _maybe_retry(
    step: TaskStep, name: str, task: Task, ended: TaskStatusBody, end: retries.RunEnd
) -> TaskStatusBody:
    """A run of this task ended badly (Failed, TimedOut): try it again, or say why not."""
    policy = _policy(task)
    decision = retries.decide(policy, end, _retries_used(ended))
    if decision.retried:
        at = to_datetime(step.now + decision.delay_seconds)
        message = retries.backoff_message(end, decision.retries, policy.limit,
                                          decision.delay_seconds)  # fmt: skip
        step.note(Reason.RETRY_BACKOFF, f"retrying {name}: {message}")
        spec_hash = ended.spec_hash or task.spec_hash()
        return lifecycle.retry(ended, spec_hash, decision.retries, at, message)
    return _give_up(step, name, ended, end, decision, policy)


def _give_up(
    step: TaskStep,
    name: str,
    ended: TaskStatusBody,
    end: retries.RunEnd,
    decision: retries.Decision,
    policy: retries.RetryPolicy,
) -> TaskStatusBody:
    if decision.verdict is retries.Verdict.EXHAUSTED:
        message = retries.exhausted_message(end, decision.retries + 1, policy.limit)
        step.note(Reason.BACKOFF_LIMIT_EXCEEDED, f"gave up on {name}: {message}")
        return lifecycle.give_up(ended, Reason.BACKOFF_LIMIT_EXCEEDED, message, step.stamp)
    if decision.verdict is retries.Verdict.NON_RETRYABLE:
        message = retries.non_retryable_message(end)
        return lifecycle.give_up(ended, Reason.NON_RETRYABLE_EXIT_CODE, message, step.stamp)
    return ended


def _job_missing(step: TaskStep, name: str, task: Task, body: TaskStatusBody) -> TaskStatusBody:
    """Ray does not list the run's job (any more)."""
    if body.phase is Phase.STARTING:
        # Recorded but not in Ray: we stopped between the status write and submit_job,
        # or the submit failed. The id is free, so submitting it again is safe; the caller
        # does it unless the spec changed meanwhile (a superseded run is never sent).
        step.resubmit = True
        return body
    grace = step.options.lost_grace_seconds
    since = lifecycle.missing_since(body)
    if since is None:
        # The conditions are last pass's: Ray was unreachable then, so the job went with it.
        outage = any(c.type == ConditionType.CLUSTER_UNAVAILABLE for c in body.conditions)
        return lifecycle.note_missing(body, grace, step.stamp, after_outage=outage)
    if not step.elapsed(since.timestamp(), grace, strictly=False):
        return body
    sid = body.submission_id or ""
    outage = lifecycle.state_of(body) is lifecycle.State.MISSING_AFTER_OUTAGE
    end = retries.RunEnd(
        retries.Outcome.LOST, None, retries.Cause.OUTAGE if outage else retries.Cause.RUN
    )
    policy = _policy(task)
    decision = retries.decide(policy, end, _retries_used(body))
    if decision.retried:
        step.note(Reason.REQUEUED, f"lost {name}: job {sid} vanished; queued again")
        spec_hash = body.spec_hash or task.spec_hash()
        if decision.delay_seconds > 0:
            at = to_datetime(step.now + decision.delay_seconds)
            message = (
                f"job {sid} vanished from Ray; "
                f"retry {decision.retries} of {policy.limit} in {decision.delay_seconds:g}s"
            )
            return lifecycle.requeue(body, spec_hash, decision.retries, at, message)
        return lifecycle.requeue(body, spec_hash, decision.retries)
    step.note(Reason.JOB_LOST, f"lost {name}: job {sid} vanished")
    if decision.verdict is retries.Verdict.EXHAUSTED and task.spec.retry is not None:
        message = retries.exhausted_message(end, decision.retries + 1, policy.limit)
        return lifecycle.give_up(body, Reason.BACKOFF_LIMIT_EXCEEDED, message, step.stamp)
    return lifecycle.lose(body, step.stamp)


def check_timeouts(step: TaskStep, name: str, task: Task, body: TaskStatusBody) -> TaskStatusBody:
    timeout = task.spec.timeout_seconds
    started = to_epoch(body.started_at)
    if (
        body.phase is Phase.RUNNING
        and timeout > 0
        and started is not None
        and step.elapsed(started, timeout)
    ):
        timed_out = lifecycle.time_out(body, timeout, step.stamp)
        timed_out = _timed_out(step, name, timed_out, Reason.TIMEOUT_EXCEEDED)
        return _maybe_retry(step, name, task, timed_out, retries.RunEnd(retries.Outcome.TIMED_OUT))
    limit = step.options.start_timeout_seconds
    submitted = to_epoch(body.submitted_at)
    if (
        body.phase is Phase.STARTING
        and body.ray_status == PENDING
        and submitted is not None
        and step.elapsed(submitted, limit)
    ):
        timed_out = lifecycle.start_timed_out(body, limit, step.stamp)
        timed_out = _timed_out(step, name, timed_out, Reason.START_TIMEOUT)
        return _maybe_retry(step, name, task, timed_out, retries.RunEnd(retries.Outcome.FAILED))
    return body


def _timed_out(step: TaskStep, name: str, body: TaskStatusBody, reason: Reason) -> TaskStatusBody:
    step.timeouts.append(TimeOut(name, body.submission_id or "", reason, body.message or ""))
    return note_ended(step, name, body, reason)


def keep_active(step: TaskStep, body: TaskStatusBody, task: Task | None) -> None:
    sid = body.submission_id
    if sid is None:
        return
    job = step.env.ours.get(sid)
    if task is not None:
        declared = request_of(task)
    elif job is not None:
        declared = claim_of(job)
    else:
        declared = Capacity()
    # The one place a run's request becomes what it counts for: admission, quotas, shares,
    # backfill's estimate and preemption all read this charge.
    held = step.obs.held.get(sid)
    # A queue that only warns of a run holding more than it declares counts its declaration.
    counted = None if step.env.overuse_of(step.name).mode == "Warn" else held
    req = charged(declared, counted)
    timeout = task.spec.timeout_seconds if task is not None else 0
    started = to_epoch(body.started_at) or to_epoch(body.submitted_at) or step.now
    step.in_use = InUse(
        sid,
        req,
        policies.Claim(req, started + timeout if timeout > 0 else None, step.name),
        held is not None,
    )
