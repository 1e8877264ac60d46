"""The pure planner: specs + statuses + what Ray reports + capacity + now -> actions and statuses.

No I/O, no clock, no randomness. Everything the loop does is decided here, so it can be tested
table-driven and driven by the simulator. The shell (loop.py) writes the returned statuses
*before* it submits, which is what makes submission ids safe across crashes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from reconciler import policies
from specs.cluster import (
    META_CPU,
    META_GPU,
    META_MEMORY,
    META_QUEUE,
    META_RUN,
    META_SPEC_HASH,
    META_TASK,
    META_UID,
    PENDING,
    RUNNING,
    STOPPED,
    SUCCEEDED,
    Capacity,
    RayJob,
    SubmitRequest,
)
from specs.models import Condition, Metadata, Phase, Task, TaskStatus, TaskStatusBody
from specs.quantity import human_memory

COND_SPEC_INVALID = "SpecInvalid"
COND_CLUSTER_UNAVAILABLE = "ClusterUnavailable"
CONDITION_ORDER = (COND_SPEC_INVALID, COND_CLUSTER_UNAVAILABLE)


@dataclass(frozen=True)
class TaskInput:
    """One spec file as the store read it."""

    name: str
    task: Task | None
    error: str | None = None
    last_valid: Task | None = None  # keeps a running job going while its file is broken
    spec_hash: str | None = None  # of `task`, computed once per parse by the shell

    def hash_of(self, task: Task) -> str:
        return self.spec_hash if task is self.task and self.spec_hash else task.spec_hash()


@dataclass(frozen=True)
class Observation:
    """What Ray reported this pass. `jobs is None` means Ray could not be asked."""

    jobs: Mapping[str, RayJob] | None
    capacity: Capacity | None
    error: str | None = None

    @property
    def available(self) -> bool:
        return self.jobs is not None and self.capacity is not None


@dataclass(frozen=True)
class PlanOptions:
    queue_id: str = "default"
    policy: str = "strict"
    max_inflight: int = 32
    start_timeout_seconds: float = 600.0
    lost_grace_seconds: float = 60.0
    max_stops_per_pass: int = 10  # for deletions; 0 means no limit
    allow_mass_delete: bool = False
    count_foreign_jobs: bool = False
    history_retention_seconds: float | None = None  # None: never delete finished jobs from Ray
    max_deletes_per_pass: int = 100


@dataclass(frozen=True)
class Stop:
    submission_id: str
    task: str | None
    reason: str


@dataclass(frozen=True)
class Submit:
    task: str
    request: SubmitRequest


@dataclass(frozen=True)
class Summary:
    capacity: Capacity | None
    used: Capacity
    queued: int
    starting: int
    running: int


@dataclass
class Plan:
    statuses: dict[str, TaskStatus] = field(default_factory=dict)
    submits: list[Submit] = field(default_factory=list)
    stops: list[Stop] = field(default_factory=list)
    delete_statuses: list[str] = field(default_factory=list)
    fetch_logs: list[str] = field(default_factory=list)  # tasks whose failed run needs a logTail
    deletes: list[str] = field(default_factory=list)  # finished jobs to drop from Ray's history
    events: list[str] = field(default_factory=list)  # one line per decision, for the log
    held_deletions: int = 0
    summary: Summary | None = None


def _set(body: TaskStatusBody, update: Mapping[str, object]) -> TaskStatusBody:
    """model_copy only if a field really changes: unchanged statuses keep their identity,
    which lets the shell skip them cheaply."""
    for key, value in update.items():
        if getattr(body, key) != value:
            return body.model_copy(update=dict(update))
    return body


def _ts(now: float) -> datetime:
    return datetime.fromtimestamp(now, UTC)


def _epoch(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


def request_of(task: Task) -> Capacity:
    r = task.spec.resources
    return Capacity(r.cpu, r.gpu, float(r.memory))


def _claim_from_metadata(job: RayJob) -> Capacity:
    def num(key: str) -> float:
        try:
            return float(job.metadata.get(key, 0) or 0)
        except ValueError:
            return 0.0

    return Capacity(num(META_CPU), num(META_GPU), num(META_MEMORY))


def _foreign_claim(job: RayJob) -> Capacity:
    """Another rayqueue queue's job: its declared reservation; any other job: what it asked
    Ray for its entrypoint (entrypoint_num_cpus and friends)."""
    if META_QUEUE in job.metadata:
        return _claim_from_metadata(job)
    return Capacity(job.entrypoint_cpus, job.entrypoint_gpus, job.entrypoint_memory)


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def make_uid(queue_id: str, name: str, first_seen: datetime) -> str:
    """Fixed at first sight of a task; a re-created task is seen anew and gets another."""
    seed = f"{queue_id}/{name}@{first_seen.isoformat()}"
    return hashlib.sha256(seed.encode()).hexdigest()[:8]


def submission_id_for(name: str, uid: str, run: int, explicit: str | None) -> str:
    """Deterministic from recorded state, unique over the cluster's history."""
    if explicit:
        return explicit if run == 1 else f"{explicit}-{run}"
    slug = _UNSAFE.sub("-", name.replace("/", ".")).strip("-.")[:80] or "task"
    return f"rq-{slug}-{uid}-{run}"


