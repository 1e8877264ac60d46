"""The pure planner: specs + statuses + what Ray reports + capacity + now -> actions and statuses.

No I/O, no clock, no randomness. Everything the loop does is decided here, so it can be tested
table-driven and driven by the simulator. The shell (loop.py) writes the returned statuses
*before* it submits, which is what makes submission ids safe across crashes. Which phase follows
which is not decided here but in `reconciler.core.task.lifecycle`.

This module orchestrates a pass: `begin`, then each task's own part (`reconcile`), `merge`d in
name order, then `finish`, which runs what needs every task at once (`cleanup`, `admission`,
`preemption`) and builds the `Plan`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from reconciler.core import scaling
from reconciler.core.admission import policies
from reconciler.core.admission.admit import admit, gate_dependencies
from reconciler.core.admission.waits import Lack
from reconciler.core.cleanup import expire_finished_jobs, orphan_sidecars, stop_strays
from reconciler.core.decisions import (
    Event,
    Preemption,
    RefusedDeletions,
    Stop,
    StopCause,
    Submit,
    Summary,
    TimeOut,
    Wanted,
)
from reconciler.core.durability import WriteClass, acting, write_class
from reconciler.core.inputs import Observation, TaskInput
from reconciler.core.preemption import victims
from reconciler.core.queues import dispatch as queueing
from reconciler.core.queues.usage import QueueUsage
from reconciler.core.task import idclaims, lifecycle
from reconciler.core.task.jobs import bundles_of, foreign_claim
from reconciler.core.task.jobs import request_of as request_of
from reconciler.core.task.reconcile import reconcile_task
from reconciler.core.task.step import TaskEnv, TaskResult, task_env
from reconciler.core.timestamps import to_datetime
from specs.cluster import META_QUEUE, Capacity, RayJob
from specs.queues.config import QueueConfig
from specs.settings.process import PlanOptions
from specs.task.models import Condition, ConditionType, Metadata, Phase, Reason, read_reason
from specs.task.records import NameMetadata, Task
from specs.task.status import TaskStatus, TaskStatusBody
from specs.tenancy.policy import STOP_WAIT_ENV as STOP_WAIT_ENV  # tests read it here

__all__ = [  # what the shell, the simulator and the tests use of a pass
    "STOP_WAIT_ENV",
    "Event",
    "Observation",
    "Plan",
    "PlanOptions",
    "Preemption",
    "RefusedDeletions",
    "Stop",
    "StopCause",
    "Submit",
    "Summary",
    "TaskEnv",
    "TaskInput",
    "TaskResult",
    "TimeOut",
    "WriteClass",
    "begin",
    "finish",
    "merge",
    "plan",
    "reconcile_task",
    "request_of",
    "submit_failed",
    "with_id_claims",
]


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
    # task -> the submission id of its run that failed this pass, whose log tail it needs (the
    # status may already name a retry's new run)
    fetch_logs: Mapping[str, str] = field(default_factory=dict)
    deletes: Sequence[str] = field(default_factory=list)  # finished jobs to drop from Ray's history
    events: Sequence[Event] = field(default_factory=list)
    refused_deletions: RefusedDeletions | None = None
    summary: Summary | None = None
    # How each changed status reaches disk (reconciler.core.durability); an unchanged one
    # (the very object handed in) has no entry.
    write_classes: Mapping[str, WriteClass] = field(default_factory=dict)
    # The plan's next deadline: the last instant at which the same inputs still give this
    # same plan (a timeout, a backoff, a grace period, a reserved start: every rule that reads
    # the clock narrows it); None: no rule does. The loop wakes just after it (RequeueAfter).
    deadline: float | None = None
    # The deadline of the pass that reads this plan's statuses back (the same inputs, these
    # statuses written): as `deadline`, but a time a status records once (a run's start,
    # TaskStep.recorded) pins only this plan to its instant. The loop skips such a read-back
    # up to it (reconciler/shell/loop/readback.py). None: no rule reads the clock.
    read_back_deadline: float | None = None
    # What to ask the autoscaler for (issue 26): the resource bundles the cluster should be
    # able to hold (what runs, plus the demand that waits for nodes), shaped to the node types;
    # None: no scaling (leave any request alone); (): nothing waits, clear the request.
    scale_request: tuple[Capacity, ...] | None = None
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
    fetch_logs: dict[str, str] = field(default_factory=dict)
    deletes: list[str] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    refused_deletions: RefusedDeletions | None = None
    write_classes: dict[str, WriteClass] = field(default_factory=dict)

    def note(self, reason: Reason, message: str, level: int = logging.INFO) -> None:
        self.events.append(Event(level, reason, message))


def _conditions(previous: Sequence[Condition], wanted: Wanted, now: float) -> list[Condition]:
    """Keep each condition's transition time while it holds; fixed order; seconds precision."""
    old = {c.type: c for c in previous}
    result = []
    for ctype in ConditionType:
        if ctype not in wanted:
            continue
        reason, message = wanted[ctype]
        since = old[ctype].last_transition_time if ctype in old else to_datetime(float(int(now)))
        result.append(
            Condition(type=ctype, reason=reason, message=message, last_transition_time=since)
        )
    return result


