"""The discrete-event simulator: the real planner, a virtual clock and a simulated Ray cluster.

Each step builds the planner's inputs (TaskInput, TaskStatus, Observation), calls the planner
the loop serves with (`reconciler.core.incremental.plan_incremental`, its memo kept from step to
step and each task's version moved whenever the simulator gives it a spec or a status, as the
store's generations move in the loop), and applies its submits and stops to a dictionary of
RayJob values, as the loop and Ray would. Admission, ordering, timeouts and statuses are the
planner's; the simulator only decides when Ray jobs start and end.

Ray lists a submitted job RUNNING at once (its driver reserves nothing, as rayqueue submits
it), and that is all the planner sees. What the job really holds (`Job.held_cpu`: its
declaration, or more or less when it does not keep its word) is the simulator's alone: a job
whose real use fits in what Ray has free starts its work at once; one that does not fit waits
inside Ray, all or nothing (as a placement group does), and its run time counts from when Ray
gives it its CPUs. Ray hands CPUs as they free to the jobs waiting in it in the order they were
submitted, each that fits: a job that does not fit holds none behind it back. A job's wait is
its real start minus its arrival; its timeout, the planner's, still counts from when Ray listed
it RUNNING. With every job keeping its word, the planner never submits past what is free, so
every job starts when it is submitted.

What Ray says each job holds reaches the planner as the loop's census does (`census_seconds`;
None: the planner sees declarations only): taken every `census_seconds` of virtual time, of Ray
as it stood at that instant (what each started job holds, nothing for one still waiting inside
Ray, and capacity less what is held), and fed to every pass until the next one, so a job Ray
started since is not in it. A census is taken at an instant before that instant's events; a pass
runs at the next census instant only when that census will show something new, Ray holding other
than the last census saw and other than the jobs declare (a census that shows every job keeping
its word, or nothing new, changes nothing the planner decides).

A priority inversion (`JobRecord.inversions`) is counted for a job H each time a job of lower
priority, submitted to Ray after H, really starts while H waits inside Ray (Ray passed H over,
for a job that fits); `JobRecord.behind_lower` counts the starts, while H waits inside Ray, of
lower-priority jobs submitted before it (Ray's order of submission, where rayqueue's is by
priority). A job that starts at the same instant as the lower one is not waiting.

The clock jumps from event to event (an arrival, a job's end, a timeout coming due). At each
event time it runs passes until one changes nothing in Ray: the pass after a submit is the one
that sees the job RUNNING and records startedAt, and it may admit more when the in-flight limit
held tasks back. Only live tasks (queued or running) are handed to the planner; a task leaves
the inputs once its status is final and its job has ended, which keeps each pass O(live tasks).
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from reconciler.core.incremental import EMPTY, Memo, plan_incremental
from reconciler.core.planner import STOP_WAIT_ENV, Observation, Plan, TaskInput
from reconciler.core.queues import usage
from reconciler.sim.nodes import Nodes
from reconciler.sim.workload import Job
from specs.cluster import META_TASK, RUNNING, STOPPED, SUCCEEDED, Capacity, RayJob, Scaling
from specs.queues.config import QueueConfig
from specs.settings.process import PlanOptions, Settings
from specs.task import arrays
from specs.task.models import Phase
from specs.task.records import Task
from specs.task.status import TaskStatus

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
"""Virtual time 0. Workload times are whole seconds from here."""

MEMORY_BYTES = 1024 * 2**30
"""The simulated cluster's memory. Jobs ask for CPUs only, so this never binds."""

MAX_PASSES_PER_INSTANT = 10_000
"""A guard: the planner must settle at one instant; a livelock would otherwise hang the run."""

CENSUS_SECONDS: float = Settings.census_seconds
"""The loop's default time between two censuses of what every Ray job holds."""

# Event kinds; an end sorts before a timeout due at the same second. NODE: a node comes up, or
# an idle one may go (autoscaling only). CENSUS: a census that shows what declarations do not.
END, TIMEOUT, STOP, NODE, CENSUS = 0, 1, 2, 3, 4