def _resources_text(req: Capacity) -> str:
    parts = []
    if req.cpu:
        parts.append(f"{req.cpu:g} CPU")
    if req.gpu:
        parts.append(f"{req.gpu:g} GPU")
    if req.memory:
        parts.append(f"{human_memory(req.memory)} memory")
    return ", ".join(parts)


def _unschedulable(req: Capacity, capacity: Capacity) -> str | None:
    if req.cpu > capacity.cpu + 1e-9:
        return f"asks for {req.cpu:g} CPU; the whole cluster has {capacity.cpu:g}"
    if req.gpu > capacity.gpu + 1e-9:
        return f"asks for {req.gpu:g} GPU; the whole cluster has {capacity.gpu:g}"
    if req.memory > capacity.memory + 1e-9:
        return (
            f"asks for {human_memory(req.memory)} memory; "
            f"the whole cluster has {human_memory(capacity.memory)}"
        )
    return None


def _conditions(
    previous: Sequence[Condition], wanted: Mapping[str, tuple[str, str]], now: float
) -> list[Condition]:
    """Keep each condition's transition time while it holds; fixed order; seconds precision."""
    old = {c.type: c for c in previous}
    result = []
    for ctype in CONDITION_ORDER:
        if ctype not in wanted:
            continue
        reason, message = wanted[ctype]
        since = old[ctype].last_transition_time if ctype in old else _ts(float(int(now)))
        result.append(
            Condition(type=ctype, reason=reason, message=message, last_transition_time=since)
        )
    return result


@dataclass
class _Ctx:
    options: PlanOptions
    obs: Observation
    now: float
    plan: Plan
    # our non-terminal jobs that belong to an active run; everything else of ours gets stopped
    kept_jobs: set[str] = field(default_factory=set)
    claims: list[policies.Claim] = field(default_factory=list)
    used: Capacity = field(default_factory=Capacity)
    queue: list[tuple[tuple[int, float, str], policies.Candidate]] = field(default_factory=list)
    bodies: dict[str, TaskStatusBody] = field(default_factory=dict)
    tasks: dict[str, Task] = field(default_factory=dict)  # the queued ones, for admission
    conds: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)
    resubmit: set[str] = field(default_factory=set)  # Starting runs Ray has never heard of
    folder_empty: bool = False  # no spec and no sidecar at all: unmounted, or wiped


def plan(
    specs: Mapping[str, TaskInput],
    statuses: Mapping[str, TaskStatus],
    observed: Observation,
    now: datetime,
    options: PlanOptions = PlanOptions(),
) -> Plan:
    """Decide one reconcile pass. Pure: same inputs, same plan."""
    ctx = _Ctx(options=options, obs=observed, now=now.timestamp(), plan=Plan())
    ctx.folder_empty = not specs and not statuses
    jobs = observed.jobs or {}
    ours = {
        sid: job for sid, job in jobs.items() if job.metadata.get(META_QUEUE) == options.queue_id
    }
    by_task: dict[str, list[RayJob]] = {}
    for job in ours.values():
        by_task.setdefault(job.metadata.get(META_TASK, ""), []).append(job)

    for name in sorted(specs):
        prev = statuses.get(name)
        _reconcile_task(ctx, specs[name], prev, ours, by_task.get(name, []))

    if observed.available:
        _stop_strays(ctx, ours, specs)
        _admit(ctx)
        _expire_history(ctx, ours, statuses)
    _orphan_sidecars(ctx, specs, statuses, ours)

    for name, body in ctx.bodies.items():
        prev = statuses.get(name)
        wanted = ctx.conds.get(name, {})
        if wanted or body.conditions:
            old = prev.status.conditions if prev else []
            body = _set(body, {"conditions": _conditions(old, wanted, ctx.now)})
        if prev is not None and prev.status is body:
            ctx.plan.statuses[name] = prev  # unchanged: same object, nothing to write
        else:
            ctx.plan.statuses[name] = TaskStatus(metadata=Metadata(name=name), status=body)

    phases = [s.status.phase for s in ctx.plan.statuses.values()]
    ctx.plan.summary = Summary(
        capacity=observed.capacity,
        used=ctx.used,
        queued=phases.count(Phase.QUEUED),
        starting=phases.count(Phase.STARTING),
        running=phases.count(Phase.RUNNING),
    )
    return ctx.plan


