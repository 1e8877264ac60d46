"""The pure planner: specs + statuses + what Ray reports + capacity + now -> actions and statuses.

No I/O, no clock, no randomness. Everything the loop does is decided here, so it can be tested
table-driven and driven by the simulator. The shell (loop.py) writes the returned statuses
*before* it submits, which is what makes submission ids safe across crashes. Which phase follows
which is not decided here but in `reconciler.core.lifecycle`: this module says *when* a
trigger fires.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from reconciler.core import (
    dependencies,
    fairshare,
    idclaims,
    lifecycle,
    policies,
    preemption,
    queueing,
    retries,
    victims,
)
from reconciler.core.lifecycle import set_fields
from specs.cluster import (
    META_CPU,
    META_GPU,
    META_MEMORY,
    META_QUEUE,
    META_REVISION,
    META_RUN,
    META_SPEC_HASH,
    META_TASK,
    META_UID,
    PENDING,
    RUNNING,
    Capacity,
    RayJob,
    SubmitRequest,
)
from specs.models import (
    Condition,
    Metadata,
    Phase,
    Reason,
    SourceRef,
    Task,
    TaskStatus,
    TaskStatusBody,
)
from specs.policy import STOP_WAIT_ENV as STOP_WAIT_ENV  # tests read it here
from specs.quantity import human_memory
from specs.queues import QueueConfig

COND_SPEC_INVALID = "SpecInvalid"
COND_CLUSTER_UNAVAILABLE = "ClusterUnavailable"
COND_PREEMPTED = "Preempted"
CONDITION_ORDER = (COND_SPEC_INVALID, COND_CLUSTER_UNAVAILABLE, COND_PREEMPTED)


@dataclass(frozen=True)
class TaskInput:
    """One spec file as the store read it."""

    name: str
    task: Task | None
    error: str | None = None
    last_valid: Task | None = None  # keeps a running job going while its file is broken
    spec_hash: str | None = None  # of `task`, computed once per parse by the shell
    source: SourceRef | None = None  # the git commit the file came from, if in a work tree

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


from specs.settings import PlanOptions  # noqa: E402  (declared once, beside Settings)


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
class TimeOut:
    """A run ended by a time limit this pass; its job is among the stops."""

    task: str
    submission_id: str
    reason: Reason  # TimeoutExceeded (spec.timeoutSeconds) or StartTimeout (pending too long)
    message: str


@dataclass(frozen=True)
class Preemption:
    """Running tasks stopped this pass so that `preemptor` can start; their jobs are among the
    stops, and their statuses (queued again, Preempted) are written before the stops go out."""

    preemptor: str
    victims: tuple[str, ...]
    reason: Reason  # Reclaim if any victim's queue lent to it, else WithinQueue
    message: str
    free: Capacity  # what the preemptor had without them: it did not fit, with them it does
    reasons: tuple[Reason, ...] = ()  # by victim: its Preempted condition's reason
    queue: str | None = None  # the preemptor's team queue, when queues are configured


@dataclass(frozen=True)
class HeldDeletions:
    """Jobs whose specs vanished, left running because the vanishing looks like an accident."""

    count: int
    reason: Reason
    message: str


@dataclass(frozen=True)
class Event:
    """One decision, for the log."""

    level: int  # a logging level: INFO, or WARNING for what needs a human
    reason: Reason
    message: str


@dataclass(frozen=True)
class Summary:
    capacity: Capacity | None
    used: Capacity
    queued: int
    starting: int
    running: int
    queues: queueing.QueueAdmission | None = None  # per-queue state, when queues are configured


@dataclass(frozen=True)
class Plan:
    """One pass's decisions. Frozen: what the shell does with it may be derived from it as a
    new value (the loop adds log tails and refused submits that way), never written into it."""

    statuses: Mapping[str, TaskStatus] = field(default_factory=dict)
    submits: Sequence[Submit] = field(default_factory=list)
    stops: Sequence[Stop] = field(default_factory=list)
    timeouts: Sequence[TimeOut] = field(default_factory=list)
    preemptions: Sequence[Preemption] = field(default_factory=list)
    delete_statuses: Sequence[str] = field(default_factory=list)
    fetch_logs: Sequence[str] = field(
        default_factory=list
    )  # tasks whose failed run needs a logTail
    deletes: Sequence[str] = field(default_factory=list)  # finished jobs to drop from Ray's history
    events: Sequence[Event] = field(default_factory=list)
    held_deletions: HeldDeletions | None = None
    summary: Summary | None = None
    # The plan's next deadline: the last instant at which the same inputs still give this
    # same plan (a timeout, a backoff, a grace period, a reserved start: every rule that reads
    # the clock narrows it); None: no rule does. The loop wakes just after it (RequeueAfter).
    deadline: float | None = None
    # No action, no event, every status the very object handed in: the loop then skips
    # passes until something it reads changes, or the deadline passes.
    still: bool = False

    @property
    def still_until(self) -> float | None:
        """For a plan that changes nothing: up to when it stays so (inf: for ever); else None."""
        if not self.still:
            return None
        return math.inf if self.deadline is None else self.deadline


@dataclass
class _Draft:
    """The plan while a pass builds it; `finish` freezes it into a Plan."""

    statuses: dict[str, TaskStatus] = field(default_factory=dict)
    submits: list[Submit] = field(default_factory=list)
    stops: list[Stop] = field(default_factory=list)
    timeouts: list[TimeOut] = field(default_factory=list)
    preemptions: list[Preemption] = field(default_factory=list)
    delete_statuses: list[str] = field(default_factory=list)
    fetch_logs: list[str] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    held_deletions: HeldDeletions | None = None

    def note(self, reason: Reason, message: str, level: int = logging.INFO) -> None:
        self.events.append(Event(level, reason, message))


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


@dataclass(frozen=True)
class TaskEnv:
    """What every task's own reconcile reads besides its spec and status: the same for all
    tasks of a pass."""

    options: PlanOptions
    obs: Observation
    ours: Mapping[str, RayJob]  # our jobs by submission id
    by_task: Mapping[str, Sequence[RayJob]]  # our jobs by task name
    # each queue's preemption rules; a task's job gets its queue's grace period
    preemption: preemption.Setup


@dataclass
class _Ctx:
    options: PlanOptions
    obs: Observation
    now: float
    plan: _Draft
    env: TaskEnv
    # our non-terminal jobs that belong to an active run; everything else of ours gets stopped
    kept_jobs: set[str] = field(default_factory=set)
    claims: list[policies.Claim] = field(default_factory=list)
    used: Capacity = field(default_factory=Capacity)
    queue: list[tuple[tuple[int, float, str], policies.Candidate]] = field(default_factory=list)
    bodies: dict[str, TaskStatusBody] = field(default_factory=dict)
    tasks: dict[str, Task] = field(default_factory=dict)  # the queued ones, for admission
    sources: dict[str, SourceRef] = field(default_factory=dict)  # of the specs read, for runs
    conds: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)
    running: list[victims.Running] = field(default_factory=list)  # possible victims
    jobs_by_task: Mapping[str, Sequence[RayJob]] = field(default_factory=dict)
    folder_empty: bool = False  # no spec and no sidecar at all: unmounted, or wiped
    queues: QueueConfig | None = None  # team queues with quotas; None: one queue, as before
    held: dict[str, Capacity] = field(default_factory=dict)  # by task: jobs holding resources
    queue_admission: queueing.QueueAdmission | None = None
    gated: bool = False  # some queued task has dependencies or sits in a cycle
    until: float = math.inf  # the latest `now` at which each time-dependent answer still holds

    @property
    def stamp(self) -> datetime:
        return _ts(self.now)


def plan(
    specs: Mapping[str, TaskInput],
    statuses: Mapping[str, TaskStatus],
    observed: Observation,
    now: datetime,
    options: PlanOptions = PlanOptions(),
    *,
    queues: QueueConfig | None = None,
) -> Plan:
    """Decide one reconcile pass. Pure: same inputs, same plan. With `queues`, each team
    folder is its own queue with a quota, and the queues share the cluster fairly."""
    ctx = begin(specs, statuses, observed, now, options, queues)
    env = ctx.env
    specs = with_id_claims(specs, statuses, env)
    for name in sorted(specs):
        merge(ctx, name, reconcile_task(env, specs[name], statuses.get(name), ctx.now))
    return finish(ctx, specs, statuses)


def task_env(
    observed: Observation, options: PlanOptions, queues: QueueConfig | None = None
) -> TaskEnv:
    jobs = observed.jobs or {}
    ours = {
        sid: job for sid, job in jobs.items() if job.metadata.get(META_QUEUE) == options.queue_id
    }
    by_task: dict[str, list[RayJob]] = {}
    for job in ours.values():
        by_task.setdefault(job.metadata.get(META_TASK, ""), []).append(job)
    return TaskEnv(options, observed, ours, by_task, preemption.setup(queues, options))


def with_id_claims(
    specs: Mapping[str, TaskInput], statuses: Mapping[str, TaskStatus], env: TaskEnv
) -> Mapping[str, TaskInput]:
    """`specs`, with each spec whose explicit submission id another task has (or also claims)
    turned Invalid (reconciler.core.idclaims). Its last valid spec is the spec itself, so a run it
    already has goes on; it is never submitted again while the claim stands."""
    claimed = (
        (name, spec.task.spec.submission_id)
        for name, spec in specs.items()
        if spec.task is not None and spec.task.spec.submission_id
    )
    found = idclaims.conflicts(claimed, statuses, env.ours)
    if not found:
        return specs
    result = dict(specs)
    for name, message in found.items():
        spec = specs[name]
        result[name] = TaskInput(name, None, message, spec.task, None, spec.source)
    return result


def begin(
    specs: Mapping[str, TaskInput],
    statuses: Mapping[str, TaskStatus],
    observed: Observation,
    now: datetime,
    options: PlanOptions,
    queues: QueueConfig | None,
) -> _Ctx:
    """A pass's shared state, before any task is merged into it."""
    env = task_env(observed, options, queues)
    ctx = _Ctx(options, observed, now.timestamp(), _Draft(), env, queues=queues)
    ctx.folder_empty = not specs and not statuses
    ctx.sources = {name: s.source for name, s in specs.items() if s.source is not None}
    ctx.jobs_by_task = env.by_task
    return ctx