@dataclass
class JobRecord:
    """What happened to one job."""

    job: Job
    start: float | None = None  # virtual seconds, of the first run; None if it never started
    end: float | None = None
    phase: Phase | None = None  # final phase as the planner recorded it
    last_start: float | None = None  # of the run that finished (later than start if preempted)
    preemptions: int = 0
    wasted: float = 0.0  # CPU-seconds of runs thrown away by preemption
    saved: float = 0.0  # seconds of its run a resumable job checkpointed before preemptions
    # (start, end) of each run preemption stopped: the CPUs it held then, and when it queued
    # again (reconciler/sim/teams.py counts held and waiting time from these)
    lost: list[tuple[float, float]] = field(default_factory=list)
    submitted: float | None = None  # its first submission to Ray
    # CPU-seconds of all its runs: declared, from when Ray listed each RUNNING to its end (what
    # the planner counts as held), and held in fact, from when Ray gave it its CPUs to its end
    declared_cpu_seconds: float = 0.0
    held_cpu_seconds: float = 0.0
    ray_wait: float = 0.0  # seconds its runs waited inside Ray for their real use to fit
    inversions: int = 0  # lower-priority jobs submitted after it that Ray started first
    behind_lower: int = 0  # lower-priority jobs submitted before it Ray started while it waited

    @property
    def wait(self) -> float | None:
        return None if self.start is None else self.start - self.job.arrival


@dataclass
class SimResult:
    policy: str
    capacity_cpu: float
    records: list[JobRecord]
    passes: int = 0
    plan_seconds: float = 0.0  # time spent inside the planner
    wall_seconds: float = 0.0  # the whole simulation
    max_live: int = 0  # most tasks handed to one pass
    live_task_passes: int = 0  # sum over passes of the tasks handed in, for a per-task cost
    unfinished: int = 0
    nodes: Nodes | None = None  # with autoscaling: the nodes, for node-hours

    @property
    def pass_ms(self) -> float:
        return 1000 * self.plan_seconds / self.passes if self.passes else 0.0

    @property
    def task_us(self) -> float:
        """Planner time per task per pass, in microseconds."""
        return 1e6 * self.plan_seconds / self.live_task_passes if self.live_task_passes else 0.0


PassObserver = Callable[[float, Plan], None]
"""Called after every pass with the virtual time and the plan (tests check statuses here)."""


def to_task(job: Job) -> Task:
    spec: dict[str, object] = {
        "entrypoint": f"sim {job.name}",
        "priority": job.priority,
        "resources": {"cpu": job.cpu},
        "timeoutSeconds": job.timeout,
        "resumable": job.resumable,
    }
    parts = arrays.split(job.name) if job.array_size else None
    if parts is not None:
        # The element task the store would hand the planner (specs.task.arrays.expand), built
        # directly: expanding the whole array for each element would cost size^2.
        spec["entrypoint"] = f"sim {parts[0]}"
        spec["array"] = {"count": job.array_size, "maxParallel": job.max_parallel}
        env = {arrays.INDEX_VAR: str(parts[1]), arrays.SIZE_VAR: str(job.array_size)}
        spec["runtimeEnv"] = {"env_vars": env}
    return Task.model_validate({"apiVersion": "rayqueue/v1", "kind": "Task", "spec": spec})


@dataclass(frozen=True)
class Census:
    """What Ray held at one census instant (`taken_at`, virtual seconds): by submission id, what
    each live job holds (nothing yet for one waiting inside Ray), and what was available."""

    taken_at: float
    held: dict[str, Capacity]
    available: Capacity