def _reconcile_task(
    ctx: _Ctx,
    spec: TaskInput,
    prev: TaskStatus | None,
    ours: Mapping[str, RayJob],
    task_jobs: Sequence[RayJob],
) -> None:
    name, now = spec.name, ctx.now
    body = prev.status if prev is not None else None
    conds: dict[str, tuple[str, str]] = {}
    ctx.conds[name] = conds
    if not ctx.obs.available:
        conds[COND_CLUSTER_UNAVAILABLE] = (
            "RayUnreachable",
            f"Ray could not be asked: {ctx.obs.error or 'unavailable'}; nothing is stopped",
        )

    task = spec.task
    if task is None:
        message = spec.error or "invalid spec"
        if body is None or not body.phase.active:
            base = body or TaskStatusBody(phase=Phase.INVALID)
            ctx.bodies[name] = _set(
                base,
                {
                    "phase": Phase.INVALID,
                    "reason": "InvalidSpec",
                    "message": message,
                    "queue_position": None,
                    "estimated_start_at": None,
                },
            )
            return
        # A broken file never stops a healthy job: it runs on under the last valid spec.
        conds[COND_SPEC_INVALID] = ("SpecInvalid", f"{message}; the job keeps running")
        if spec.last_valid is None:  # nothing remembered (we restarted): leave it untouched
            _keep_active(ctx, body, None, ours)
            ctx.bodies[name] = body
            return
        task = spec.last_valid

    if body is None:
        body = _first_sight(ctx, name, task, spec.hash_of(task), task_jobs)

    spec_hash = spec.hash_of(task)
    job = ours.get(body.submission_id) if body.submission_id else None
    if job is None and body.submission_id and ctx.obs.jobs is not None:
        job = ctx.obs.jobs.get(body.submission_id)  # present but not ours: an id conflict

    if not ctx.obs.available:
        # Without Ray we can only keep what we had; never act, never re-derive phases.
        if body.phase.active:
            _keep_active(ctx, body, task, ours)
        ctx.bodies[name] = _set(body, {"spec_hash": body.spec_hash or spec_hash})
        return

    if body.phase.active:
        body = _observe_run(ctx, name, task, body, job)

    # A run-defining change, a suspend, or a re-run request all end the current run.
    if body.phase.active:
        if task.spec.suspend:
            body = _end_run(ctx, name, body, Phase.SUSPENDED, "Suspended", "suspended by spec")
        elif body.spec_hash != spec_hash and spec.task is not None:
            ctx.plan.events.append(f"spec of {name} changed while running; stopping old run")
            body = _new_run(body, spec_hash, now, "SpecChanged", "spec changed; new run queued")
    elif body.phase is Phase.SUSPENDED:
        if not task.spec.suspend:
            body = _new_run(body, spec_hash, now, "Resumed", "resumed; new run queued")
    elif (
        body.phase is Phase.INVALID
        and body.spec_hash == spec_hash
        and job is not None
        and job.terminal
        and body.submission_id
    ):
        # Fixed back to the spec of a run that already ended: its outcome stands.
        body = _set(body, _outcome(job))
    elif body.phase.finished or body.phase is Phase.INVALID:
        if body.spec_hash != spec_hash or body.phase is Phase.INVALID:
            if task.spec.suspend:
                body = _set(
                    body,
                    {
                        "phase": Phase.SUSPENDED,
                        "reason": "Suspended",
                        "message": "suspended by spec",
                        "spec_hash": spec_hash,
                    },
                )
            else:
                body = _new_run(body, spec_hash, now, "SpecChanged", "spec changed; new run queued")
    elif body.phase in (Phase.QUEUED, Phase.UNSCHEDULABLE):
        body = _set(body, {"spec_hash": spec_hash})
        if task.spec.suspend:
            body = _set(
                body,
                {
                    "phase": Phase.SUSPENDED,
                    "reason": "Suspended",
                    "message": "suspended by spec",
                    "queue_position": None,
                    "estimated_start_at": None,
                },
            )

    if body.phase.active:
        body = _check_timeouts(ctx, name, task, body)
    if body.phase.active:
        _keep_active(ctx, body, task, ours)
    if name in ctx.resubmit and body.phase is Phase.STARTING and body.submission_id:
        ctx.plan.submits.append(Submit(name, _submit_request(ctx, name, task, body)))
    if body.phase in (Phase.QUEUED, Phase.UNSCHEDULABLE):
        body = _enqueue(ctx, name, task, body)
    elif job is not None and body.phase.finished and body.ray_status != job.status:
        body = _set(body, {"ray_status": job.status})  # e.g. STOPPED after a timeout
    ctx.bodies[name] = body