@dataclass
class PassState:
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
    read: Mapping[str, TaskInput] = field(default_factory=dict)  # the specs read: their sources
    conds: dict[str, Wanted] = field(default_factory=dict)
    running: list[victims.Running] = field(default_factory=list)  # possible victims
    jobs_by_task: Mapping[str, Sequence[RayJob]] = field(default_factory=dict)
    folder_empty: bool = False  # no spec and no sidecar at all: unmounted, or wiped
    queues: QueueConfig | None = None  # team queues with quotas; None: one queue, as before
    usage: QueueUsage | None = None  # the queues' decayed past use, by queue (core/queues/usage.py)
    in_use: dict[str, Capacity] = field(default_factory=dict)  # by task: jobs holding resources
    queue_admission: queueing.QueueAdmission | None = None
    gated: bool = False  # some queued task has dependencies or sits in a cycle
    until: float = math.inf  # the latest `now` at which each time-dependent answer still holds
    # ... counting a time a task's status records once (TaskResult.valid_until against its
    # settles_until): `until` is what the pass that reads the statuses back holds to.
    recorded_until: float = math.inf
    scale_demand: list[str] = field(default_factory=list)  # tasks that wait for new nodes
    # _queues.yaml's error (file:line:col: field: message) while no configuration is in force
    queue_error: str | None = None
    order: dict[str, list[str]] = field(default_factory=dict)  # waiting, per queue, in order
    not_considered: int = 0  # waiting tasks past the bound of admission's walk
    # Where the policy's walk ended (Admission.tail: index, lack) and how many it started;
    # None with team queues (the incremental planner's fast pass reads it).
    walk: tuple[int | None, Lack | None, int] | None = None

    @property
    def stamp(self) -> datetime:
        return to_datetime(self.now)


def plan(
    specs: Mapping[str, TaskInput],
    statuses: Mapping[str, TaskStatus],
    observed: Observation,
    now: datetime,
    options: PlanOptions = PlanOptions(),
    *,
    queues: QueueConfig | None = None,
    usage: QueueUsage | None = None,
    queue_error: str | None = None,
) -> Plan:
    """Decide one reconcile pass. Pure: same inputs, same plan. With `queues`, each team
    folder is its own queue with a quota, and the queues share the cluster fairly; `usage`:
    each queue's decayed past use (resource-seconds), which the caller keeps and advances.
    `queue_error`: the queue file is invalid and no configuration is in force (`queues` is
    None): every task is in the one default queue, and each unfinished one says why.

    The reference: no production caller plans with it. The loop, the simulator and `rayqueue
    plan` call `reconciler.core.incremental.plan_incremental`, which the property tests
    (tests/unit/test_incremental_planner.py, test_incremental_sequences.py) compare with it."""
    ctx = begin(specs, statuses, observed, now, options, queues, usage, queue_error)
    env = ctx.env
    specs = with_id_claims(specs, statuses, env)
    for name in sorted(specs):
        merge(ctx, name, reconcile_task(env, specs[name], statuses.get(name), ctx.now))
    return finish(ctx, specs, statuses)


def with_id_claims(
    specs: Mapping[str, TaskInput], statuses: Mapping[str, TaskStatus], env: TaskEnv
) -> Mapping[str, TaskInput]:
    """`specs`, with each spec whose explicit submission id another task has (or also claims)
    turned Invalid (reconciler.core.task.idclaims). Its last valid spec is the spec itself, so a
    run it
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
    usage: QueueUsage | None = None,
    queue_error: str | None = None,
) -> PassState:
    """A pass's shared state, before any task is merged into it."""
    env = task_env(observed, options, queues)
    ctx = PassState(options, observed, now.timestamp(), _Draft(), env, queues=queues, usage=usage)
    ctx.queue_error = queue_error if queues is None else None
    ctx.folder_empty = not specs and not statuses
    ctx.read = specs
    ctx.jobs_by_task = env.by_task
    return ctx