@dataclass
class _Cluster:
    """The simulated Ray cluster and the planner's persistent state (the sidecars)."""

    options: PlanOptions
    capacity: Capacity
    queues: QueueConfig | None = None
    specs: dict[str, TaskInput] = field(default_factory=dict)
    statuses: dict[str, TaskStatus] = field(default_factory=dict)
    jobs: dict[str, RayJob] = field(default_factory=dict)
    events: list[tuple[float, int, str]] = field(default_factory=list)  # (time, kind, sid)
    stopping: set[str] = field(default_factory=set)  # preempted jobs in their grace period
    sigterm: dict[str, float] = field(default_factory=dict)  # preempted job -> when it was told
    graces: dict[str, float] = field(default_factory=dict)  # job -> its grace, from its env
    runs: dict[str, list[str]] = field(default_factory=dict)  # task -> its jobs' ids
    # Inside Ray: the jobs waiting for their real use to fit, in the order submitted; and the
    # real CPUs each started job holds, and since when.
    ray_waiting: list[str] = field(default_factory=list)
    holding: dict[str, float] = field(default_factory=dict)
    began: dict[str, float] = field(default_factory=dict)
    timers: set[str] = field(default_factory=set)  # jobs with a pass due at their timeout
    # The census's period (None: no census, declarations only), the last census, and the
    # instant of the census pass already scheduled.
    census_seconds: float | None = None
    census: Census | None = None
    census_due: float | None = None
    scaling: Scaling | None = None  # what the autoscaler reports, with autoscaling
    scale_request: tuple[Capacity, ...] | None = None  # the last plan's, standing
    deadline: float | None = None  # the last plan's (epoch seconds)
    # the queues' decayed usage, advanced with the simulated clock as serve's loop does
    past: dict[str, Capacity] = field(default_factory=dict)
    held: dict[str, Capacity] = field(default_factory=dict)  # by queue, since `past_at`
    past_at: float = 0.0
    # The planner's memo between passes, and each task's version: a number new whenever the
    # simulator gives the task a spec or a status (`touch`). `unplanned`: the names touched
    # since the last pass (the planner's `changed`).
    memo: Memo = EMPTY
    versions: dict[str, int] = field(default_factory=dict)
    unplanned: set[str] = field(default_factory=set)
    stamp: int = 0

    def touch(self, name: str) -> None:
        self.stamp += 1
        self.versions[name] = self.stamp
        self.unplanned.add(name)

    def forget(self, name: str) -> None:
        """A task leaves the planner's inputs (its status is final and its job has ended)."""
        del self.specs[name], self.statuses[name], self.versions[name]
        self.unplanned.discard(name)