def _first_sight(
    ctx: _Ctx, name: str, task: Task, spec_hash: str, task_jobs: Sequence[RayJob]
) -> TaskStatusBody:
    """A task with no sidecar: adopt its live job if Ray has one, else queue it."""
    live = [j for j in task_jobs if not j.terminal and j.metadata.get(META_SPEC_HASH) == spec_hash]
    if live:
        job = max(live, key=lambda j: j.start_time or 0)
        run = int(job.metadata.get(META_RUN, "1") or 1)
        ctx.plan.events.append(
            f"adopted {name}: Ray job {job.submission_id} (status file was missing)"
        )
        return TaskStatusBody(
            phase=Phase.RUNNING if job.status == RUNNING else Phase.STARTING,
            reason="Adopted",
            message=f"adopted Ray job {job.submission_id}",
            uid=job.metadata.get(META_UID),
            run=run,
            submission_id=job.submission_id,
            spec_hash=spec_hash,
            ray_status=job.status,
            queued_at=_ts(job.start_time or ctx.now),
            submitted_at=_ts(job.start_time or ctx.now),
            started_at=_ts(job.start_time) if job.status == RUNNING and job.start_time else None,
        )
    first = _ts(ctx.now)
    return TaskStatusBody(
        phase=Phase.QUEUED,
        reason="Queued",
        message="queued",
        uid=make_uid(ctx.options.queue_id, name, first),
        run=0,
        spec_hash=spec_hash,
        queued_at=first,
    )


def _new_run(
    body: TaskStatusBody,
    spec_hash: str,
    now: float,
    reason: str,
    message: str,
    *,
    keep_queued_at: bool = False,
) -> TaskStatusBody:
    return _set(
        body,
        {
            "phase": Phase.QUEUED,
            "reason": reason,
            "message": message,
            "submission_id": None,
            "spec_hash": spec_hash,
            "ray_status": None,
            "queued_at": body.queued_at if keep_queued_at else _ts(now),
            "submitted_at": None,
            "started_at": None,
            "finished_at": None,
            "log_tail": None,
            "queue_position": None,
            "estimated_start_at": None,
        },
    )


_VERB = {Phase.TIMED_OUT: "timed out", Phase.SUSPENDED: "suspended", Phase.FAILED: "failed"}


def _end_run(
    ctx: _Ctx, name: str, body: TaskStatusBody, phase: Phase, reason: str, message: str
) -> TaskStatusBody:
    """Record the end first; the stray-job sweep then stops the job until Ray says it ended."""
    ctx.plan.events.append(f"{_VERB.get(phase, phase.value.lower())} {name}: {message}")
    return _set(
        body,
        {
            "phase": phase,
            "reason": reason,
            "message": message,
            "finished_at": _ts(ctx.now),
            "queue_position": None,
            "estimated_start_at": None,
        },
    )