def merge(ctx: _Ctx, name: str, result: TaskResult) -> None:
    """Add one task's result to the pass; tasks are merged in name order, as plan() reconciles
    them, so sums and lists come out the same."""
    ctx.bodies[name] = result.body
    if result.conds:
        ctx.conds[name] = dict(result.conds)  # a copy: preemption adds to it
    if result.events:
        ctx.plan.events.extend(result.events)
    if result.submits:
        ctx.plan.submits.extend(result.submits)
    if result.timeouts:
        ctx.plan.timeouts.extend(result.timeouts)
    if result.fetch_log:
        ctx.plan.fetch_logs.append(name)
    held = result.held
    if held is not None:
        ctx.kept_jobs.add(held.submission_id)
        ctx.used = ctx.used + held.request
        ctx.held[name] = ctx.held.get(name, Capacity()) + held.request
        ctx.claims.append(held.claim)
    waiter = result.waiter
    if waiter is not None:
        ctx.queue.append((waiter.key, waiter.candidate))
        ctx.tasks[name] = waiter.task
        ctx.gated = ctx.gated or waiter.gated
    if result.running is not None:
        ctx.running.append(result.running)
    ctx.until = min(ctx.until, result.valid_until)


def finish(ctx: _Ctx, specs: Mapping[str, TaskInput], statuses: Mapping[str, TaskStatus]) -> Plan:
    """What needs every task at once: strays, dependencies, admission, clean-up, statuses."""
    ours = ctx.env.ours
    if ctx.obs.available:
        _stop_strays(ctx, ours, specs)
        _gate_dependencies(ctx, specs)
        _admit(ctx)
        _expire_history(ctx, ours, statuses)
    _orphan_sidecars(ctx, specs, statuses, ours)
    _collect_statuses(ctx, statuses)
    draft = ctx.plan
    # Each task's own reconcile narrowed `ctx.until` to where its answers hold (timeouts,
    # backoffs, grace periods); the pass-wide rules add theirs (`_admit`, `_expire_history`).
    # Admission itself only gets stricter as time passes (a backfill candidate's end,
    # now + timeoutSeconds, moves later against a fixed reserved start), so a pass that
    # admitted nobody admits nobody later with the same inputs. Only forward in time: a clock
    # set back plans afresh.
    until = max(ctx.until, ctx.now)
    # The draft's own containers, typed read-only in the Plan: the draft ends here.
    return Plan(
        statuses=draft.statuses,
        submits=draft.submits,
        stops=draft.stops,
        timeouts=draft.timeouts,
        preemptions=draft.preemptions,
        delete_statuses=draft.delete_statuses,
        fetch_logs=draft.fetch_logs,
        deletes=draft.deletes,
        events=draft.events,
        held_deletions=draft.held_deletions,
        summary=_summary(ctx),
        deadline=None if math.isinf(until) else until,
        still=_changes_nothing(ctx, statuses),
    )