def simulate(
    workload: Sequence[Job],
    policy: str,
    *,
    capacity_cpu: float = 256,
    options: PlanOptions | None = None,
    observer: PassObserver | None = None,
    queues: QueueConfig | None = None,
    nodes: Nodes | None = None,
    census_seconds: float | None = CENSUS_SECONDS,
) -> SimResult:
    """Run `workload` through the real planner under `policy`. Deterministic: no clock, no RNG.
    With `queues`, tasks are admitted per queue (team folders) with fair sharing.

    With preemption on, a preempted job holds its CPUs for its grace period (the one the
    planner gave the job in RAY_JOB_STOP_WAIT_TIME_S, as Ray reads it; the worst case, a job
    that uses all of it), then stops. A plain job's run so far is wasted and it runs again in
    full; a resumable one (`Job.resumable`) saves its state when told, so it loses only the
    grace period and its next run does only what was left.

    With `nodes`, the cluster autoscales: each pass sees the nodes that are up and the
    autoscaler's `Scaling`, and after each instant the autoscaler model reads the plan's
    `scale_request` (a request stands until a plan replaces it, as in Ray); jobs must then
    keep their word (Ray's autoscaler would see a real use the model does not), and the planner
    plans on declarations (no census).

    `census_seconds`: how often the planner learns what Ray says each job holds (module
    docstring); None: never, it plans on what jobs declare.
    """
    if nodes is not None and any(job.real_cpu is not None for job in workload):
        raise ValueError("an autoscaling run takes jobs that hold what they declare")
    if census_seconds is not None and census_seconds <= 0:
        raise ValueError("census_seconds is a period: more than 0, or None for no census")
    began = time.perf_counter()
    options = replace(options or PlanOptions(), policy=policy)
    cluster = _Cluster(options, Capacity(capacity_cpu, 0, MEMORY_BYTES), queues)
    cluster.census_seconds = census_seconds if nodes is None else None
    arrivals = sorted(workload, key=lambda j: (j.arrival, j.name))
    records = {job.name: JobRecord(job) for job in arrivals}
    result = SimResult(policy, capacity_cpu, list(records.values()), nodes=nodes)
    node_events: set[float] = set()
    next_arrival = 0

    while next_arrival < len(arrivals) or cluster.events:
        now = min(
            arrivals[next_arrival].arrival if next_arrival < len(arrivals) else float("inf"),
            cluster.events[0][0] if cluster.events else float("inf"),
        )
        changed = False
        _take_census(cluster, now)  # of Ray as it stood since the last instant
        while next_arrival < len(arrivals) and arrivals[next_arrival].arrival <= now:
            job = arrivals[next_arrival]
            cluster.specs[job.name] = TaskInput(job.name, to_task(job))
            cluster.touch(job.name)
            next_arrival += 1
            changed = True
        while cluster.events and cluster.events[0][0] <= now:
            _, kind, sid = heapq.heappop(cluster.events)
            if kind == NODE:
                changed = True  # capacity grew, or an idle node may go
                continue
            if kind == CENSUS:
                changed = True  # the planner sees what Ray holds beyond the declarations
                continue
            job_now = cluster.jobs.get(sid)
            if job_now is None or job_now.terminal:
                continue  # stale: the job was stopped, or ended, before this event
            if sid in cluster.stopping and kind in (END, STOP):
                # Preempted: gone once the grace is over (or when it ends meanwhile, as the
                # stop would have ended it anyway); everything it did is lost.
                cluster.stopping.discard(sid)
                run_began = _end(cluster, sid, STOPPED, now, records)
                _lose(
                    records[job_now.metadata[META_TASK]], run_began, now, cluster.sigterm.pop(sid)
                )
            elif kind == END:
                _end(cluster, sid, SUCCEEDED, now, records)
            changed = True  # a timeout needs a pass to be noticed; the planner stops the job
        if changed and nodes is not None:
            cluster.capacity = nodes.capacity(now)
            cluster.scaling = nodes.scaling(now)
        if changed:
            _ray_starts(cluster, records, now)  # what ended is free for the jobs waiting in Ray
        if changed:
            _settle(cluster, now, records, result, observer)
            _census_pass(cluster, records, now)
        if changed and nodes is not None:
            running = {
                sid: records[j.metadata[META_TASK]].job.cpu
                for sid, j in cluster.jobs.items()
                if sid in cluster.holding
            }
            nodes.place(running, now)
            nodes.scale(cluster.scale_request, now)
            # A pass at the plan's deadline too, as the loop makes: a request for nodes times
            # out (ScaleUpTimeout) and its backoff ends there. Whole seconds keep the clock exact.
            deadline = cluster.deadline
            replan = None if deadline is None else math.ceil(deadline - EPOCH_UNIX + 1e-3)
            for due in (nodes.next_due(now), replan):
                if due is not None and due > now and due not in node_events:
                    node_events.add(due)
                    heapq.heappush(cluster.events, (due, NODE, ""))

    result.unfinished = sum(1 for r in records.values() if r.end is None)
    result.wall_seconds = time.perf_counter() - began
    return result


EPOCH_UNIX = EPOCH.timestamp()


def _take_census(cluster: _Cluster, now: float) -> None:
    """The census of the last census instant at or before `now`, if one fell since the last
    taken: Ray has stood as it is since the last instant, the events at `now` not yet in."""
    period = cluster.census_seconds
    if period is None:
        return
    instant = math.floor(now / period) * period
    last = cluster.census
    if last is not None and last.taken_at >= instant:
        return
    used = sum(cluster.holding.values())
    capacity = cluster.capacity
    available = Capacity(capacity.cpu - used, capacity.gpu, capacity.memory)
    cluster.census = Census(instant, _held_now(cluster), available)


