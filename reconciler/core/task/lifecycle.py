"""The task's status through its life: each function fires one trigger of the state machine
(`reconciler.core.task.states`) and says which status fields change with it.

Pure: no I/O and no clock (the caller gives `now`). The planner decides *when* a trigger
fires; only this module decides what the phase becomes and which fields change with it. The
status fields are written here only, each by a named function: a transition, or, for a
field no transition writes, `record_spec_hash`, `note_ray_status`, `date_queue_entry`,
`with_conditions`, `in_queue` or `attach_log_tail`.

All transitions also keep the identity rule of `set_fields`: a status whose fields do not
really change is returned as the same object, which is how the loop knows not to write it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from reconciler.core.task.states import (
    TRANSITIONS,
    IllegalTransition,
    State,
    Trigger,
    fire,
    in_cycle,
    missing_since,
    set_fields,
    state_of,
)
from specs.cluster import META_RUN, META_UID, RUNNING, STOPPED, SUCCEEDED, RayJob
from specs.task.models import Condition, Phase, Reason, SourceRef
from specs.task.status import TaskStatusBody

__all__ = [  # the machine's names the planner and the tests use, beside the transitions
    "TRANSITIONS",
    "IllegalTransition",
    "State",
    "Trigger",
    "in_cycle",
    "missing_since",
    "set_fields",
    "state_of",
]


def _ts(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


_OFF_QUEUE: Mapping[str, object] = {
    "queue_position": None,
    "queue_position_bucket": None,
    "estimated_start_at": None,
    "scale_up_requested_at": None,
}
_NOTHING: Mapping[str, object] = {}
# The Preempted condition holds until the task's next run is admitted (or it is suspended, or
# its spec changes): that is when the preemption stops explaining why it waits.
_NOT_PREEMPTED: Mapping[str, object] = {"preempted_by": None}


# -- a task seen for the first time (no previous phase) ---------------------------------------
def first_queued(uid: str, spec_hash: str, now: datetime) -> TaskStatusBody:
    return TaskStatusBody(
        phase=Phase.QUEUED,
        reason=Reason.QUEUED,
        message="queued",
        uid=uid,
        run=0,
        spec_hash=spec_hash,
        queued_at=now,
    )


def adopted(job: RayJob, spec_hash: str, now: datetime) -> TaskStatusBody:
    """The live Ray job of a task whose status file was lost."""
    since = _ts(job.start_time) if job.start_time else now
    return TaskStatusBody(
        phase=Phase.RUNNING if job.status == RUNNING else Phase.STARTING,
        reason=Reason.ADOPTED,
        message=f"adopted Ray job {job.submission_id}",
        uid=job.metadata.get(META_UID),
        run=int(job.metadata.get(META_RUN, "1") or 1),
        submission_id=job.submission_id,
        spec_hash=spec_hash,
        ray_status=job.status,
        queued_at=since,
        submitted_at=since,
        started_at=_ts(job.start_time) if job.status == RUNNING and job.start_time else None,
    )


# -- the spec -------------------------------------------------------------------------------
def invalidate(body: TaskStatusBody | None, message: str) -> TaskStatusBody:
    """The spec does not parse. A task never seen valid starts out Invalid."""
    base = body if body is not None else TaskStatusBody(phase=Phase.INVALID)
    update = {"reason": Reason.INVALID_SPEC, "message": message, **_OFF_QUEUE}
    if body is None:
        return set_fields(base, update)
    return fire(base, Trigger.INVALIDATE, update)


def _new_run(
    body: TaskStatusBody,
    trigger: Trigger,
    reason: Reason,
    message: str,
    spec_hash: str,
    queued_at: datetime | None,
    extra: Mapping[str, object] = _NOTHING,
) -> TaskStatusBody:
    return fire(
        body,
        trigger,
        {
            **extra,
            "reason": reason,
            "message": message,
            "submission_id": None,
            "spec_hash": spec_hash,
            "ray_status": None,
            "queued_at": queued_at,
            "submitted_at": None,
            "started_at": None,
            "finished_at": None,
            "log_tail": None,
            **_OFF_QUEUE,
        },
    )


# A run the user asks for starts a fresh series of retries.
_FRESH: Mapping[str, object] = {"retries": 0, "lost_restarts": 0, "next_retry_at": None}


def restart(body: TaskStatusBody, spec_hash: str, now: datetime) -> TaskStatusBody:
    """The run-defining spec changed: the current run (if any) ends, a new one is queued."""
    message = "spec changed; new run queued"
    trigger, reason = Trigger.SPEC_CHANGED, Reason.SPEC_CHANGED
    return _new_run(body, trigger, reason, message, spec_hash, now, {**_FRESH, **_NOT_PREEMPTED})


def fresh_series(body: TaskStatusBody) -> TaskStatusBody:
    """A waiting task's spec changed: retries start again from 0, and a backoff ends. Not a
    transition (the phase stays Queued), so it needs no trigger."""
    if body.retries == 0 and body.lost_restarts == 0 and body.next_retry_at is None:
        return body
    update: dict[str, object] = dict(_FRESH)
    if body.reason == Reason.RETRY_BACKOFF:
        update |= {"reason": Reason.SPEC_CHANGED, "message": "spec changed; retries start again"}
    return set_fields(body, update)


def resume(body: TaskStatusBody, spec_hash: str, now: datetime) -> TaskStatusBody:
    message = "resumed; new run queued"
    return _new_run(body, Trigger.RESUME, Reason.RESUMED, message, spec_hash, now, _FRESH)


def suspend(body: TaskStatusBody, spec_hash: str | None, now: datetime) -> TaskStatusBody:
    """The one way to suspend. An active run ends now; a waiting task leaves the queue."""
    return fire(
        body,
        Trigger.SUSPEND,
        {
            "reason": Reason.SUSPENDED,
            "message": "suspended by spec",
            "spec_hash": spec_hash,
            "finished_at": now if body.phase.active else body.finished_at,
            **_NOT_PREEMPTED,
            **_OFF_QUEUE,
        },
    )


# -- the queue ------------------------------------------------------------------------------
_FIELD = TaskStatusBody._fields.index
_POSITION, _BUCKET = _FIELD("queue_position"), _FIELD("queue_position_bucket")
_REASON, _MESSAGE = _FIELD("reason"), _FIELD("message")
_ESTIMATE, _ASKED = _FIELD("estimated_start_at"), _FIELD("scale_up_requested_at")


def queue(
    body: TaskStatusBody,
    position: int | None,
    reason: Reason,
    message: str,
    estimated_start_at: datetime | None,
    scale_up_requested_at: datetime | None = None,
    bucket: str | None = None,
) -> TaskStatusBody:
    """Waits at `position` (1-based; None with a `bucket` beyond the exact places) for the
    reason the admission policy gave; on an autoscaling cluster, `scale_up_requested_at` dates
    its request for nodes."""
    if body.phase is Phase.QUEUED and body.missing_since is None:
        # What `fire` does from a Queued state (the phase stays, no timer to end), in one go:
        # a waiting task is placed in every full pass.
        if (
            body.queue_position == position
            and body.queue_position_bucket == bucket
            and body.reason == reason
            and body.message == message
            and body.estimated_start_at == estimated_start_at
            and body.scale_up_requested_at == scale_up_requested_at
        ):
            return body
        values = list(body)  # a copy with six fields set: several times faster than _replace
        values[_POSITION] = position
        values[_BUCKET] = bucket
        values[_REASON] = reason
        values[_MESSAGE] = message
        values[_ESTIMATE] = estimated_start_at
        values[_ASKED] = scale_up_requested_at
        return TaskStatusBody._make(values)
    return fire(
        body,
        Trigger.QUEUE,
        {
            "queue_position": position,
            "queue_position_bucket": bucket,
            "reason": reason,
            "message": message,
            "estimated_start_at": estimated_start_at,
            "scale_up_requested_at": scale_up_requested_at,
        },
    )


def wait_for_victims(
    body: TaskStatusBody,
    position: int | None,
    message: str,
    estimated_start_at: datetime | None,
    bucket: str | None = None,
) -> TaskStatusBody:
    """A preemptor waits at `position` while the runs it preempted stop."""
    update = {
        "queue_position": position,
        "queue_position_bucket": bucket,
        "reason": Reason.PREEMPTING,
        "message": message,
        "estimated_start_at": estimated_start_at,
    }
    return fire(body, Trigger.WAIT_FOR_VICTIMS, update)


def unschedulable(body: TaskStatusBody, message: str) -> TaskStatusBody:
    update = {"reason": Reason.EXCEEDS_CLUSTER, "message": message, **_OFF_QUEUE}
    return fire(body, Trigger.UNSCHEDULABLE, update)


def start_run(
    body: TaskStatusBody,
    uid: str,
    submission_id: str,
    now: datetime,
    source: SourceRef | None = None,
) -> TaskStatusBody:
    """Admitted: run number `body.run + 1` is recorded under `submission_id` before submit,
    with the commit its spec came from, if the folder is in git."""
    return fire(
        body,
        Trigger.ADMIT,
        {
            "reason": Reason.SUBMITTED,
            "uid": uid,
            "message": f"submitting Ray job {submission_id}",
            "run": body.run + 1,
            "submission_id": submission_id,
            "submitted_at": now,
            "source": source,
            "ray_status": None,
            "exit_code": None,
            "next_retry_at": None,
            "log_tail": None,  # a retry's run must not show the failed run's log as its own
            "after_preemption": body.preempted_by is not None,
            **_NOT_PREEMPTED,
            **_OFF_QUEUE,
        },
    )


def refuse_submit(body: TaskStatusBody, message: str, now: datetime) -> TaskStatusBody:
    """Ray refused the submission for good (bad runtime_env, ...): failed, not retried."""
    update = {
        "reason": Reason.SUBMIT_FAILED,
        "message": f"Ray refused the job: {message}",
        "finished_at": now,
    }
    return fire(body, Trigger.SUBMIT_REFUSED, update)


# -- what Ray reports -----------------------------------------------------------------------
def observe_pending(body: TaskStatusBody, job: RayJob) -> TaskStatusBody:
    update = {
        "ray_status": job.status,
        "reason": Reason.PENDING,
        "message": f"Ray job {body.submission_id or ''} is pending",
    }
    return fire(body, Trigger.RAY_PENDING, update)


def observe_running(body: TaskStatusBody, job: RayJob, now: datetime) -> TaskStatusBody:
    update = {
        "ray_status": job.status,
        "reason": Reason.RUNNING,
        "message": f"Ray job {body.submission_id or ''} is running",
        "finished_at": None,
        "started_at": body.started_at or now,
    }
    return fire(body, Trigger.RAY_RUNNING, update)


def end_run(body: TaskStatusBody, job: RayJob) -> TaskStatusBody:
    """Ray says the run ended: Succeeded, Stopped (by someone else) or Failed."""
    update: dict[str, object] = {
        "ray_status": job.status,
        "finished_at": _ts(job.end_time) if job.end_time else None,
        "exit_code": job.exit_code,
    }
    if job.status == SUCCEEDED:
        trigger = Trigger.RAY_SUCCEEDED
        update |= {"reason": Reason.SUCCEEDED, "message": "job succeeded"}
    elif job.status == STOPPED:
        trigger = Trigger.RAY_STOPPED
        update |= {
            "reason": Reason.STOPPED_IN_RAY,
            "message": "the job was stopped outside rayqueue",
        }
    else:
        trigger = Trigger.RAY_FAILED
        update |= {"reason": Reason.JOB_FAILED, "message": job.message or "job failed"}
    if body.phase.active:
        # Seen ending: record when it started. An outcome restored after a broken spec was
        # fixed keeps its record as it stood.
        started = _ts(job.start_time) if job.start_time else None
        update["started_at"] = body.started_at or started
    return fire(body, trigger, update)


def stopped_outside(old: TaskStatusBody, new: TaskStatusBody) -> bool:
    """Whether `new` ends the run `old` followed because Ray says its job was STOPPED by
    someone other than rayqueue (end_run's StoppedInRay): every stop of ours ends the run in
    the status first, so Ray's STOPPED never reaches an active run of ours. True at the one
    change that records it, so once per run."""
    return (
        old.phase.active
        and not new.phase.active
        and new.reason == Reason.STOPPED_IN_RAY
        and new.run == old.run
    )


def conflict(body: TaskStatusBody, now: datetime) -> TaskStatusBody:
    """The submission id is held by a job that is not this run's."""
    message = (
        f"Ray already has a job {body.submission_id or ''} that is not this task's; "
        "choose another spec.submissionId"
    )
    update = {
        "reason": Reason.SUBMISSION_ID_CONFLICT,
        "message": message,
        "finished_at": now,
        "ray_status": None,
    }
    return fire(body, Trigger.ID_CONFLICT, update)


def note_missing(
    body: TaskStatusBody, grace_seconds: float, now: datetime, *, after_outage: bool = False
) -> TaskStatusBody:
    """Ray no longer lists the running job: still Running while the grace period lasts.
    `after_outage`: first seen missing when Ray came back from being unreachable; the reason
    keeps that fact until the grace period ends (such a loss is no retry's fault)."""
    message = (
        f"Ray no longer lists job {body.submission_id or ''}"
        f"{' after it was unreachable' if after_outage else ''}; waiting "
        f"{grace_seconds:g}s before declaring it lost"
    )
    if after_outage:
        trigger, reason = Trigger.JOB_MISSING_AFTER_OUTAGE, Reason.JOB_MISSING_AFTER_OUTAGE
    else:
        trigger, reason = Trigger.JOB_MISSING, Reason.JOB_MISSING
    update = {"reason": reason, "message": message, "missing_since": now}
    return fire(body, trigger, update)


def requeue(
    body: TaskStatusBody,
    spec_hash: str,
    retries: int,
    next_retry_at: datetime | None = None,
    message: str | None = None,
) -> TaskStatusBody:
    """The run vanished from Ray for good and a retry is left: queued again, in its old
    place (queuedAt is kept), after the backoff if there is one."""
    words = f"job {body.submission_id or ''} vanished from Ray (head restart?); queued again"
    reason = Reason.RETRY_BACKOFF if next_retry_at is not None else Reason.REQUEUED
    extra = {"retries": retries, "lost_restarts": 0, "next_retry_at": next_retry_at}
    trigger = Trigger.REQUEUE_LOST
    return _new_run(body, trigger, reason, message or words, spec_hash, body.queued_at, extra)


def retry(
    body: TaskStatusBody, spec_hash: str, retries: int, next_retry_at: datetime, message: str
) -> TaskStatusBody:
    """A failed or timed-out run is tried again: queued in its old place (queuedAt kept), to
    start no earlier than `next_retry_at`. The run's exit code stays on show meanwhile."""
    extra = {"retries": retries, "lost_restarts": 0, "next_retry_at": next_retry_at}
    trigger, reason = Trigger.RETRY, Reason.RETRY_BACKOFF
    return _new_run(body, trigger, reason, message, spec_hash, body.queued_at, extra)


def give_up(body: TaskStatusBody, reason: Reason, message: str, now: datetime) -> TaskStatusBody:
    """No retry (BackoffLimitExceeded, NonRetryableExitCode): Failed for good."""
    update = {
        "reason": reason,
        "message": message,
        "finished_at": body.finished_at or now,
        "next_retry_at": None,
        **_OFF_QUEUE,
    }
    return fire(body, Trigger.GIVE_UP, update)


def dependency_cycle(body: TaskStatusBody, message: str) -> TaskStatusBody:
    update = {"reason": Reason.DEPENDENCY_CYCLE, "message": message, **_OFF_QUEUE}
    return fire(body, Trigger.DEPENDENCY_CYCLE, update)


def cycle_resolved(body: TaskStatusBody) -> TaskStatusBody:
    update = {"reason": Reason.QUEUED, "message": "queued", **_OFF_QUEUE}
    return fire(body, Trigger.CYCLE_RESOLVED, update)


def hold(body: TaskStatusBody, reason: Reason, message: str) -> TaskStatusBody:
    """Waits off the queue (no place in it): for a retry's backoff, or for dependencies."""
    update = {"reason": reason, "message": message, **_OFF_QUEUE}
    return fire(body, Trigger.HOLD, update)


def lose(body: TaskStatusBody, now: datetime) -> TaskStatusBody:
    message = f"job {body.submission_id or ''} vanished from Ray and restarts are used up"
    update = {"reason": Reason.JOB_LOST, "message": message, "finished_at": now}
    return fire(body, Trigger.LOSE, update)


def time_out(body: TaskStatusBody, timeout_seconds: float, now: datetime) -> TaskStatusBody:
    """Ran longer than spec.timeoutSeconds. Recorded first; the planner then stops the job."""
    message = f"ran longer than timeoutSeconds={timeout_seconds:g}; stopped"
    update = {
        "reason": Reason.TIMEOUT_EXCEEDED,
        "message": message,
        "finished_at": now,
        **_OFF_QUEUE,
    }
    return fire(body, Trigger.TIME_OUT, update)


def start_timed_out(body: TaskStatusBody, limit_seconds: float, now: datetime) -> TaskStatusBody:
    """Pending in Ray for longer than the start timeout (no node will take it)."""
    message = f"pending in Ray for over {limit_seconds:g}s; stopped"
    update = {"reason": Reason.START_TIMEOUT, "message": message, "finished_at": now, **_OFF_QUEUE}
    return fire(body, Trigger.START_TIMEOUT, update)


def preempt(body: TaskStatusBody, preemptor: str, message: str) -> TaskStatusBody:
    """Stopped for `preemptor`: queued again as a new run in its old place (queuedAt is kept),
    counted in `preemptions`, never as a failure. Recorded before the stop is sent."""
    extra = {"preemptions": body.preemptions + 1, "preempted_by": preemptor}
    trigger, reason = Trigger.PREEMPT, Reason.PREEMPTED
    spec_hash = body.spec_hash or ""
    return _new_run(body, trigger, reason, message, spec_hash, body.queued_at, extra)


def stop_overusing(body: TaskStatusBody, message: str) -> TaskStatusBody:
    """Stopped for holding more than it declares (its queue's `overuse: Stop`): as a
    preemption, queued again as a new run in its old place and counted in `preemptions`,
    never as a failure; no task took its place. Its job is stopped as any run no status owns
    (core/cleanup.py)."""
    extra = {"preemptions": body.preemptions + 1, "preempted_by": None}
    spec_hash = body.spec_hash or ""
    return _new_run(
        body, Trigger.PREEMPT, Reason.OVERUSING, message, spec_hash, body.queued_at, extra
    )


# -- fields no transition writes ------------------------------------------------------------
def note_over(body: TaskStatusBody, since: datetime | None) -> TaskStatusBody:
    """Since when the running run has held beyond its declaration (None: it holds within)."""
    return set_fields(body, {"over_since": since})


def record_spec_hash(body: TaskStatusBody, spec_hash: str) -> TaskStatusBody:
    """The spec a waiting task (or, without Ray, any task) will run."""
    return set_fields(body, {"spec_hash": spec_hash})


def note_ray_status(body: TaskStatusBody, ray_status: str) -> TaskStatusBody:
    """What Ray says of a finished run's job now (e.g. STOPPED after a timeout)."""
    return set_fields(body, {"ray_status": ray_status})


def date_queue_entry(body: TaskStatusBody, queued_at: datetime) -> TaskStatusBody:
    """Its FIFO age starts when its last dependency was met."""
    return set_fields(body, {"queued_at": queued_at})


def with_conditions(body: TaskStatusBody, conditions: list[Condition]) -> TaskStatusBody:
    return set_fields(body, {"conditions": conditions})


def in_queue(body: TaskStatusBody, queue: str | None) -> TaskStatusBody:
    """The team queue it belongs to (None: no team queues)."""
    return set_fields(body, {"queue": queue})


def attach_log_tail(body: TaskStatusBody, log_tail: str) -> TaskStatusBody:
    """The end of a failed run's log, fetched by the shell after the pass."""
    return body.model_copy(update={"log_tail": log_tail})