def merge(ctx: PassState, name: str, result: TaskResult) -> None:
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
    if result.fetch_log is not None:
        ctx.plan.fetch_logs[name] = result.fetch_log
    in_use = result.in_use
    if in_use is not None:
        ctx.kept_jobs.add(in_use.submission_id)
        ctx.used = ctx.used + in_use.request
        ctx.in_use[name] = ctx.in_use.get(name, Capacity()) + in_use.request
        ctx.claims.append(in_use.claim)
    waiter = result.waiter
    if waiter is not None:
        ctx.queue.append((waiter.key, waiter.candidate))
        ctx.tasks[name] = waiter.task
        ctx.gated = ctx.gated or waiter.gated
    if result.running is not None:
        ctx.running.append(result.running)
    ctx.until = min(ctx.until, result.settles_until)
    ctx.recorded_until = min(ctx.recorded_until, result.valid_until)


def finish(
    ctx: PassState, specs: Mapping[str, TaskInput], statuses: Mapping[str, TaskStatus]
) -> Plan:
    """What needs every task at once: strays, dependencies, admission, clean-up, statuses."""
    ours = ctx.env.ours
    if ctx.obs.available:
        stop_strays(ctx, ours, specs)
        gate_dependencies(ctx, specs)
        admit(ctx)
        expire_finished_jobs(ctx, ours, statuses)
    orphan_sidecars(ctx, specs, statuses, ours)
    collect_statuses(ctx, statuses)
    draft = ctx.plan
    # Each task's own reconcile narrowed `ctx.until` to where its answers hold (timeouts,
    # backoffs, grace periods); the pass-wide rules add theirs (`_admit`, `_expire_history`).
    # Admission itself only gets stricter as time passes (a backfill candidate's end,
    # now + timeoutSeconds, moves later against a fixed reserved start), so a pass that
    # admitted nobody admits nobody later with the same inputs. Only forward in time: a clock
    # set back plans afresh.
    return _plan_of(
        draft,
        draft.statuses,
        _summary(ctx),
        ctx,
        _scale_request(ctx, specs),
        _changes_nothing(ctx, statuses),
    )


def _plan_of(
    draft: _Draft,
    statuses: Mapping[str, TaskStatus],
    summary: Summary,
    ctx: PassState,
    scale_request: tuple[Capacity, ...] | None,
    still: bool,
) -> Plan:
    """The Plan, of the draft's own containers, typed read-only: the draft ends here."""
    until = max(min(ctx.until, ctx.recorded_until), ctx.now)
    read_back = max(ctx.until, ctx.now)
    return Plan(
        statuses=statuses,
        submits=draft.submits,
        stops=draft.stops,
        timeouts=draft.timeouts,
        preemptions=draft.preemptions,
        delete_statuses=draft.delete_statuses,
        fetch_logs=draft.fetch_logs,
        deletes=draft.deletes,
        events=draft.events,
        refused_deletions=draft.refused_deletions,
        summary=summary,
        write_classes=draft.write_classes,
        deadline=None if math.isinf(until) else until,
        read_back_deadline=None if math.isinf(read_back) else read_back,
        scale_request=scale_request,
        still=still,
    )


def freeze(
    ctx: PassState,
    statuses: Mapping[str, TaskStatus],
    out: Mapping[str, TaskStatus],
    summary: Summary,
    touched: Iterable[str],
) -> Plan:
    """The incremental planner's plan: as `finish` builds it, with every status `out` (the
    given ones, but for `touched`) and the summary it kept."""
    draft = ctx.plan
    still = (
        _asks_nothing(ctx)
        and len(out) == len(statuses)
        and all(statuses.get(name) is out[name] for name in touched)
    )
    # scale_request None: the fast pass runs only without an autoscaler
    return _plan_of(draft, out, summary, ctx, None, still)


def _scale_request(ctx: PassState, specs: Mapping[str, TaskInput]) -> tuple[Capacity, ...] | None:
    """What to ask the autoscaler for: None on a fixed cluster (or with Ray unreadable: leave
    the standing request alone); else what runs and what waits for nodes, shaped to the node
    types; () when nothing waits for nodes."""
    grow = ctx.obs.scaling
    if grow is None or not ctx.obs.available:
        return None

    def own(name: str) -> tuple[Capacity, ...]:
        spec = specs.get(name)
        task = spec.task or spec.last_valid if spec is not None else None
        return bundles_of(task) if task is not None else ()

    running = [(request, own(name)) for name, request in ctx.in_use.items()]
    if ctx.options.count_foreign_jobs and ctx.obs.jobs is not None:
        jobs = ctx.obs.jobs
        running += [  # by id: the shape of the request must not follow Ray's listing order
            (foreign_claim(jobs[sid]), ())
            for sid in sorted(jobs)
            if not jobs[sid].terminal and jobs[sid].metadata.get(META_QUEUE) != ctx.options.queue_id
        ]
    demand = [(request_of(ctx.tasks[name]), own(name)) for name in ctx.scale_demand]
    return scaling.request_of(running, demand, grow.node_types)