def _held_now(cluster: _Cluster) -> dict[str, Capacity]:
    """What each live job holds in Ray now: its real use once started, nothing while it waits."""
    held = {sid: Capacity(cpu, 0, 0) for sid, cpu in cluster.holding.items()}
    held.update((sid, Capacity()) for sid in cluster.ray_waiting)
    return held


def _census_pass(cluster: _Cluster, records: dict[str, JobRecord], now: float) -> None:
    """A pass at the next census instant, when that census will show the planner something
    new: Ray holds other than the last census saw, and other than its jobs declare (a job
    holds more or less, or waits inside Ray). It is the loop's first pass to see it."""
    period = cluster.census_seconds
    if period is None:
        return
    due = (math.floor(now / period) + 1) * period
    if cluster.census_due == due:
        return
    last = cluster.census
    if last is not None and last.held == _held_now(cluster):
        return
    if cluster.ray_waiting or any(
        cpu != records[cluster.jobs[sid].metadata[META_TASK]].job.cpu
        for sid, cpu in cluster.holding.items()
    ):
        cluster.census_due = due
        heapq.heappush(cluster.events, (due, CENSUS, ""))


def _observe(cluster: _Cluster) -> Observation:
    """The pass's Observation: Ray's jobs, and with a census, what it says each job holds.
    A job the census saw that has since left the planner's inputs (ended, and its task
    retired) gives back what it held, as Ray still lists an ended job and the planner adds
    back what an ended job held."""
    jobs = dict(cluster.jobs)  # a copy: the memo keeps it, the simulator changes its own
    census = cluster.census
    if census is None:
        return Observation(jobs, cluster.capacity, scaling=cluster.scaling)
    held = {sid: amount for sid, amount in census.held.items() if sid in jobs}
    gone = [amount for sid, amount in sorted(census.held.items()) if sid not in jobs]
    available = sum(gone, census.available)
    return Observation(
        jobs, cluster.capacity, scaling=cluster.scaling, held=held, ray_available=available
    )


def _lose(record: JobRecord, began: float | None, now: float, told: float) -> None:
    """A preempted run that Ray started at `began` ended at `now`, told to stop at `told`. A
    plain job loses all it ran; a resumable one saved its progress when told and loses only the
    time since (the grace). A run still waiting inside Ray (`began` None) ran nothing to lose."""
    if began is None:
        return
    record.lost.append((began, now))
    if record.job.resumable:
        record.saved += told - began
        record.wasted += record.job.cpu * (now - told)
    else:
        record.wasted += record.job.cpu * (now - began)


def _grace(request_env: object, default: float) -> float:
    """The grace period Ray gives a stopped job: the runtime_env's RAY_JOB_STOP_WAIT_TIME_S
    that the planner set, else (a job nothing could preempt) the configured default."""
    env_vars = request_env.get("env_vars") if isinstance(request_env, dict) else None
    value = env_vars.get(STOP_WAIT_ENV) if isinstance(env_vars, dict) else None
    try:
        return float(value) if value is not None else default
    except ValueError:
        return default


def _unix(seconds: float) -> float:
    return EPOCH_UNIX + seconds


def _end(
    cluster: _Cluster, sid: str, status: str, now: float, records: dict[str, JobRecord]
) -> float | None:
    """Ray ends job `sid` at `now` with `status`: it frees what it held, or leaves the jobs
    waiting inside Ray. Its CPU-seconds are counted; returns when Ray had started it (None: it
    was still waiting)."""
    job = cluster.jobs[sid]
    cluster.jobs[sid] = replace(job, status=status, end_time=_unix(now))
    record = records[job.metadata[META_TASK]]
    record.declared_cpu_seconds += record.job.cpu * (now - ((job.start_time or 0) - EPOCH_UNIX))
    began = cluster.began.pop(sid, None)
    held = cluster.holding.pop(sid, 0.0)
    if began is not None:
        record.held_cpu_seconds += held * (now - began)
    elif sid in cluster.ray_waiting:
        cluster.ray_waiting.remove(sid)
        record.ray_wait += now - ((job.start_time or 0) - EPOCH_UNIX)
    return began