def _observe_run(
    ctx: _Ctx, name: str, task: Task, body: TaskStatusBody, job: RayJob | None
) -> TaskStatusBody:
    now, sid = ctx.now, body.submission_id or ""
    # The id is held by a job that is not this run's: another queue's, a foreign one (never
    # adopted), or an earlier incarnation of a re-created task.
    if job is not None and (
        job.metadata.get(META_QUEUE) != ctx.options.queue_id
        or job.metadata.get(META_UID) not in (None, body.uid)
    ):
        return _set(
            body,
            {
                "phase": Phase.FAILED,
                "reason": "SubmissionIdConflict",
                "message": f"Ray already has a job {sid} that is not this task's; "
                "choose another spec.submissionId",
                "finished_at": _ts(now),
                "ray_status": None,
            },
        )
    if job is None:
        if body.phase is Phase.STARTING:
            # Recorded but not in Ray: we stopped between the status write and submit_job,
            # or the submit failed. The id is free, so submitting it again is safe; the caller
            # does it unless the spec changed meanwhile (a superseded run is never sent).
            ctx.resubmit.add(name)
            return body
        missing_since = _epoch(body.finished_at) if body.reason == "JobMissing" else None
        if missing_since is None:
            return _set(
                body,
                {
                    "reason": "JobMissing",
                    "message": f"Ray no longer lists job {sid}; waiting "
                    f"{ctx.options.lost_grace_seconds:g}s before declaring it lost",
                    "finished_at": _ts(now),
                },
            )
        if now - missing_since < ctx.options.lost_grace_seconds:
            return body
        if body.lost_restarts < task.spec.max_lost_restarts:
            ctx.plan.events.append(f"lost {name}: job {sid} vanished; queued again")
            lost = _new_run(
                body,
                body.spec_hash or task.spec_hash(),
                now,
                "Requeued",
                f"job {sid} vanished from Ray (head restart?); queued again",
                keep_queued_at=True,
            )
            return _set(lost, {"lost_restarts": body.lost_restarts + 1})
        ctx.plan.events.append(f"lost {name}: job {sid} vanished")
        return _set(
            body,
            {
                "phase": Phase.LOST,
                "reason": "JobLost",
                "message": f"job {sid} vanished from Ray and restarts are used up",
                "finished_at": _ts(now),
            },
        )

    update: dict[str, object] = {"ray_status": job.status}
    if job.status == PENDING:
        update |= {
            "phase": Phase.STARTING,
            "reason": "Pending",
            "message": f"Ray job {sid} is pending",
        }
    elif job.status == RUNNING:
        update |= {
            "phase": Phase.RUNNING,
            "reason": "Running",
            "message": f"Ray job {sid} is running",
            "finished_at": None,
            "started_at": body.started_at or _ts(now),
        }
    else:
        update |= _outcome(job)
        update["started_at"] = body.started_at or (_ts(job.start_time) if job.start_time else None)
        if update["phase"] is Phase.FAILED:
            ctx.plan.fetch_logs.append(name)
        ctx.plan.events.append(f"{str(update['phase']).lower()} {name} (job {sid})")
    return _set(body, update)


def _outcome(job: RayJob) -> dict[str, object]:
    """The status fields of a run that ended in Ray."""
    update: dict[str, object] = {
        "ray_status": job.status,
        "finished_at": _ts(job.end_time) if job.end_time else None,
    }
    if job.status == SUCCEEDED:
        update |= {"phase": Phase.SUCCEEDED, "reason": "Succeeded", "message": "job succeeded"}
    elif job.status == STOPPED:
        update |= {
            "phase": Phase.STOPPED,
            "reason": "StoppedInRay",
            "message": "the job was stopped outside rayqueue",
        }
    else:
        update |= {
            "phase": Phase.FAILED,
            "reason": "JobFailed",
            "message": job.message or "job failed",
        }
    return update


def _check_timeouts(ctx: _Ctx, name: str, task: Task, body: TaskStatusBody) -> TaskStatusBody:
    now = ctx.now
    timeout = task.spec.timeout_seconds
    started = _epoch(body.started_at)
    if (
        body.phase is Phase.RUNNING
        and timeout > 0
        and started is not None
        and now - started > timeout
    ):
        return _end_run(
            ctx,
            name,
            body,
            Phase.TIMED_OUT,
            "TimeoutExceeded",
            f"ran longer than timeoutSeconds={timeout:g}; stopped",
        )
    submitted = _epoch(body.submitted_at)
    if (
        body.phase is Phase.STARTING
        and body.ray_status == PENDING
        and submitted is not None
        and now - submitted > ctx.options.start_timeout_seconds
    ):
        return _end_run(
            ctx,
            name,
            body,
            Phase.FAILED,
            "StartTimeout",
            f"pending in Ray for over {ctx.options.start_timeout_seconds:g}s; stopped",
        )
    return body