_EARLY = 1e-6  # seconds: a pass-wide edge is placed this much early, safe against float rounding


def _changes_nothing(ctx: _Ctx, statuses: Mapping[str, TaskStatus]) -> bool:
    """Whether the plan asks for nothing and hands back every status as it was given."""
    plan = ctx.plan
    return not (
        not ctx.obs.available
        or plan.submits
        or plan.stops
        or plan.timeouts
        or plan.preemptions
        or plan.delete_statuses
        or plan.fetch_logs
        or plan.deletes
        or plan.events
        or plan.held_deletions is not None
        or len(plan.statuses) != len(statuses)
        or any(statuses.get(name) is not status for name, status in plan.statuses.items())
    )


def _collect_statuses(ctx: _Ctx, statuses: Mapping[str, TaskStatus]) -> None:
    for name, body in ctx.bodies.items():
        prev = statuses.get(name)
        wanted = ctx.conds.get(name, {})
        if body.preempted_by is not None and COND_PREEMPTED not in wanted:
            wanted = {**wanted, COND_PREEMPTED: _preempted_condition(body)}
        if wanted or body.conditions:
            old = prev.status.conditions if prev else []
            body = set_fields(body, {"conditions": _conditions(old, wanted, ctx.now)})
        if ctx.queues is not None or body.queue is not None:
            queue = ctx.queues.queue_of(name) if ctx.queues is not None else None
            body = set_fields(body, {"queue": queue})
        if prev is not None and prev.status is body:
            ctx.plan.statuses[name] = prev  # unchanged: same object, nothing to write
        else:
            ctx.plan.statuses[name] = TaskStatus(metadata=Metadata(name=name), status=body)


def _preempted_condition(body: TaskStatusBody) -> tuple[str, str]:
    """The condition as the preempting pass wrote it; it holds until the next run starts."""
    for cond in body.conditions:
        if cond.type == COND_PREEMPTED:
            return cond.reason, cond.message
    return Reason.WITHIN_QUEUE, f"preempted by {body.preempted_by}"


def _summary(ctx: _Ctx) -> Summary:
    phases = [s.status.phase for s in ctx.plan.statuses.values()]
    return Summary(
        capacity=ctx.obs.capacity,
        used=ctx.used,
        queued=phases.count(Phase.QUEUED),
        starting=phases.count(Phase.STARTING),
        running=phases.count(Phase.RUNNING),
        queues=ctx.queue_admission,
    )


@dataclass(frozen=True)
class Held:
    """An active run's hold on the cluster: its job is kept, its request counts as used."""

    submission_id: str
    request: Capacity
    claim: policies.Claim


@dataclass(frozen=True)
class Waiter:
    """A task waiting for admission: its place in the queue's order, and what it asks for."""

    key: tuple[int, float, str]  # (-priority, queuedAt, name)
    candidate: policies.Candidate
    task: Task
    gated: bool  # has dependencies, or is held in a dependency cycle


@dataclass(frozen=True)
class TaskResult:
    """One task's own part of a pass: decided from its spec, its status, its run's job, the
    pass-wide TaskEnv and `now` alone, before dependencies and admission look at all tasks.

    `valid_from`..`valid_until` (inclusive) is the span of `now` over which the same inputs
    give this very result: every time-dependent rule the reconcile ran narrowed it."""

    body: TaskStatusBody
    conds: tuple[tuple[str, tuple[str, str]], ...] = ()
    events: tuple[Event, ...] = ()
    submits: tuple[Submit, ...] = ()
    timeouts: tuple[TimeOut, ...] = ()
    fetch_log: bool = False
    held: Held | None = None
    waiter: Waiter | None = None
    running: victims.Running | None = None
    valid_from: float = -math.inf
    valid_until: float = math.inf

    def valid_at(self, now: float) -> bool:
        return self.valid_from <= now <= self.valid_until


class _Step:
    """One task's reconcile in progress. Reading `now` or `stamp` pins the result to this
    instant; the threshold helpers (`elapsed`, `due`) only narrow its window of validity, so
    a result that merely compared the clock with a deadline stays valid until that deadline."""

    def __init__(self, env: TaskEnv, name: str, now: float) -> None:
        self.env = env
        self.options = env.options
        self.obs = env.obs
        self.name = name
        self._now = now
        self.valid_from = -math.inf
        self.valid_until = math.inf
        self.conds: dict[str, tuple[str, str]] = {}
        self.events: list[Event] = []
        self.submits: list[Submit] = []
        self.timeouts: list[TimeOut] = []
        self.fetch_log = False
        self.resubmit = False  # a Starting run Ray has never heard of
        self.held: Held | None = None
        self.waiter: Waiter | None = None
        self.body: TaskStatusBody | None = None

    @property
    def now(self) -> float:
        self.valid_from = self.valid_until = self._now
        return self._now

    @property
    def stamp(self) -> datetime:
        return _ts(self.now)

    def note(self, reason: Reason, message: str, level: int = logging.INFO) -> None:
        self.events.append(Event(level, reason, message))

    def elapsed(self, since: float, limit: float, *, strictly: bool = True) -> bool:
        """`now - since > limit` (`>=` unless strictly), exactly as float arithmetic has it.
        The test is monotone in `now`, so the answer holds up to (or from) its boundary."""

        def test(at: float) -> bool:
            gone = at - since
            return gone > limit if strictly else gone >= limit

        return self._threshold(test, since + limit)

    def due(self, at: float | None) -> bool:
        """A retry's backoff is over (retries.is_due)."""
        if at is None:
            return True
        return self._threshold(lambda now: retries.is_due(at, now), at)

    def _threshold(self, test: Callable[[float], bool], boundary: float) -> bool:
        now, answer = self._now, test(self._now)
        edge = boundary
        for _ in range(8):  # rounding moves the boundary by an ulp or two at most
            if test(edge) == answer:
                break
            edge = math.nextafter(edge, -math.inf if not answer else math.inf)
        else:
            edge = now  # could not place it: valid for this instant only
        if answer:
            self.valid_from = max(self.valid_from, min(edge, now))
        else:
            self.valid_until = min(self.valid_until, max(edge, now))
        return answer

    def result(self, running: victims.Running | None) -> TaskResult:
        assert self.body is not None
        return TaskResult(
            self.body,
            tuple(self.conds.items()),
            tuple(self.events),
            tuple(self.submits),
            tuple(self.timeouts),
            self.fetch_log,
            self.held,
            self.waiter,
            running,
            self.valid_from,
            self.valid_until,
        )