def _ray_starts(cluster: _Cluster, records: dict[str, JobRecord], now: float) -> None:
    """Ray gives its free CPUs to the jobs waiting in it, in the order submitted, to each whose
    real use fits; then counts the priority inversions of those it started (module docstring)."""
    if not cluster.ray_waiting:
        return
    free = cluster.capacity.cpu - sum(cluster.holding.values())
    started: list[tuple[int, JobRecord]] = []
    waiting: list[tuple[int, str, JobRecord]] = []
    for order, sid in enumerate(cluster.ray_waiting):
        record = records[cluster.jobs[sid].metadata[META_TASK]]
        if record.job.held_cpu <= free + 1e-9:
            free -= record.job.held_cpu
            _run(cluster, sid, record, now)
            started.append((order, record))
        else:
            waiting.append((order, sid, record))
            _time_out_at(cluster, sid, record.job.timeout, None)
    cluster.ray_waiting = [sid for _, sid, _ in waiting]
    for order, _, record in waiting:
        for start_order, other in started:
            if other.job.priority < record.job.priority:
                if order < start_order:
                    record.inversions += 1
                else:
                    record.behind_lower += 1


def _run(cluster: _Cluster, sid: str, record: JobRecord, now: float) -> None:
    """Ray gives job `sid` its real CPUs at `now`: its work starts, and ends a run later."""
    cluster.holding[sid] = record.job.held_cpu
    cluster.began[sid] = now
    record.ray_wait += now - ((cluster.jobs[sid].start_time or 0) - EPOCH_UNIX)
    record.start = now if record.start is None else record.start
    record.last_start = now
    left = record.job.run - record.saved  # a resumed job does only what was left
    heapq.heappush(cluster.events, (now + left, END, sid))
    _time_out_at(cluster, sid, record.job.timeout, now + left)


def _time_out_at(cluster: _Cluster, sid: str, timeout: float, end: float | None) -> None:
    """A pass when the planner will time job `sid` out, if its run may end after that (at `end`;
    None: it waits inside Ray, and may never start). The planner counts a job's timeout from
    when Ray listed it RUNNING, and times it out once it ran *longer* than that."""
    if sid in cluster.timers:
        return
    job = cluster.jobs[sid]
    listed = (job.start_time or 0) - EPOCH_UNIX
    if timeout > 0 and (end is None or listed + timeout < end):
        cluster.timers.add(sid)
        heapq.heappush(cluster.events, (listed + timeout + 1, TIMEOUT, sid))


def _settle(
    cluster: _Cluster,
    now: float,
    records: dict[str, JobRecord],
    result: SimResult,
    observer: PassObserver | None,
) -> None:
    """Run passes at one instant until the planner neither submits nor stops anything."""
    for _ in range(MAX_PASSES_PER_INSTANT):
        p = _plan(cluster, now, result)
        if observer is not None:
            observer(now, p)
        _start(cluster, p, records, now)
        acted = _stop(cluster, p, records, now)
        _ray_starts(cluster, records, now)
        _retire(cluster, p, records, now)
        if not p.submits and not acted:
            return
    raise RuntimeError(f"planner did not settle at t={now}s after {MAX_PASSES_PER_INSTANT} passes")


def _plan(cluster: _Cluster, now: float, result: SimResult) -> Plan:
    """One pass of the planner at `now`, its statuses taken in (each changed one a new
    version) and its cost counted."""
    observed = _observe(cluster)
    live = len(cluster.specs)
    began = time.perf_counter()
    past = None
    if cluster.queues is not None:
        half_life = cluster.queues.spec.fair_sharing.usage_half_life
        names = cluster.queues.queue_names()
        elapsed = now - cluster.past_at
        cluster.past = usage.advance_all(cluster.past, cluster.held, elapsed, half_life, names)
        cluster.past_at = now
        past = usage.Tracked(cluster.past, EPOCH_UNIX)  # tracked since the run began
    p, cluster.memo = plan_incremental(
        cluster.memo,
        cluster.specs,
        cluster.statuses,
        observed,
        EPOCH + timedelta(seconds=now),
        cluster.options,
        queues=cluster.queues,
        usage=past,
        versions=dict(cluster.versions),
        changed=cluster.unplanned,
    )
    cluster.unplanned = set()
    if p.summary is not None and p.summary.queues is not None:
        cluster.held = {n: s.usage for n, s in p.summary.queues.states.items()}
    result.plan_seconds += time.perf_counter() - began
    result.passes += 1
    result.live_task_passes += live
    result.max_live = max(result.max_live, live)
    for name in p.write_classes:  # the statuses the plan changed
        cluster.statuses[name] = p.statuses[name]
        cluster.touch(name)
    cluster.deadline = p.deadline
    if p.scale_request is not None:
        cluster.scale_request = p.scale_request
    return p