def _changes_nothing(ctx: PassState, statuses: Mapping[str, TaskStatus]) -> bool:
    """Whether the plan asks for nothing and hands back every status as it was given."""
    plan = ctx.plan
    return (
        _asks_nothing(ctx)
        and len(plan.statuses) == len(statuses)
        and all(statuses.get(name) is status for name, status in plan.statuses.items())
    )


def _asks_nothing(ctx: PassState) -> bool:
    """Ray was read, and the draft asks nothing of Ray, of the files or of the log."""
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
        or plan.refused_deletions is not None
    )


def collect_statuses(
    ctx: PassState, statuses: Mapping[str, TaskStatus], names: Iterable[str] | None = None
) -> None:
    """Each task's status (of `names`, default all), and for each changed one how it must
    reach disk: durable when this pass acts on the task in Ray or the status records a run
    (reconciler.core.durability)."""
    draft = ctx.plan
    acts = acting(draft.submits, draft.stops, draft.timeouts, draft.preemptions)
    known = ctx.queue_admission.queue_of if ctx.queue_admission is not None else {}
    bodies, conds, queues, queue_error = ctx.bodies, ctx.conds, ctx.queues, ctx.queue_error
    out, classes = draft.statuses, draft.write_classes
    for name in bodies if names is None else names:
        body = bodies[name]
        prev = statuses.get(name)
        wanted = conds.get(name, _NO_WANTS)
        if body.preempted_by is not None and ConditionType.PREEMPTED not in wanted:
            wanted = {**wanted, ConditionType.PREEMPTED: _preempted_condition(body)}
        if queue_error is not None and _in_a_queue(body):
            wanted = {**wanted, ConditionType.QUEUE_CONFIG_INVALID: _no_config(queue_error)}
        if wanted or body.conditions:
            old = prev.status.conditions if prev else []
            body = lifecycle.with_conditions(body, _conditions(old, wanted, ctx.now))
        if queues is not None or body.queue is not None:
            queue = None
            if queues is not None:  # the queues' admission found most already
                queue = known.get(name) or queues.queue_of(name)
            body = lifecycle.in_queue(body, queue)
        if prev is not None and prev.status is body:
            out[name] = prev  # unchanged: same object, nothing to write
        else:
            status = TaskStatus(metadata=_metadata_of(prev, name), status=body)
            out[name] = status
            classes[name] = write_class(prev, status, name in acts)


# What a task without conditions wants: one empty mapping, only read (a new dict is built
# to add to it).
_NO_WANTS: Wanted = {}


def _metadata_of(prev: TaskStatus | None, name: str) -> Metadata | NameMetadata:
    """The previous status's metadata when it is the name alone (as every status this loop
    wrote): one object kept per task, not a new one (~0.4 KB) per changed status."""
    if prev is not None:
        metadata = prev.metadata
        if metadata.name == name and not metadata.labels and not metadata.annotations:
            return metadata
    return NameMetadata(name)


def _in_a_queue(body: TaskStatusBody) -> bool:
    """Waiting or holding resources: what a queue's quota decides or counts."""
    return body.phase is Phase.QUEUED or body.phase.active


def _no_config(error: str) -> tuple[Reason, str]:
    return (
        Reason.QUEUE_CONFIG_INVALID,
        f"{error}; no queue configuration has been valid since serve started, so every task "
        "is in the one default queue (no quotas) until the file is fixed",
    )


def _preempted_condition(body: TaskStatusBody) -> tuple[Reason, str]:
    """The condition as the preempting pass wrote it; it holds until the next run starts."""
    for cond in body.conditions:
        reason = read_reason(cond.reason)
        if cond.type == ConditionType.PREEMPTED and reason is not None:
            return reason, cond.message
    return Reason.WITHIN_QUEUE, f"preempted by {body.preempted_by}"


def _summary(ctx: PassState) -> Summary:
    phases = [s.status.phase for s in ctx.plan.statuses.values()]
    return Summary(
        capacity=ctx.obs.capacity,
        used=ctx.used,
        queued=phases.count(Phase.QUEUED),
        starting=phases.count(Phase.STARTING),
        running=phases.count(Phase.RUNNING),
        queues=ctx.queue_admission.summary() if ctx.queue_admission is not None else None,
        order=ctx.order,
        not_considered=ctx.not_considered,
    )


def submit_failed(status: TaskStatus, message: str, now: datetime) -> TaskStatus:
    """Ray refused the submission for good (bad runtime_env, ...): the run failed, not retried."""
    body = lifecycle.refuse_submit(status.status, message, now)
    return status.model_copy(update={"status": body})