def reconcile_task(
    env: TaskEnv, spec: TaskInput, prev: TaskStatus | None, now: float
) -> TaskResult:
    """One task's own part of a pass (see TaskResult). Pure."""
    t = _Step(env, spec.name, now)
    _reconcile_task(t, spec, prev)
    settled, task = t.body, spec.task
    if (
        settled is not None
        and settled.phase is Phase.RUNNING
        and task is not None
        and settled.started_at
    ):
        # A run under a broken spec is never a victim: it could not be queued again.
        return t.result(
            victims.Running(
                spec.name,
                task.spec.priority,
                request_of(task),
                settled.started_at.timestamp(),
                task.spec.preemptible,
                settled.preemptions,
            )
        )
    return t.result(None)


def _reconcile_task(t: _Step, spec: TaskInput, prev: TaskStatus | None) -> None:
    name, ours = spec.name, t.env.ours
    body = prev.status if prev is not None else None
    if not t.obs.available:
        t.conds[COND_CLUSTER_UNAVAILABLE] = (
            Reason.RAY_UNREACHABLE,
            f"Ray could not be asked: {t.obs.error or 'unavailable'}; nothing is stopped",
        )
    task = _usable_task(t, spec, body)
    if task is None:
        return
    spec_hash = spec.hash_of(task)
    if body is None:
        body = _first_sight(t, name, task, spec_hash, t.env.by_task.get(name, ()))
    job = _job_of(t, body, ours)

    if not t.obs.available:
        # Without Ray we can only keep what we had; never act, never re-derive phases.
        if body.phase.active:
            _keep_active(t, body, task)
        t.body = set_fields(body, {"spec_hash": body.spec_hash or spec_hash})
        return

    if body.phase.active:
        body = _observe_run(t, name, task, body, job)
    body = _follow_spec(t, name, task, body, job, spec_hash, edited=spec.task is not None)
    _settle(t, name, task, body, job)


def _usable_task(t: _Step, spec: TaskInput, body: TaskStatusBody | None) -> Task | None:
    """The spec to plan with; None when the task is settled already (its file is broken)."""
    if spec.task is not None:
        return spec.task
    message = spec.error or "invalid spec"
    if body is None or not body.phase.active:
        t.body = lifecycle.invalidate(body, message)
        return None
    # A broken file never stops a healthy job: it runs on under the last valid spec.
    t.conds[COND_SPEC_INVALID] = (Reason.SPEC_INVALID, f"{message}; the job keeps running")
    if spec.last_valid is None:  # nothing remembered (we restarted): leave it untouched
        _keep_active(t, body, None)
        t.body = body
    return spec.last_valid


def _job_of(t: _Step, body: TaskStatusBody, ours: Mapping[str, RayJob]) -> RayJob | None:
    if not body.submission_id:
        return None
    job = ours.get(body.submission_id)
    if job is None and t.obs.jobs is not None:
        job = t.obs.jobs.get(body.submission_id)  # present but not ours: an id conflict
    return job