def _start(cluster: _Cluster, p: Plan, records: dict[str, JobRecord], now: float) -> None:
    """The plan's submits: Ray lists each RUNNING at once, and starts its work when its real use
    fits (`_ray_starts`, which the pass runs next)."""
    default_grace = cluster.options.preemption_grace_seconds
    for submit in p.submits:
        sid = submit.request.submission_id
        record = records[submit.task]
        cluster.runs.setdefault(submit.task, []).append(sid)
        # The next pass sees the job RUNNING and records startedAt.
        cluster.jobs[sid] = RayJob(
            sid,
            RUNNING,
            submit.request.entrypoint,
            start_time=_unix(now),
            metadata=dict(submit.request.metadata),
        )
        record.submitted = now if record.submitted is None else record.submitted
        cluster.graces[sid] = _grace(submit.request.runtime_env, default_grace)
        cluster.ray_waiting.append(sid)


def _stop(cluster: _Cluster, p: Plan, records: dict[str, JobRecord], now: float) -> bool:
    """The plan's stops: a preempted job keeps its CPUs for its grace period, any other stops
    at once. Whether any stop changed something (one of a job already in its grace period
    does not)."""
    default_grace = cluster.options.preemption_grace_seconds
    victims = {v for d in p.preemptions for v in d.victims}
    preempted = {s.submission_id for s in p.stops if s.task in victims}
    acted = False
    for decision in p.preemptions:
        for victim in decision.victims:
            records[victim].preemptions += 1
    for stop in p.stops:
        sid = stop.submission_id
        job = cluster.jobs.get(sid)
        if job is None or job.terminal or sid in cluster.stopping:
            continue
        acted = True
        grace = cluster.graces.get(sid, default_grace)
        if sid in preempted and grace > 0:
            cluster.stopping.add(sid)
            cluster.sigterm[sid] = now
            heapq.heappush(cluster.events, (now + grace, STOP, sid))
            if sid in cluster.ray_waiting:
                # Told to stop before Ray gave it its CPUs: it will never take them.
                cluster.ray_waiting.remove(sid)
                record = records[job.metadata[META_TASK]]
                record.ray_wait += now - ((job.start_time or 0) - EPOCH_UNIX)
        elif sid in preempted:
            _lose(
                records[job.metadata[META_TASK]],
                _end(cluster, sid, STOPPED, now, records),
                now,
                now,
            )
        else:
            _end(cluster, sid, STOPPED, now, records)
    return acted


def _retire(cluster: _Cluster, p: Plan, records: dict[str, JobRecord], now: float) -> None:
    """Each task whose status is final and whose job has ended leaves the planner's inputs."""
    for name, status in p.statuses.items():
        body = status.status
        if not body.phase.finished:
            continue
        run_id = body.submission_id
        job = cluster.jobs.get(run_id) if run_id else None
        if job is not None and not job.terminal:
            continue  # still holds resources in Ray until our stop lands
        record = records[name]
        record.phase = body.phase
        record.end = (job.end_time - EPOCH.timestamp()) if job and job.end_time else now
        cluster.forget(name)
        for sid in cluster.runs.pop(name, []):
            cluster.jobs.pop(sid, None)
            cluster.graces.pop(sid, None)
            cluster.timers.discard(sid)
