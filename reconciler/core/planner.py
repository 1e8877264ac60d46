"""The pure planner: specs + statuses + what Ray reports + capacity + now -> actions and statuses.

No I/O, no clock, no randomness. Everything the loop does is decided here, so it can be tested
table-driven and driven by the simulator. The shell (loop.py) writes the returned statuses
*before* it submits, which is what makes submission ids safe across crashes. Which phase follows
which is not decided here but in `reconciler.core.task.lifecycle`.

This module orchestrates a pass as stages of frozen values (reconciler.core.stages): `begin`
gives the pass's inputs; each task's own part (`reconcile_task`) is merged in name order
(`TaskMerge`); then `finish` runs what needs every task at once, stage by stage (stray jobs,
dependency gates, admission with preemption, clean-up) and builds the `Plan` of the statuses.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from datetime import datetime

from reconciler.core import scaling
from reconciler.core.admit import Admitted, admit
from reconciler.core.cleanup import (
    Expiry,
    Strays,
    expire_finished_jobs,
    orphan_sidecars,
    stop_strays,
)
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
from reconciler.core.gates import Gated, gate_dependencies
from reconciler.core.inputs import Observation
from reconciler.core.queues.usage import QueueUsage
from reconciler.core.stages import Holdings, PassInputs, Reconciled, TaskMerge
from reconciler.core.task import idclaims, lifecycle
from reconciler.core.task.jobs import bundles_of, foreign_charge
from reconciler.core.task.jobs import request_of as request_of
from reconciler.core.task.preemptedby import shown
from reconciler.core.task.reconcile import reconcile_task, refused
from reconciler.core.task.step import TaskEnv, TaskResult, task_env
from reconciler.core.timestamps import to_datetime
from specs.cluster import META_QUEUE, Capacity
from specs.queues.config import QueueConfig
from specs.settings.process import PlanOptions
from specs.task.inputs import TaskInput
from specs.task.models import Condition, ConditionType, Metadata, Phase, Reason, read_reason
from specs.task.records import NameMetadata, Task
from specs.task.status import TaskStatus, TaskStatusBody
from specs.task.submission_ids import SeenClaim
from specs.task.visibility import Visibility
from specs.tenancy.policy import STOP_WAIT_ENV as STOP_WAIT_ENV  # tests read it here

__all__ = [  # what the shell, the simulator, the incremental planner and the tests use
    "STOP_WAIT_ENV",
    "Asked",
    "Collected",
    "Event",
    "Observation",
    "PassInputs",
    "PassStages",
    "Plan",
    "PlanOptions",
    "Preemption",
    "Reconciled",
    "RefusedDeletions",
    "Stop",
    "StopCause",
    "Submit",
    "Summary",
    "TaskEnv",
    "TaskInput",
    "TaskMerge",
    "TaskResult",
    "TimeOut",
    "WriteClass",
    "begin",
    "collect_statuses",
    "finish",
    "plan",
    "plan_of",
    "reconcile_task",
    "refused_claim",
    "request_of",
    "run_stages",
    "scale_request",
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
    # up to it (reconciler/core/incremental/standing.py). None: no rule reads the clock.
    read_back_deadline: float | None = None
    # What to ask the autoscaler for: the resource bundles the cluster should be
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
    seen_claims: Mapping[str, SeenClaim] | None = None,
) -> Plan:
    """Decide one reconcile pass. Pure: same inputs, same plan. With `queues`, each team
    folder is its own queue with a quota, and the queues share the cluster fairly; `usage`:
    each queue's decayed past use (resource-seconds), which the caller keeps and advances.
    `queue_error`: the queue file is invalid and no configuration is in force (`queues` is
    None): every task is in the one default queue, and each unfinished one says why.
    `seen_claims`: when the scheduler first saw each task claim its explicit id (the caller
    keeps it; it decides between two folders' claims of one id).

    The reference: no production caller plans with it. The loop, the simulator and `rayqueue
    plan` call `reconciler.core.incremental.plan_incremental`, which the property tests
    (tests/unit/core/incremental/) compare with it."""
    inputs = begin(specs, statuses, observed, now, options, queues, usage, queue_error, seen_claims)
    specs = with_id_claims(specs, statuses, inputs)
    merged = TaskMerge()
    for name in sorted(specs):
        merged.add(name, reconcile_task(inputs.env, specs[name], statuses.get(name), inputs.now))
    return finish(inputs, merged.done(), specs, statuses)


def with_id_claims(
    specs: Mapping[str, TaskInput], statuses: Mapping[str, TaskStatus], inputs: PassInputs
) -> Mapping[str, TaskInput]:
    """`specs`, with each spec whose explicit submission id another task has (or also claims)
    turned Invalid (reconciler.core.task.idclaims). Its last valid spec is the spec itself, so
    a run it already has goes on; it is never submitted again while the claim stands."""
    claimed = (
        (name, spec.task.spec.submission_id)
        for name, spec in specs.items()
        if spec.task is not None and spec.task.spec.submission_id
    )
    found = idclaims.conflicts(claimed, statuses, inputs.env.ours, inputs.folders)
    if not found:
        return specs
    result = dict(specs)
    for name, message in found.items():
        result[name] = refused_claim(specs[name], message)
    return result


def refused_claim(spec: TaskInput, message: str) -> TaskInput:
    """`spec` turned Invalid because its explicit submission id is refused (`message`: why):
    its last valid spec is the spec itself."""
    return refused(spec, message)


def begin(
    specs: Mapping[str, TaskInput],
    statuses: Mapping[str, TaskStatus],
    observed: Observation,
    now: datetime,
    options: PlanOptions,
    queues: QueueConfig | None,
    usage: QueueUsage | None = None,
    queue_error: str | None = None,
    seen_claims: Mapping[str, SeenClaim] | None = None,
) -> PassInputs:
    """What every stage of the pass reads of it as a whole."""
    return PassInputs(
        options=options,
        obs=observed,
        now=now.timestamp(),
        env=task_env(observed, options, queues),
        read=specs,
        queues=queues,
        usage=usage,
        queue_error=queue_error if queues is None else None,
        folder_empty=not specs and not statuses,
        seen_claims=seen_claims or {},
    )


@dataclass(frozen=True)
class PassStages:
    """Every stage's outcome of a full pass, and its plan."""

    reconciled: Reconciled
    strays: Strays
    gated: Gated
    admitted: Admitted
    expiry: Expiry
    plan: Plan


def finish(
    inputs: PassInputs,
    reconciled: Reconciled,
    specs: Mapping[str, TaskInput],
    statuses: Mapping[str, TaskStatus],
) -> Plan:
    """What needs every task at once: strays, dependencies, admission, clean-up, statuses."""
    return run_stages(inputs, reconciled, specs, statuses).plan


def run_stages(
    inputs: PassInputs,
    reconciled: Reconciled,
    specs: Mapping[str, TaskInput],
    statuses: Mapping[str, TaskStatus],
) -> PassStages:
    """`finish`, with each stage's outcome (the incremental planner reads admission's)."""
    if inputs.obs.available:
        holdings = reconciled.holdings
        strays = stop_strays(inputs, specs, reconciled.kept_jobs, reconciled.bodies, holdings)
        gated = gate_dependencies(inputs, specs, reconciled)
        admitted = admit(inputs, reconciled, strays.holdings, gated)
        expiry = expire_finished_jobs(inputs, statuses)
    else:  # Ray unread: no job of ours is stopped, started, preempted or expired
        strays, gated, admitted, expiry = _without_ray(reconciled)
    stops = [*strays.stops, *admitted.stops]
    asked = Asked(
        submits=[*reconciled.submits, *admitted.submits],
        stops=stops,
        timeouts=reconciled.timeouts,
        preemptions=admitted.preemptions,
        delete_statuses=orphan_sidecars(inputs, specs, statuses, stops, strays.refused),
        fetch_logs=reconciled.fetch_logs,
        deletes=expiry.deletes,
        events=[*reconciled.events, *strays.events, *admitted.events],
        refused_deletions=strays.refused,
    )
    acts = acting(asked.submits, asked.stops, asked.timeouts, asked.preemptions)
    fair = admitted.queue_admission
    known = fair.queue_of if fair is not None else {}
    collected = collect_statuses(inputs, admitted.bodies, admitted.conds, known, statuses, acts)
    still = asked.nothing(inputs) and _unchanged(collected.statuses, statuses)
    scale = scale_request(inputs, specs, strays.holdings, reconciled.tasks, admitted.scale_demand)
    # Each task's own reconcile narrowed `settles_until` to where its answers hold (timeouts,
    # backoffs, grace periods); the pass-wide stages add theirs (admission, Ray's history).
    # Admission itself only gets stricter as time passes (a backfill candidate's end,
    # now + timeoutSeconds, moves later against a fixed reserved start), so a pass that
    # admitted nobody admits nobody later with the same inputs. Only forward in time: a clock
    # set back plans afresh.
    until = min(reconciled.settles_until, admitted.until, expiry.until)
    plan = plan_of(
        inputs.now,
        asked,
        collected,
        collected.statuses,
        _summary(inputs, collected.statuses, admitted),
        until,
        reconciled.recorded_until,
        scale,
        still,
    )
    return PassStages(reconciled, strays, gated, admitted, expiry, plan)


def _without_ray(reconciled: Reconciled) -> tuple[Strays, Gated, Admitted, Expiry]:
    """The later stages' outcomes when Ray could not be read: each decides nothing."""
    admitted = Admitted(
        bodies=reconciled.bodies,
        conds=reconciled.conds,
        used=reconciled.holdings.used,
        submits=[],
        stops=[],
        preemptions=[],
        events=[],
        until=math.inf,
        walk=None,
        queue_admission=None,
        order={},
        not_considered=0,
        scale_demand=[],
    )
    strays = Strays([], None, [], reconciled.holdings)
    return strays, Gated(reconciled.bodies, reconciled.queue), admitted, Expiry([], math.inf)


def _summary(inputs: PassInputs, statuses: Mapping[str, TaskStatus], admitted: Admitted) -> Summary:
    phases = [s.status.phase for s in statuses.values()]
    fair = admitted.queue_admission
    return Summary(
        capacity=inputs.obs.capacity,
        used=admitted.used,
        queued=phases.count(Phase.QUEUED),
        starting=phases.count(Phase.STARTING),
        running=phases.count(Phase.RUNNING),
        queues=fair.summary() if fair is not None else None,
        order=admitted.order,
        not_considered=admitted.not_considered,
    )


@dataclass(frozen=True)
class Asked:
    """What a plan asks of Ray, of the files and of the log, in the order the stages asked."""

    submits: Sequence[Submit]
    stops: Sequence[Stop]
    timeouts: Sequence[TimeOut]
    preemptions: Sequence[Preemption]
    delete_statuses: Sequence[str]
    fetch_logs: Mapping[str, str]
    deletes: Sequence[str]
    events: Sequence[Event]
    refused_deletions: RefusedDeletions | None

    def nothing(self, inputs: PassInputs) -> bool:
        """Ray was read, and nothing is asked of Ray, of the files or of the log."""
        return not (
            not inputs.obs.available
            or self.submits
            or self.stops
            or self.timeouts
            or self.preemptions
            or self.delete_statuses
            or self.fetch_logs
            or self.deletes
            or self.events
            or self.refused_deletions is not None
        )


@dataclass(frozen=True)
class Collected:
    """The statuses a pass sets, and how each changed one reaches disk."""

    statuses: Mapping[str, TaskStatus]
    write_classes: Mapping[str, WriteClass]


def plan_of(
    now: float,
    asked: Asked,
    collected: Collected,
    statuses: Mapping[str, TaskStatus],
    summary: Summary,
    until: float,
    recorded_until: float,
    scale_request: tuple[Capacity, ...] | None,
    still: bool,
) -> Plan:
    """The Plan: what is `asked`, the `statuses` (`collected`'s, or with the incremental
    planner every status), how the changed ones reach disk, and its deadlines."""
    deadline = max(min(until, recorded_until), now)
    read_back = max(until, now)
    return Plan(
        statuses=statuses,
        submits=asked.submits,
        stops=asked.stops,
        timeouts=asked.timeouts,
        preemptions=asked.preemptions,
        delete_statuses=asked.delete_statuses,
        fetch_logs=asked.fetch_logs,
        deletes=asked.deletes,
        events=asked.events,
        refused_deletions=asked.refused_deletions,
        summary=summary,
        write_classes=collected.write_classes,
        deadline=None if math.isinf(deadline) else deadline,
        read_back_deadline=None if math.isinf(read_back) else read_back,
        scale_request=scale_request,
        still=still,
    )


def _unchanged(out: Mapping[str, TaskStatus], statuses: Mapping[str, TaskStatus]) -> bool:
    """Every status handed back as it was given."""
    return len(out) == len(statuses) and all(
        statuses.get(name) is status for name, status in out.items()
    )


def scale_request(
    inputs: PassInputs,
    specs: Mapping[str, TaskInput],
    holdings: Holdings,
    tasks: Mapping[str, Task],
    scale_demand: Sequence[str],
) -> tuple[Capacity, ...] | None:
    """What to ask the autoscaler for: None on a fixed cluster (or with Ray unreadable: leave
    the standing request alone); else what runs and what waits for nodes, shaped to the node
    types; () when nothing waits for nodes."""
    obs, options = inputs.obs, inputs.options
    grow = obs.scaling
    if grow is None or not obs.available:
        return None

    def own(name: str) -> tuple[Capacity, ...]:
        spec = specs.get(name)
        task = spec.task or spec.last_valid if spec is not None else None
        return bundles_of(task) if task is not None else ()

    running = [(request, own(name)) for name, request in holdings.in_use.items()]
    counted, held = options.count_foreign_jobs, obs.held
    if (counted or held) and obs.jobs is not None:
        jobs = obs.jobs
        running += [  # by id: the shape of the request must not follow Ray's listing order
            (foreign_charge(jobs[sid], counted, held), ())
            for sid in sorted(jobs)
            if not jobs[sid].terminal
            and jobs[sid].metadata.get(META_QUEUE) != options.queue_id
            and (counted or sid in held)
        ]
        running += [(held[sid], ()) for sid in sorted(held) if sid not in jobs]
    demand = [(request_of(tasks[name]), own(name)) for name in scale_demand]
    return scaling.request_of(running, demand, grow.node_types)


def collect_statuses(
    inputs: PassInputs,
    bodies: Mapping[str, TaskStatusBody],
    conds: Mapping[str, Wanted],
    known: Mapping[str, str],
    statuses: Mapping[str, TaskStatus],
    acts: Set[str],
    names: Iterable[str] | None = None,
) -> Collected:
    """Each task's status (of `names`, default all of `bodies`), and for each changed one how
    it must reach disk: durable when this pass acts on the task in Ray (`acts`) or the status
    records a run (reconciler.core.durability). `known`: the queue the queues' admission found
    for each task it saw."""
    queues, queue_error, now = inputs.queues, inputs.queue_error, inputs.now
    out: dict[str, TaskStatus] = {}
    classes: dict[str, WriteClass] = {}
    for name in bodies if names is None else names:
        body = bodies[name]
        prev = statuses.get(name)
        wanted = conds.get(name, _NO_WANTS)
        if body.preempted_by is not None and ConditionType.PREEMPTED not in wanted:
            preempted = _preempted_condition(body, name, inputs.options.visibility)
            wanted = {**wanted, ConditionType.PREEMPTED: preempted}
        if queue_error is not None and _in_a_queue(body):
            wanted = {**wanted, ConditionType.QUEUE_CONFIG_INVALID: _no_config(queue_error)}
        if wanted or body.conditions:
            old = prev.status.conditions if prev else []
            body = lifecycle.with_conditions(body, _conditions(old, wanted, now))
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
    return Collected(out, classes)


# What a task without conditions wants: one empty mapping, only read (a new dict is built
# to add to it).
_NO_WANTS: Wanted = {}


def _metadata_of(prev: TaskStatus | None, name: str) -> Metadata | NameMetadata:
    """The previous status's metadata when it is the name alone (as every status this loop
    wrote): one object kept per task, not a new one per changed status."""
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


def _preempted_condition(
    body: TaskStatusBody, name: str, visibility: Visibility
) -> tuple[Reason, str]:
    """The condition as the preempting pass wrote it; it holds until the next run starts."""
    for cond in body.conditions:
        reason = read_reason(cond.reason)
        if cond.type == ConditionType.PREEMPTED and reason is not None:
            return reason, cond.message
    by = shown(visibility, name, body.preempted_by) if body.preempted_by else None
    return Reason.WITHIN_QUEUE, f"preempted by {by}"


def submit_failed(status: TaskStatus, message: str, now: datetime) -> TaskStatus:
    """Ray refused the submission for good (bad runtime_env, ...): the run failed, not retried."""
    body = lifecycle.refuse_submit(status.status, message, now)
    return status.model_copy(update={"status": body})