def _follow_spec(
    t: _Step,
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
            suspended = lifecycle.suspend(body, body.spec_hash, t.stamp)
            return _ended(t, name, suspended, Reason.SUSPENDED)
        if body.spec_hash != spec_hash and edited:
            t.note(Reason.SPEC_CHANGED, f"spec of {name} changed while running; stopping old run")
            return lifecycle.restart(body, spec_hash, t.stamp)
        return body
    if phase is Phase.SUSPENDED:
        return body if suspend else lifecycle.resume(body, spec_hash, t.stamp)
    if _in_cycle(body) and body.spec_hash == spec_hash:
        # Invalid only through its dependencies: it waits; the dependency gate judges it anew.
        return lifecycle.suspend(body, spec_hash, t.stamp) if suspend else body
    if phase is Phase.INVALID and _outcome_stands(body, job, spec_hash):
        assert job is not None
        return lifecycle.end_run(body, job)
    if phase.finished or phase is Phase.INVALID:
        if body.spec_hash == spec_hash and phase is not Phase.INVALID:
            return body
        if suspend:
            return lifecycle.suspend(body, spec_hash, t.stamp)
        return lifecycle.restart(body, spec_hash, t.stamp)
    if phase in (Phase.QUEUED, Phase.UNSCHEDULABLE):
        if body.spec_hash != spec_hash:
            body = lifecycle.fresh_series(body)  # a fixed spec need not sit out a backoff
        body = set_fields(body, {"spec_hash": spec_hash})
        return lifecycle.suspend(body, spec_hash, t.stamp) if suspend else body
    return body


def _in_cycle(body: TaskStatusBody) -> bool:
    return body.phase is Phase.INVALID and body.reason == Reason.DEPENDENCY_CYCLE


def _outcome_stands(body: TaskStatusBody, job: RayJob | None, spec_hash: str) -> bool:
    """Fixed back to the spec of a run that already ended: its outcome stands."""
    return bool(
        body.spec_hash == spec_hash and job is not None and job.terminal and body.submission_id
    )


def _settle(
    t: _Step,
    name: str,
    task: Task,
    body: TaskStatusBody,
    job: RayJob | None,
) -> None:
    """Time limits, resources held, resubmits and the queue, for the task's final phase."""
    if body.phase.active:
        body = _check_timeouts(t, name, task, body)
    if body.phase.active:
        _keep_active(t, body, task)
    if t.resubmit and body.phase is Phase.STARTING and body.submission_id:
        t.submits.append(Submit(name, _submit_request(t.env, name, task, body)))
    if body.phase in (Phase.QUEUED, Phase.UNSCHEDULABLE) or _in_cycle(body):
        if t.due(_epoch(body.next_retry_at)):
            body = _enqueue(t, name, task, body)
        else:
            body = lifecycle.hold(body, Reason.RETRY_BACKOFF, body.message or "retry backoff")
    elif job is not None and body.phase.finished and body.ray_status != job.status:
        body = set_fields(body, {"ray_status": job.status})  # e.g. STOPPED after a timeout
    t.body = body


def _first_sight(
    t: _Step, name: str, task: Task, spec_hash: str, task_jobs: Sequence[RayJob]
) -> TaskStatusBody:
    """A task with no sidecar: adopt its live job if Ray has one, else queue it."""
    live = [j for j in task_jobs if not j.terminal and j.metadata.get(META_SPEC_HASH) == spec_hash]
    if live:
        job = max(live, key=lambda j: j.start_time or 0)
        t.note(
            Reason.ADOPTED, f"adopted {name}: Ray job {job.submission_id} (status file was missing)"
        )
        return lifecycle.adopted(job, spec_hash, t.stamp)
    uid = make_uid(t.options.queue_id, name, t.stamp)
    return lifecycle.first_queued(uid, spec_hash, t.stamp)


_VERB = {Phase.TIMED_OUT: "timed out", Phase.SUSPENDED: "suspended", Phase.FAILED: "failed"}


def _ended(t: _Step, name: str, body: TaskStatusBody, reason: Reason) -> TaskStatusBody:
    """Log a run we ended; the stray-job sweep then stops its job until Ray says it ended."""
    verb = _VERB.get(body.phase, body.phase.value.lower())
    t.note(reason, f"{verb} {name}: {body.message}")
    return body


def _observe_run(
    t: _Step, name: str, task: Task, body: TaskStatusBody, job: RayJob | None
) -> TaskStatusBody:
    """Follow an active run by what Ray says of its job."""
    if job is not None and not _is_this_run(t, body, job):
        return lifecycle.conflict(body, t.stamp)
    if job is None:
        return _job_missing(t, name, task, body)
    if job.status == PENDING:
        return lifecycle.observe_pending(body, job)
    if job.status == RUNNING:
        # The clock is read only to record a start not recorded yet.
        return lifecycle.observe_running(body, job, body.started_at or t.stamp)
    ended = lifecycle.end_run(body, job)
    if ended.phase is Phase.FAILED:
        t.fetch_log = True
    sid = body.submission_id or ""
    # end_run of an active run always writes a Reason member; the fallback only satisfies types.
    reason = ended.reason if isinstance(ended.reason, Reason) else Reason.JOB_FAILED
    t.note(reason, f"{ended.phase.value.lower()} {name} (job {sid})")
    if ended.phase is Phase.FAILED:
        return _maybe_retry(t, name, task, ended, retries.RunEnd("Failed", job.exit_code))
    return ended


def _policy(task: Task) -> retries.RetryPolicy:
    return retries.policy_for(task.spec.retry, task.spec.max_lost_restarts)


def _retries_used(body: TaskStatusBody) -> int:
    # Sidecars written before `retries` existed counted lost restarts in lostRestarts.
    return max(body.retries, body.lost_restarts)


def _maybe_retry(
    t: _Step, name: str, task: Task, ended: TaskStatusBody, end: retries.RunEnd
) -> TaskStatusBody:
    """A run of this task ended badly (Failed, TimedOut): try it again, or say why not."""
    policy = _policy(task)
    decision = retries.decide(policy, end, _retries_used(ended))
    if decision.retried:
        at = _ts(t.now + decision.delay_seconds)
        message = retries.backoff_message(end, decision.retries, policy.limit,
                                          decision.delay_seconds)  # fmt: skip
        t.note(Reason.RETRY_BACKOFF, f"retrying {name}: {message}")
        spec_hash = ended.spec_hash or task.spec_hash()
        return lifecycle.retry(ended, spec_hash, decision.retries, at, message)
    return _give_up(t, name, ended, end, decision, policy)


def _give_up(
    t: _Step,
    name: str,
    ended: TaskStatusBody,
    end: retries.RunEnd,
    decision: retries.Decision,
    policy: retries.RetryPolicy,
) -> TaskStatusBody:
    if decision.verdict is retries.Verdict.EXHAUSTED:
        message = retries.exhausted_message(end, decision.retries + 1, policy.limit)
        t.note(Reason.BACKOFF_LIMIT_EXCEEDED, f"gave up on {name}: {message}")
        return lifecycle.give_up(ended, Reason.BACKOFF_LIMIT_EXCEEDED, message, t.stamp)
    if decision.verdict is retries.Verdict.NON_RETRYABLE:
        message = retries.non_retryable_message(end)
        return lifecycle.give_up(ended, Reason.NON_RETRYABLE_EXIT_CODE, message, t.stamp)
    return ended


def _is_this_run(t: _Step, body: TaskStatusBody, job: RayJob) -> bool:
    """False if the id is held by another queue's job, a foreign one (never adopted), or an
    earlier incarnation of a re-created task."""
    ours = job.metadata.get(META_QUEUE) == t.options.queue_id
    return ours and job.metadata.get(META_UID) in (None, body.uid)


def _job_missing(t: _Step, name: str, task: Task, body: TaskStatusBody) -> TaskStatusBody:
    """Ray does not list the run's job (any more)."""
    if body.phase is Phase.STARTING:
        # Recorded but not in Ray: we stopped between the status write and submit_job,
        # or the submit failed. The id is free, so submitting it again is safe; the caller
        # does it unless the spec changed meanwhile (a superseded run is never sent).
        t.resubmit = True
        return body
    grace = t.options.lost_grace_seconds
    since = lifecycle.missing_since(body)
    if since is None:
        # The conditions are last pass's: Ray was unreachable then, so the job went with it.
        outage = any(c.type == COND_CLUSTER_UNAVAILABLE for c in body.conditions)
        return lifecycle.note_missing(body, grace, t.stamp, after_outage=outage)
    if not t.elapsed(since.timestamp(), grace, strictly=False):
        return body
    sid = body.submission_id or ""
    outage = body.reason == Reason.JOB_MISSING_AFTER_OUTAGE
    end = retries.RunEnd("Lost", None, retries.Cause.OUTAGE if outage else retries.Cause.RUN)
    policy = _policy(task)
    decision = retries.decide(policy, end, _retries_used(body))
    if decision.retried:
        t.note(Reason.REQUEUED, f"lost {name}: job {sid} vanished; queued again")
        spec_hash = body.spec_hash or task.spec_hash()
        if decision.delay_seconds > 0:
            at = _ts(t.now + decision.delay_seconds)
            message = (
                f"job {sid} vanished from Ray; "
                f"retry {decision.retries} of {policy.limit} in {decision.delay_seconds:g}s"
            )
            return lifecycle.requeue(body, spec_hash, decision.retries, at, message)
        return lifecycle.requeue(body, spec_hash, decision.retries)
    t.note(Reason.JOB_LOST, f"lost {name}: job {sid} vanished")
    if decision.verdict is retries.Verdict.EXHAUSTED and task.spec.retry is not None:
        message = retries.exhausted_message(end, decision.retries + 1, policy.limit)
        return lifecycle.give_up(body, Reason.BACKOFF_LIMIT_EXCEEDED, message, t.stamp)
    return lifecycle.lose(body, t.stamp)


def _check_timeouts(t: _Step, name: str, task: Task, body: TaskStatusBody) -> TaskStatusBody:
    timeout = task.spec.timeout_seconds
    started = _epoch(body.started_at)
    if (
        body.phase is Phase.RUNNING
        and timeout > 0
        and started is not None
        and t.elapsed(started, timeout)
    ):
        timed_out = lifecycle.time_out(body, timeout, t.stamp)
        timed_out = _timed_out(t, name, timed_out, Reason.TIMEOUT_EXCEEDED)
        return _maybe_retry(t, name, task, timed_out, retries.RunEnd("TimedOut"))
    limit = t.options.start_timeout_seconds
    submitted = _epoch(body.submitted_at)
    if (
        body.phase is Phase.STARTING
        and body.ray_status == PENDING
        and submitted is not None
        and t.elapsed(submitted, limit)
    ):
        timed_out = lifecycle.start_timed_out(body, limit, t.stamp)
        timed_out = _timed_out(t, name, timed_out, Reason.START_TIMEOUT)
        return _maybe_retry(t, name, task, timed_out, retries.RunEnd("Failed"))
    return body


def _timed_out(t: _Step, name: str, body: TaskStatusBody, reason: Reason) -> TaskStatusBody:
    t.timeouts.append(TimeOut(name, body.submission_id or "", reason, body.message or ""))
    return _ended(t, name, body, reason)


def _keep_active(t: _Step, body: TaskStatusBody, task: Task | None) -> None:
    sid = body.submission_id
    if sid is None:
        return
    job = t.env.ours.get(sid)
    if task is not None:
        req = request_of(task)
    elif job is not None:
        req = _claim_from_metadata(job)
    else:
        req = Capacity()
    timeout = task.spec.timeout_seconds if task is not None else 0
    started = _epoch(body.started_at) or _epoch(body.submitted_at) or t.now
    t.held = Held(sid, req, policies.Claim(req, started + timeout if timeout > 0 else None))


def _stop_strays(ctx: _Ctx, ours: Mapping[str, RayJob], specs: Mapping[str, TaskInput]) -> None:
    """Stop every live job of ours that no active run owns: ended runs, old runs, deleted tasks."""
    deletions: list[RayJob] = []
    for sid in sorted(ours):
        job = ours[sid]
        if job.terminal or sid in ctx.kept_jobs:
            continue
        ctx.used = ctx.used + _claim_from_metadata(job)  # still holds resources until it ends
        task = job.metadata.get(META_TASK, "")
        ctx.held[task] = ctx.held.get(task, Capacity()) + _claim_from_metadata(job)
        if task in specs:
            owner = ctx.bodies.get(task)
            why = f"preempted by {owner.preempted_by}" if owner and owner.preempted_by else ""
            ctx.plan.stops.append(Stop(sid, task, why or "run ended"))
        else:
            deletions.append(job)
    held = _hold_deletions(ctx, len(deletions)) if deletions else None
    if held is not None:
        ctx.plan.held_deletions = held
        ctx.plan.note(held.reason, held.message, logging.WARNING)
        return
    for job in deletions:
        ctx.plan.stops.append(Stop(job.submission_id, job.metadata.get(META_TASK), "spec deleted"))


def _hold_deletions(ctx: _Ctx, count: int) -> HeldDeletions | None:
    """Deletions that look like an accident are held until a human says otherwise."""
    if ctx.options.allow_mass_delete:
        return None
    if ctx.folder_empty:
        # Argo CD's allowEmpty: a folder with no spec and no sidecar left is far more often an
        # unmounted volume or a botched checkout than a wish to stop everything.
        return HeldDeletions(
            count,
            Reason.FOLDER_EMPTY,
            f"REFUSING to stop {count} jobs: the tasks folder holds no specs and no "
            "status files (unmounted?); restore it, or restart with --allow-mass-delete",
        )
    limit = ctx.options.max_stops_per_pass
    if limit and count > limit:
        return HeldDeletions(
            count,
            Reason.TOO_MANY_DELETIONS,
            f"REFUSING to stop {count} jobs whose specs disappeared in one pass "
            f"(limit {limit}); restore the specs, or restart with --allow-mass-delete",
        )
    return None


def _expire_history(
    ctx: _Ctx, ours: Mapping[str, RayJob], statuses: Mapping[str, TaskStatus]
) -> None:
    """Ray lists every job it ever ran, so each pass grows with history. A finished job of ours
    may go once the retention time has passed and no sidecar on disk still waits for its
    outcome (a run whose status file says it is active has not recorded its end yet)."""
    retention = ctx.options.ray_history_retention_seconds
    if retention is None:
        return
    awaited = {
        s.status.submission_id
        for s in statuses.values()
        if s.status.submission_id and s.status.phase.active
    }
    expired = []
    for sid, job in ours.items():
        if not job.terminal or job.end_time is None or sid in awaited:
            continue
        if ctx.now - job.end_time > retention:
            expired.append((job.end_time, sid))
        else:  # expires later: the answer holds until then
            ctx.until = min(ctx.until, max(job.end_time + retention - _EARLY, ctx.now))
    expired.sort()
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
        if ctx.plan.held_deletions is not None:
            continue
        ctx.plan.delete_statuses.append(name)


def _enqueue(t: _Step, name: str, task: Task, body: TaskStatusBody) -> TaskStatusBody:
    """Into the admission queue, unless it could never fit. Its phase and place in the queue
    are written by _admit, which always follows."""
    req = request_of(task)
    capacity = t.obs.capacity
    assert capacity is not None
    too_big = _unschedulable(req, capacity)
    if too_big is not None:
        return lifecycle.unschedulable(body, too_big)
    key = (-task.spec.priority, _epoch(body.queued_at) or t.now, name)
    candidate = policies.Candidate(name, req, task.spec.timeout_seconds)
    t.waiter = Waiter(key, candidate, task, bool(task.spec.depends_on) or _in_cycle(body))
    return body


_GATE_REASONS = {
    dependencies.Gate.WAITING: Reason.WAITING_FOR_DEPENDENCY,
    dependencies.Gate.MISSING: Reason.DEPENDENCY_MISSING,
    dependencies.Gate.FAILED: Reason.DEPENDENCY_FAILED,
}


def _gate_dependencies(ctx: _Ctx, specs: Mapping[str, TaskInput]) -> None:
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
    cycles = dependencies.find_cycles({n: [d.name for d in deps] for n, deps in graph.items()})
    kept: list[tuple[tuple[int, float, str], policies.Candidate]] = []
    for key, candidate in ctx.queue:  # cycles first, so dependents see them as they end up
        name = candidate.name
        if name in cycles:
            ctx.bodies[name] = lifecycle.dependency_cycle(ctx.bodies[name], cycles[name])
        else:
            kept.append((key, candidate))
    views = {
        name: dependencies.RunView(body.phase, _epoch(body.finished_at))
        for name, body in ctx.bodies.items()
    }
    ctx.queue, kept = kept, []
    for key, candidate in ctx.queue:
        name = candidate.name
        deps = ctx.tasks[name].spec.depends_on
        body = ctx.bodies[name]
        if _in_cycle(body):
            body = ctx.bodies[name] = lifecycle.cycle_resolved(body)
        if not deps:
            kept.append((key, candidate))
            continue
        judgement = dependencies.judge(deps, views)
        if not judgement.met:
            reason = _GATE_REASONS[judgement.gate]
            ctx.bodies[name] = lifecycle.hold(body, reason, judgement.message)
            continue
        queued = _epoch(body.queued_at) or ctx.now
        if judgement.met_at is not None and judgement.met_at > queued:
            queued = judgement.met_at
            body = set_fields(body, {"queued_at": _ts(queued)})
        ctx.bodies[name] = body
        kept.append(((key[0], queued, key[2]), candidate))
    ctx.queue = kept


def _submit_request(env: TaskEnv, name: str, task: Task, body: TaskStatusBody) -> SubmitRequest:
    options, req = env.options, request_of(task)
    return SubmitRequest(
        submission_id=body.submission_id or "",
        entrypoint=task.spec.entrypoint,
        runtime_env=_runtime_env(task, env.preemption.stop_wait(name)),
        metadata={
            META_QUEUE: options.queue_id,
            META_TASK: name,
            META_UID: body.uid or "",
            META_RUN: str(body.run),
            META_SPEC_HASH: body.spec_hash or "",
            META_CPU: f"{req.cpu:g}",
            META_GPU: f"{req.gpu:g}",
            META_MEMORY: f"{req.memory:.0f}",
            # Which commit produced this job: answered in Ray too, not only in the sidecar.
            **({META_REVISION: body.source.revision} if body.source is not None else {}),
        },
    )


# Ray's job supervisor waits STOP_WAIT_ENV seconds (whole, read from its own environment, which
# the job's runtime_env env_vars set) between SIGTERM and SIGKILL when a job is stopped.


def _runtime_env(task: Task, grace: float | None) -> dict[str, object] | None:
    """The task's runtime_env, plus its queue's grace period when its run could be preempted.
    The queue's grace is a ceiling: a spec may ask for less, never more (a team that could set
    its own would hold the resources a preemptor waits for as long as it liked)."""
    env = task.spec.runtime_env
    if grace is None:
        return env
    env_vars = dict((env or {}).get("env_vars") or {})
    ceiling = math.ceil(grace)
    asked = _whole_seconds(env_vars.get(STOP_WAIT_ENV))
    env_vars[STOP_WAIT_ENV] = str(ceiling if asked is None else min(asked, ceiling))
    return {**(env or {}), "env_vars": env_vars}


def _whole_seconds(value: object) -> int | None:
    """A stop wait as Ray would read it (a whole number >= 0), or None if it is not one."""
    try:
        seconds = int(str(value).strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def _preemption(ctx: _Ctx) -> preemption.Setup:
    """Each queue's preemption rules: the `preemption:` blocks, the flags for what they omit."""
    return ctx.env.preemption


def _admit(ctx: _Ctx) -> None:
    """Let the policy pick who starts now; everyone else waits, numbered in queue order. Then,
    if the policy's next pick still does not fit, it may preempt (`_preempt`)."""
    ctx.queue.sort(key=lambda item: item[0])
    queue = [candidate for _, candidate in ctx.queue]
    all_holds = preemption.holds(ctx.bodies, ctx.jobs_by_task, _claim_from_metadata)
    holds = {by: hold for by, hold in all_holds.items() if by in ctx.tasks}
    stopping = {victim for hold in all_holds.values() for victim in hold.victims}
    # A preemptor's room is reserved while its victims stop: nobody else may take from today's
    # free resources what it will need beyond what they free.
    free = _free(ctx)
    for by, hold in holds.items():
        free = free - victims.held_back(request_of(ctx.tasks[by]), hold.freeing)
    # A victim waits until its stopped run is gone from Ray, so it never holds two runs.
    eligible = [c for c in queue if c.name not in stopping]
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
            ctx.held,
            ctx.claims,
            ctx.now,
            slots,
            policy,
            fairshare.RESERVATION_OF_POLICY.get(ctx.options.policy, fairshare.STRICT_RESERVATION),
            preemption.ready(ctx.bodies, ctx.tasks, all_holds),
        )
        ctx.queue_admission = admission
    started = set(admission.start)
    preempting = _preempt(ctx, eligible, admission, free, all_holds)
    _until_of_age(ctx)
    positions: dict[str, int] = {}  # per queue with queues; one count without
    for candidate in queue:
        name = candidate.name
        if name in started:
            _start(ctx, candidate)
            continue
        owner = ctx.queues.queue_of(candidate.name) if ctx.queues is not None else ""
        positions[owner] = positions.get(owner, 0) + 1
        waiting = _why_waiting(ctx, name, admission, holds, preempting)
        eta = waiting.estimated_start if waiting else None
        if eta is not None and eta <= ctx.now:
            ctx.until = min(ctx.until, ctx.now)  # a reserved start of "now" moves with the clock
        ctx.bodies[name] = lifecycle.queue(
            ctx.bodies[name],
            positions[owner],
            waiting.reason if waiting else Reason.QUEUED,
            waiting.message if waiting else "queued",
            _ts(eta) if eta else None,
        )


def _until_of_age(ctx: _Ctx) -> None:
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
                ctx.until = min(ctx.until, max(edge - _EARLY, ctx.now))


def _why_waiting(
    ctx: _Ctx,
    name: str,
    admission: policies.Admission | queueing.QueueAdmission,
    holds: Mapping[str, preemption.Hold],
    preempting: Mapping[str, Preemption],
) -> policies.Waiting | None:
    if name in preempting:
        return policies.Waiting(Reason.PREEMPTING, preempting[name].message)
    hold = holds.get(name)
    if hold is not None and name not in admission.start:
        return policies.Waiting(
            Reason.PREEMPTING,
            f"preempted {', '.join(hold.victims)}; starts once they have stopped "
            "(their resources are reserved for it)",
        )
    body = ctx.bodies[name]
    if name not in admission.waiting and body.preempted_by is not None:
        return policies.Waiting(
            Reason.PREEMPTED,
            f"preempted by {body.preempted_by}; queued again once its stopped run is gone",
        )
    return admission.waiting.get(name)


def _preempt(
    ctx: _Ctx,
    queue: Sequence[policies.Candidate],
    admission: policies.Admission | queueing.QueueAdmission,
    free: Capacity,
    holds: Mapping[str, preemption.Hold],
) -> dict[str, Preemption]:
    """Only the task a queue's policy would admit next may preempt, and only if it waits for
    resources (or, within its queue, for its quota) and none of its earlier victims is still
    stopping. `reconciler.core.preemption` decides; this records it (victims first). `holds`: all
    of them, also those of preemptors that started meanwhile: their victims still stopping
    are nobody's usage when reclaim asks who borrows."""
    setup = _preemption(ctx)
    if not setup.any_on:
        return {}
    priorities = {c.name: ctx.tasks[c.name].spec.priority for c in queue}
    decisions = preemption.decide(
        setup, queue, admission, free, holds, ctx.running, priorities, ctx.now
    )
    result: dict[str, Preemption] = {}
    for decision in decisions:
        preemptor, victims = decision.preemptor, decision.victims
        reasons = tuple(Reason.RECLAIM if v.reclaim else Reason.WITHIN_QUEUE for v in victims)
        names = tuple(v.run.name for v in victims)
        total = Capacity()
        for victim, reason in zip(victims, reasons, strict=True):
            total = total + victim.run.request
            _preempt_one(ctx, victim.run, preemptor, reason, victim.queue)
        lent = " lent quota of" if all(v.reclaim for v in victims) else ""
        message = (
            f"preempting{lent} {', '.join(names)} (priority "
            f"{', '.join(str(v.run.priority) for v in victims)}; {_resources_text(total)}): it "
            f"needs {_resources_text(preemptor.request)} and only those free enough; starts once "
            "they have stopped"
        )
        reason = Reason.RECLAIM if Reason.RECLAIM in reasons else Reason.WITHIN_QUEUE
        queue_name = decision.queue if ctx.queues is not None else None
        result[preemptor.name] = Preemption(
            preemptor.name, names, reason, message, decision.free, reasons, queue_name
        )
        ctx.plan.preemptions.append(result[preemptor.name])
        ctx.plan.note(
            Reason.PREEMPTED,
            f"preempted {', '.join(names)} for {preemptor.name} (priority {preemptor.priority}"
            f"{', reclaiming lent quota' if reason is Reason.RECLAIM else ''})",
        )
    return result


def _preempt_one(
    ctx: _Ctx,
    victim: victims.Running,
    preemptor: victims.Preemptor,
    reason: Reason,
    victim_queue: str,
) -> None:
    """Queue the victim again and stop its job. Its status (written before any stop goes out)
    says who took its place; its job holds its resources until Ray reports it stopped."""
    body = ctx.bodies[victim.name]
    sid = body.submission_id or ""
    ran = _duration(ctx.now - victim.started)
    why = ""
    if reason is Reason.RECLAIM and ctx.queues is not None:
        lender = ctx.queues.queue_of(preemptor.name)
        why = f" of {lender}, taking back the quota {victim_queue} borrowed,"
    message = (
        f"preempted by {preemptor.name} (priority {preemptor.priority}){why} after run "
        f"{body.run} had run {ran}; queued again in its old place"
    )
    ctx.bodies[victim.name] = lifecycle.preempt(body, preemptor.name, message)
    ctx.conds.setdefault(victim.name, {})[COND_PREEMPTED] = (reason, message)
    ctx.plan.stops.append(Stop(sid, victim.name, f"preempted by {preemptor.name}"))


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def _free(ctx: _Ctx) -> Capacity:
    capacity = ctx.obs.capacity
    assert capacity is not None
    used = ctx.used
    if ctx.options.count_foreign_jobs and ctx.obs.jobs is not None:
        for job in ctx.obs.jobs.values():
            if not job.terminal and job.metadata.get(META_QUEUE) != ctx.options.queue_id:
                used = used + _foreign_claim(job)
    return capacity - used


def _start(ctx: _Ctx, candidate: policies.Candidate) -> None:
    name, body, task = candidate.name, ctx.bodies[candidate.name], ctx.tasks[candidate.name]
    uid = body.uid or make_uid(ctx.options.queue_id, name, ctx.stamp)
    sid = submission_id_for(name, uid, body.run + 1, task.spec.submission_id)
    body = lifecycle.start_run(body, uid, sid, ctx.stamp, ctx.sources.get(name))
    if body.phase is not Phase.STARTING:
        # The state machine refused the start: submitting would send a run with no id.
        message = f"not starting {name}: it was admitted while {body.phase.value}"
        ctx.plan.note(Reason.QUEUED, message, logging.ERROR)
        return
    ctx.bodies[name] = body
    ctx.used = ctx.used + candidate.request
    ctx.plan.submits.append(Submit(name, _submit_request(ctx.env, name, task, body)))
    ctx.plan.note(
        Reason.SUBMITTED,
        f"submitted {name} (priority {task.spec.priority}, "
        f"{_resources_text(candidate.request)}) as {sid}",
    )


def submit_failed(status: TaskStatus, message: str, now: datetime) -> TaskStatus:
    """Ray refused the submission for good (bad runtime_env, ...): the run failed, not retried."""
    body = lifecycle.refuse_submit(status.status, message, now)
    return status.model_copy(update={"status": body})