def _keep_active(
    ctx: _Ctx, body: TaskStatusBody, task: Task | None, ours: Mapping[str, RayJob]
) -> None:
    sid = body.submission_id
    if sid is None:
        return
    ctx.kept_jobs.add(sid)
    job = ours.get(sid)
    if task is not None:
        req = request_of(task)
    elif job is not None:
        req = _claim_from_metadata(job)
    else:
        req = Capacity()
    ctx.used = ctx.used + req
    timeout = task.spec.timeout_seconds if task is not None else 0
    started = _epoch(body.started_at) or _epoch(body.submitted_at) or ctx.now
    ctx.claims.append(policies.Claim(req, started + timeout if timeout > 0 else None))


def _stop_strays(ctx: _Ctx, ours: Mapping[str, RayJob], specs: Mapping[str, TaskInput]) -> None:
    """Stop every live job of ours that no active run owns: ended runs, old runs, deleted tasks."""
    deletions: list[RayJob] = []
    for sid in sorted(ours):
        job = ours[sid]
        if job.terminal or sid in ctx.kept_jobs:
            continue
        ctx.used = ctx.used + _claim_from_metadata(job)  # still holds resources until it ends
        task = job.metadata.get(META_TASK, "")
        if task in specs:
            ctx.plan.stops.append(Stop(sid, task, "run ended"))
        else:
            deletions.append(job)
    if deletions and ctx.folder_empty and not ctx.options.allow_mass_delete:
        # Argo CD's allowEmpty: a folder with no spec and no sidecar left is far more often an
        # unmounted volume or a botched checkout than a wish to stop everything.
        ctx.plan.held_deletions = len(deletions)
        ctx.plan.events.append(
            f"REFUSING to stop {len(deletions)} jobs: the tasks folder holds no specs and no "
            "status files (unmounted?); restore it, or restart with --allow-mass-delete"
        )
        return
    limit = ctx.options.max_stops_per_pass
    if deletions and limit and len(deletions) > limit and not ctx.options.allow_mass_delete:
        ctx.plan.held_deletions = len(deletions)
        ctx.plan.events.append(
            f"REFUSING to stop {len(deletions)} jobs whose specs disappeared in one pass "
            f"(limit {limit}); restore the specs, or restart with --allow-mass-delete"
        )
        return
    for job in deletions:
        ctx.plan.stops.append(Stop(job.submission_id, job.metadata.get(META_TASK), "spec deleted"))


def _expire_history(
    ctx: _Ctx, ours: Mapping[str, RayJob], statuses: Mapping[str, TaskStatus]
) -> None:
    """Ray lists every job it ever ran, so each pass grows with history. A finished job of ours
    may go once the retention time has passed and no sidecar on disk still waits for its
    outcome (a run whose status file says it is active has not recorded its end yet)."""
    retention = ctx.options.history_retention_seconds
    if retention is None:
        return
    awaited = {
        s.status.submission_id
        for s in statuses.values()
        if s.status.submission_id and s.status.phase.active
    }
    expired = sorted(
        (job.end_time, sid)
        for sid, job in ours.items()
        if job.terminal
        and job.end_time is not None
        and ctx.now - job.end_time > retention
        and sid not in awaited
    )
    ctx.plan.deletes = [sid for _, sid in expired[: ctx.options.max_deletes_per_pass]]


def _orphan_sidecars(
    ctx: _Ctx,
    specs: Mapping[str, TaskInput],
    statuses: Mapping[str, TaskStatus],
    ours: Mapping[str, RayJob],
) -> None:
    """A sidecar without a spec goes once its job has ended, so the run's id is never lost."""
    stopping = {s.submission_id for s in ctx.plan.stops}
    for name, status in statuses.items():
        if name in specs:
            continue
        sid = status.status.submission_id
        job = ours.get(sid) if sid else None
        if not ctx.obs.available or (job is not None and not job.terminal) or sid in stopping:
            continue
        if ctx.plan.held_deletions:
            continue
        ctx.plan.delete_statuses.append(name)


def _enqueue(ctx: _Ctx, name: str, task: Task, body: TaskStatusBody) -> TaskStatusBody:
    req = request_of(task)
    capacity = ctx.obs.capacity
    assert capacity is not None
    too_big = _unschedulable(req, capacity)
    if too_big is not None:
        return _set(
            body,
            {
                "phase": Phase.UNSCHEDULABLE,
                "reason": "ExceedsCluster",
                "message": too_big,
                "queue_position": None,
                "estimated_start_at": None,
            },
        )
    key = (-task.spec.priority, _epoch(body.queued_at) or ctx.now, name)
    ctx.queue.append((key, policies.Candidate(name, req, task.spec.timeout_seconds)))
    ctx.tasks[name] = task
    return _set(body, {"phase": Phase.QUEUED})


def _submit_request(ctx: _Ctx, name: str, task: Task, body: TaskStatusBody) -> SubmitRequest:
    req = request_of(task)
    return SubmitRequest(
        submission_id=body.submission_id or "",
        entrypoint=task.spec.entrypoint,
        runtime_env=task.spec.runtime_env,
        metadata={
            META_QUEUE: ctx.options.queue_id,
            META_TASK: name,
            META_UID: body.uid or "",
            META_RUN: str(body.run),
            META_SPEC_HASH: body.spec_hash or "",
            META_CPU: f"{req.cpu:g}",
            META_GPU: f"{req.gpu:g}",
            META_MEMORY: f"{req.memory:.0f}",
        },
    )


def _admit(ctx: _Ctx) -> None:
    capacity = ctx.obs.capacity
    assert capacity is not None
    ctx.queue.sort(key=lambda item: item[0])
    queue = [candidate for _, candidate in ctx.queue]
    used = ctx.used
    if ctx.options.count_foreign_jobs and ctx.obs.jobs is not None:
        for job in ctx.obs.jobs.values():
            if not job.terminal and job.metadata.get(META_QUEUE) != ctx.options.queue_id:
                used = used + _foreign_claim(job)
    free = capacity - used
    starting = sum(1 for b in ctx.bodies.values() if b.phase is Phase.STARTING)
    slots = max(ctx.options.max_inflight - starting, 0)
    policy = policies.POLICIES[ctx.options.policy]
    admission = policy(queue, free, ctx.claims, ctx.now, slots)
    started = set(admission.start)
    position = 0
    for candidate in queue:
        name = candidate.name
        body = ctx.bodies[name]
        if name in started:
            run = body.run + 1
            uid = body.uid or make_uid(ctx.options.queue_id, name, _ts(ctx.now))
            task = ctx.tasks[name]
            sid = submission_id_for(name, uid, run, task.spec.submission_id)
            body = _set(
                body,
                {
                    "phase": Phase.STARTING,
                    "reason": "Submitted",
                    "uid": uid,
                    "message": f"submitting Ray job {sid}",
                    "run": run,
                    "submission_id": sid,
                    "submitted_at": _ts(ctx.now),
                    "queue_position": None,
                    "estimated_start_at": None,
                    "ray_status": None,
                },
            )
            ctx.bodies[name] = body
            ctx.used = ctx.used + candidate.request
            ctx.plan.submits.append(Submit(name, _submit_request(ctx, name, task, body)))
            ctx.plan.events.append(
                f"submitted {name} (priority {task.spec.priority}, "
                f"{_resources_text(candidate.request)}) as {sid}"
            )
        else:
            waiting = admission.waiting.get(name)
            position += 1
            ctx.bodies[name] = _set(
                body,
                {
                    "phase": Phase.QUEUED,
                    "queue_position": position,
                    "reason": waiting.reason if waiting else "Queued",
                    "message": waiting.message if waiting else "queued",
                    "estimated_start_at": _ts(waiting.estimated_start)
                    if waiting and waiting.estimated_start
                    else None,
                },
            )


def submit_failed(status: TaskStatus, message: str, now: datetime) -> TaskStatus:
    """Ray refused the submission for good (bad runtime_env, ...): the run failed, not retried."""
    body = _set(
        status.status,
        {
            "phase": Phase.FAILED,
            "reason": "SubmitFailed",
            "message": f"Ray refused the job: {message}",
            "finished_at": now,
        },
    )
    return status.model_copy(update={"status": body})
