"""Prometheus metrics of one rayqueue process, in their own registry (never the global one).

Names follow Kueue's where Kueue has one (`kueue_pending_workloads` -> `rayqueue_pending_tasks`,
`kueue_admission_wait_time_seconds`, ...), with a `rayqueue_` prefix. No metric carries a task
name: every label (queue, reason, phase, priority, resource, call, result) takes a bounded set
of values, so the number of series does not grow with the number of tasks.

Gauges are recomputed from all statuses each pass (one walk over what the planner returned);
counters and the admission-wait histogram count transitions between the statuses before and
after a pass, so a restart that re-reads finished sidecars counts nothing twice.

Every label set of a counter or histogram that can be known in advance (each queue of the
configuration x phase, reason, priority; each Ray call x result) is created at 0 before its
first event: Prometheus' `rate()` and `increase()` see a counter's first increment only if a
sample before it exists, so without the 0 the first failure of a queue would never show.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from reconciler.core.task import lifecycle
from reconciler.shell.ops.counts import Tally
from specs.cluster import (
    Capacity,
    JobConflict,
    JobNotFound,
    RayAdapter,
    RayJob,
    RayRequestError,
    RayUnavailable,
    SubmitRequest,
    TailLimits,
)
from specs.queues.config import DEFAULT_QUEUE, UNLIMITED, QueueConfig
from specs.task.models import FINISHED, ConditionType, Phase, Reason
from specs.task.status import TaskStatus

T = TypeVar("T")


RESOURCES = ("cpu", "gpu", "memory")
# Waits range from a second (an idle cluster) to days (a big job behind a busy queue).
WAIT_BUCKETS = (1, 5, 15, 30, 60, 300, 900, 1800, 3600, 3 * 3600, 12 * 3600, 86400, 3 * 86400)
# A pass over a few tasks takes milliseconds; one over a big folder, seconds.
PASS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
WAITING = frozenset({Phase.QUEUED, Phase.UNSCHEDULABLE})
PRIORITIES = tuple(str(p) for p in range(10))  # spec.priority is 0..9
# The Preempted condition's reasons, and why a run that held resources was stopped and put back
# (Kueue's eviction reasons: Preempted, and Deactivated for a suspend).
# A run its queue's `overuse: Stop` stopped counts as a preemption with reason Overusing.
PREEMPTION_REASONS = (
    Reason.WITHIN_QUEUE.value,
    Reason.RECLAIM.value,
    Reason.IN_COHORT_FAIR_SHARING.value,
    Reason.OVERUSING.value,
)
EVICTION_REASONS = (
    Reason.PREEMPTED.value,
    Reason.SPEC_CHANGED.value,
    Reason.SUSPENDED.value,
    Reason.OVERUSING.value,
)
CALLS = ("list_jobs", "capacity", "submit", "stop", "delete", "logs", "job_info", "log_tail")
RESULTS = ("ok", "unavailable", "not_found", "conflict", "refused", "error")
PASS_KINDS = ("walk", "events", "still")

QueueOf = Callable[[TaskStatus], str]


def status_queue(status: TaskStatus) -> str:
    """The team queue the planner put the task in; without a queue config, all are in one."""
    return status.status.queue or DEFAULT_QUEUE


class QueueHoldings(Protocol):
    """One queue's live runs as the last census saw them (runhistory.QueueUse), as far as
    metrics read it."""

    @property
    def declared(self) -> Capacity: ...
    @property
    def held(self) -> Capacity: ...


class QueueFigures(Protocol):
    """One queue's state after a pass (fairshare.QueueState), as far as metrics read it."""

    @property
    def nominal(self) -> Capacity: ...
    @property
    def usage(self) -> Capacity: ...
    @property
    def borrowed(self) -> Capacity: ...
    @property
    def share(self) -> float: ...


@dataclass(frozen=True)
class Exposition:
    """What /metrics answers: the text and its content type."""

    body: bytes
    content_type: str


class QueueMetrics:
    """Every metric of the process; `registry` is what /metrics exposes."""

    def __init__(self, version: str, *, queue_of: QueueOf = status_queue) -> None:
        # No `*_created` series: neither Kueue nor the dashboard has a use for them. The switch
        # is prometheus_client's, process-wide; this process's only registry is this one.
        disable_created_metrics()  # type: ignore[no-untyped-call]  # (untyped upstream)
        self.queue_of = queue_of
        self.registry = CollectorRegistry()
        r = self.registry
        self.pending = Gauge(
            "rayqueue_pending_tasks",
            "Tasks waiting to be admitted, by queue and reason (Queued and Unschedulable)",
            ["queue", "reason"],
            registry=r,
        )
        self.running = Gauge(
            "rayqueue_running_tasks",
            "Tasks whose run holds resources (Starting or Running), by queue",
            ["queue"],
            registry=r,
        )
        self.admission_wait = Histogram(
            "rayqueue_admission_wait_time_seconds",
            "Time from queuedAt to the submission to Ray, by queue and priority",
            ["queue", "priority"],
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        # Kueue's kueue_admitted_workloads_total and kueue_evicted_workloads_total.
        self.admitted = Counter(
            "rayqueue_admitted_tasks",
            "Runs submitted to Ray (admitted), by queue",
            ["queue"],
            registry=r,
        )
        self.evicted = Counter(
            "rayqueue_evicted_tasks",
            "Runs that held resources and were stopped and put back, by queue and reason "
            "(Preempted, SpecChanged, Suspended)",
            ["queue", "reason"],
            registry=r,
        )
        self.finished = Counter(
            "rayqueue_finished_tasks",
            "Runs that ended, by queue and final phase",
            ["queue", "phase"],
            registry=r,
        )
        self.retries = Counter(
            "rayqueue_retries",
            "Runs queued again by a retry policy (spec.retry: failed, timed out or lost runs)",
            ["queue"],
            registry=r,
        )
        # Kueue's kueue_preempted_workloads_total, by the victim's queue (the label set stays
        # bounded: queues are admin-defined) and the Preempted condition's reason.
        self.preempted = Counter(
            "rayqueue_preempted_tasks",
            "Runs stopped to make room for a more urgent task, by the victim's queue and reason "
            "(WithinQueue, Reclaim); never counted as failures",
            ["queue", "reason"],
            registry=r,
        )
        self.overusing = Gauge(
            "rayqueue_overusing_tasks",
            "Running tasks whose run holds more than it declares beyond the margin (the "
            "Overusing condition), by queue",
            ["queue"],
            registry=r,
        )
        self.stopped_in_ray = Counter(
            "rayqueue_stopped_in_ray_tasks",
            "Runs whose Ray job was stopped by someone other than rayqueue (another Ray "
            "client: reason StoppedInRay), by queue",
            ["queue"],
            registry=r,
        )
        self.capacity = Gauge(
            "rayqueue_cluster_capacity",
            "Total resources of alive Ray nodes (memory in bytes)",
            ["resource"],
            registry=r,
        )
        self.reserved = Gauge(
            "rayqueue_cluster_reserved",
            "Resources this queue's Starting and Running tasks are charged: the more of what "
            "they declare and what the census saw them hold (memory in bytes)",
            ["resource"],
            registry=r,
        )
        self.pass_duration = Histogram(
            "rayqueue_pass_duration_seconds",
            "Wall time of one reconcile pass",
            buckets=PASS_BUCKETS,
            registry=r,
        )
        self.deferred_writes = Gauge(
            "rayqueue_deferred_status_writes",
            "Sidecar writes kept in memory for a later pass (new tasks' first records, queue "
            "positions); a backlog after many new specs drains status_write_budget per pass",
            registry=r,
        )
        self.passes = Counter(
            "rayqueue_passes",
            "Reconcile passes by kind: walk (a full walk of the folder), events (only what "
            "file events named was read), still (nothing was read; the last plan stood)",
            ["kind"],
            registry=r,
        )
        self.ray_calls = Counter(
            "rayqueue_ray_calls",
            "Calls to the Ray dashboard, by call and result",
            ["call", "result"],
            registry=r,
        )
        self.ray_available = Gauge(
            "rayqueue_ray_available",
            "1 if the last pass could list Ray's jobs and capacity, else 0",
            registry=r,
        )
        # Per team queue (admin-defined, so few): Kueue's cluster_queue_nominal_quota,
        # _resource_usage, _borrowing_limit, _lending_limit and _weighted_share. The share is
        # the dominant one over all resources, so it has no resource label (as in Kueue).
        self.queue_nominal = Gauge(
            "rayqueue_queue_nominal_quota",
            "A team queue's nominal quota, resolved against capacity (memory in bytes)",
            ["queue", "resource"],
            registry=r,
        )
        self.queue_usage = Gauge(
            "rayqueue_queue_resource_usage",
            "Resources declared by a team queue's Starting and Running tasks (memory in bytes)",
            ["queue", "resource"],
            registry=r,
        )
        # A name that does not follow Kueue's; still served so existing dashboards and alerts work.
        self.queue_usage_deprecated = Gauge(
            "rayqueue_queue_usage",
            "Deprecated: the same as rayqueue_queue_resource_usage, which replaces it",
            ["queue", "resource"],
            registry=r,
        )
        self.queue_borrowed = Gauge(
            "rayqueue_queue_borrowed",
            "Usage of a team queue beyond its nominal quota (memory in bytes)",
            ["queue", "resource"],
            registry=r,
        )
        self.queue_borrowing_limit = Gauge(
            "rayqueue_queue_borrowing_limit",
            "The most a team queue may use above its nominal quota (_queues.yaml "
            "borrowingLimit; memory in bytes); no series for a resource without a limit",
            ["queue", "resource"],
            registry=r,
        )
        self.queue_lending_limit = Gauge(
            "rayqueue_queue_lending_limit",
            "The most of a team queue's idle quota others may borrow (_queues.yaml "
            "lendingLimit; memory in bytes); no series for a resource without a limit",
            ["queue", "resource"],
            registry=r,
        )
        self.queue_share = Gauge(
            "rayqueue_queue_weighted_share",
            "A team queue's dominant share of what it borrows, divided by its weight",
            ["queue"],
            registry=r,
        )
        self.queue_declared = Gauge(
            "rayqueue_queue_declared",
            "What a team queue's live runs declare, as the last census saw them (memory in "
            "bytes), by queue and resource; compare rayqueue_queue_held",
            ["queue", "resource"],
            registry=r,
        )
        self.queue_held = Gauge(
            "rayqueue_queue_held",
            "What Ray says a team queue's live runs hold at the last census (placement groups, "
            "actors, running tasks; memory in bytes), by queue and resource",
            ["queue", "resource"],
            registry=r,
        )
        self._held_seen: set[str] = set()
        self._queues_seen: set[str] = set()
        self._limits_seen: set[tuple[Gauge, str, str]] = set()
        self._config: QueueConfig | None = None
        self._declared: set[str] = set()
        build = Gauge(
            "rayqueue_build_info", "Always 1; the version is the label", ["version"], registry=r
        )
        build.labels(version=version).set(1)
        self._pending_seen: set[tuple[str, str]] = set()
        # Each status's gauge: ("pending", queue, reason), ("running", queue, ""), or none.
        self._tally: Tally[tuple[str, str, str]] = Tally(self._gauge_of)
        self._overusing_tally: Tally[str] = Tally(self._overusing_of)
        self._overusing_seen: set[str] = set()
        self._running_seen: set[str] = set()
        for kind in PASS_KINDS:
            self.passes.labels(kind)
        for call in CALLS:
            for result in RESULTS:
                self.ray_calls.labels(call, result)
        self.declare_queues([DEFAULT_QUEUE])

    # -- label sets known in advance -------------------------------------------------------------
    def declare_queues(self, queues: Iterable[str]) -> None:
        """Create every per-queue counter and histogram label set at 0 (once per queue).

        A queue that leaves the configuration keeps its counters: they only ever grow, and
        its series simply stop changing.
        """
        for queue in queues:
            if queue in self._declared:
                continue
            self._declared.add(queue)
            self.admitted.labels(queue)
            self.retries.labels(queue)
            self.stopped_in_ray.labels(queue)
            for phase in sorted(FINISHED):
                self.finished.labels(queue, phase.value)
            for reason in PREEMPTION_REASONS:
                self.preempted.labels(queue, reason)
            for reason in EVICTION_REASONS:
                self.evicted.labels(queue, reason)
            for priority in PRIORITIES:
                self.admission_wait.labels(queue, priority)

    def observe_config(self, config: QueueConfig | None) -> None:
        """The queue configuration in force: its queues' label sets, and the limits it sets.

        Called every pass; does work only when the configuration object changed (a new read).
        """
        if config is self._config:
            return
        self._config = config
        limits: dict[tuple[Gauge, str, str], float] = {}
        if config is not None:
            self.declare_queues(config.queue_names())
            sharing = [(q.name, q) for q in config.spec.queues]
            for queue, entry in [*sharing, (DEFAULT_QUEUE, config.spec.default)]:
                for gauge, limit in (
                    (self.queue_borrowing_limit, entry.borrowing_limit),
                    (self.queue_lending_limit, entry.lending_limit),
                ):
                    bounds = limit.capacity()
                    for resource in RESOURCES:
                        amount = getattr(bounds, resource)
                        if amount != UNLIMITED:
                            limits[(gauge, queue, resource)] = amount
        for gauge, queue, resource in self._limits_seen - limits.keys():
            gauge.remove(queue, resource)
        for (gauge, queue, resource), amount in limits.items():
            gauge.labels(queue, resource).set(amount)
        self._limits_seen = set(limits)

    # -- per pass --------------------------------------------------------------------------------
    def observe_pass(
        self,
        before: Mapping[str, TaskStatus],
        after: Mapping[str, TaskStatus],
        *,
        capacity: Capacity | None,
        reserved: Capacity,
        ray_available: bool,
        priorities: Mapping[str, int] | None = None,
        submitted: AbstractSet[str] = frozenset(),
        changed: Collection[str] | None = None,
    ) -> None:
        """Gauges from `after`; counters from what changed between `before` and `after`.

        `priorities` maps task names to their spec's priority (statuses do not carry it);
        `submitted` names the tasks submitted to Ray in this pass, so that a task admitted in
        the pass where it first appears (no status before) is timed too. `changed`: the names
        whose status changed (the plan's write_classes); only those are looked at, the gauges
        kept as counts between passes (None: every status, as on a full walk).
        """
        priorities = priorities or {}
        self._tally.update(after, changed)
        pending: dict[tuple[str, str], int] = {}
        running: dict[str, int] = {}
        for (kind, queue, reason), count in self._tally.counts.items():
            if kind == "pending":
                pending[(queue, reason)] = count
            else:
                running[queue] = count
        for name in after if changed is None else changed:
            status = after.get(name)
            if status is None:
                continue  # gone
            queue = self.queue_of(status)
            old = before.get(name)
            if old is not status:  # the planner hands back unchanged statuses as the same object
                priority = priorities.get(name, 0)
                if old is None:
                    if name in submitted:
                        self._count_admission(status, queue, priority)
                else:
                    self._count_transition(old, status, queue, priority)
        # Label sets seen once stay at 0 rather than vanish, so graphs drop to zero, not to a gap;
        # reasons and queues are few, so this stays bounded.
        for key in self._pending_seen - pending.keys():
            self.pending.labels(*key).set(0)
        for key, count in pending.items():
            self.pending.labels(*key).set(count)
        for queue in self._running_seen - running.keys():
            self.running.labels(queue).set(0)
        for queue, count in running.items():
            self.running.labels(queue).set(count)
        self._pending_seen |= pending.keys()
        self._running_seen |= running.keys()
        self._overusing_tally.update(after, changed)
        overusing = {q: n for q, n in self._overusing_tally.counts.items() if n}
        for queue in self._overusing_seen - overusing.keys():
            self.overusing.labels(queue).set(0)
        for queue, count in overusing.items():
            self.overusing.labels(queue).set(count)
        self._overusing_seen |= overusing.keys()
        if capacity is not None:
            for resource in RESOURCES:
                self.capacity.labels(resource).set(getattr(capacity, resource))
        for resource in RESOURCES:
            self.reserved.labels(resource).set(getattr(reserved, resource))
        self.ray_available.set(1 if ray_available else 0)

    def recount(self) -> None:
        """The next observe_pass counts the gauges from every status."""
        self._tally.stale()
        self._overusing_tally.stale()

    def _overusing_of(self, status: TaskStatus) -> str | None:
        body = status.status
        if body.phase is not Phase.RUNNING or not body.conditions:
            return None
        for cond in body.conditions:
            if cond.type == ConditionType.OVERUSING and cond.reason == Reason.OVERUSING:
                return self.queue_of(status)
        return None

    def _gauge_of(self, status: TaskStatus) -> tuple[str, str, str] | None:
        body = status.status
        if body.phase in WAITING:
            return ("pending", self.queue_of(status), body.reason or body.phase.value)
        if body.phase.active:
            return ("running", self.queue_of(status), "")
        return None

    def observe_queues(self, states: Mapping[str, QueueFigures]) -> None:
        """The team queues' gauges from the pass's queue states; `{}` when none are configured.

        A queue removed from the config loses its series (it no longer exists), unlike a
        pending reason, which drops to 0.
        """
        per_resource = (
            self.queue_nominal,
            self.queue_usage,
            self.queue_usage_deprecated,
            self.queue_borrowed,
        )
        for queue in self._queues_seen - states.keys():
            for resource in RESOURCES:
                for gauge in per_resource:
                    gauge.remove(queue, resource)
            self.queue_share.remove(queue)
        self.declare_queues(states)
        for queue, state in states.items():
            for resource in RESOURCES:
                self.queue_nominal.labels(queue, resource).set(getattr(state.nominal, resource))
                usage = getattr(state.usage, resource)
                self.queue_usage.labels(queue, resource).set(usage)
                self.queue_usage_deprecated.labels(queue, resource).set(usage)
                self.queue_borrowed.labels(queue, resource).set(getattr(state.borrowed, resource))
            self.queue_share.labels(queue).set(state.share)
        self._queues_seen = set(states)

    def observe_holdings(self, queues: Mapping[str, QueueHoldings]) -> None:
        """Each queue's declared and held totals at the last census; a queue without live
        runs drops to 0."""
        for queue in self._held_seen - queues.keys():
            for resource in RESOURCES:
                self.queue_declared.labels(queue, resource).set(0)
                self.queue_held.labels(queue, resource).set(0)
        for queue, use in queues.items():
            for resource in RESOURCES:
                self.queue_declared.labels(queue, resource).set(getattr(use.declared, resource))
                self.queue_held.labels(queue, resource).set(getattr(use.held, resource))
        self._held_seen |= queues.keys()

    def _count_admission(self, new: TaskStatus, queue: str, priority: int) -> None:
        """A submission to Ray: counted, and its wait from queuedAt observed."""
        body = new.status
        if body.submitted_at is None:
            return
        self.declare_queues([queue])
        self.admitted.labels(queue).inc()
        if body.queued_at is not None:
            wait = (body.submitted_at - body.queued_at).total_seconds()
            self.admission_wait.labels(queue, str(priority)).observe(max(wait, 0.0))

    def _count_transition(
        self, old: TaskStatus, new: TaskStatus, queue: str, priority: int
    ) -> None:
        """What changed between two statuses of a task. A status with none before it (a
        restart's first read, a new task) is history, not news, except a submission in this
        pass (observe_pass)."""
        body, was = new.status, old.status
        self.declare_queues([queue])
        if body.phase in FINISHED and (was.phase != body.phase or was.run != body.run):
            self.finished.labels(queue, body.phase.value).inc()
        if body.submitted_at is not None and was.submitted_at != body.submitted_at:
            self._count_admission(new, queue, priority)
        if (
            was.phase.active
            and not body.phase.active
            and body.reason in EVICTION_REASONS
            and body.reason != Reason.OVERUSING  # counted with its preemption below
        ):
            self.evicted.labels(queue, body.reason).inc()
        if lifecycle.stopped_outside(was, body):
            self.stopped_in_ray.labels(queue).inc()
        # spec.retry counts in `retries` (reset when the user asks for a new run: no decrease
        # is counted); sidecars of the earlier format hold the Lost-only retries in `lost_restarts`.
        added = max(body.retries - was.retries, 0) + max(body.lost_restarts - was.lost_restarts, 0)
        if added:
            self.retries.labels(queue).inc(added)
        if body.preemptions > was.preemptions:
            overused = any(
                c.type == ConditionType.OVERUSING and c.reason == Reason.OVERUSE_STOP
                for c in body.conditions
            )
            reason = (
                Reason.OVERUSING.value
                if overused
                else next(
                    (c.reason for c in body.conditions if c.type == ConditionType.PREEMPTED),
                    "Unknown",
                )
            )
            self.preempted.labels(queue, reason).inc(body.preemptions - was.preemptions)
            if overused and was.phase.active:  # its reason is then why it waits
                self.evicted.labels(queue, reason).inc()

    def count_pass(self, kind: str) -> None:
        self.passes.labels(kind=kind).inc()

    def time_pass(self) -> Any:
        """`with metrics.time_pass(): ...` observes the block's wall time."""
        return self.pass_duration.time()

    def exposition(self) -> Exposition:
        return Exposition(generate_latest(self.registry), CONTENT_TYPE_LATEST)


# -- Ray calls ---------------------------------------------------------------------------------


def result_of(exc: BaseException | None) -> str:
    """A bounded name for how a call ended."""
    if exc is None:
        return "ok"
    if isinstance(exc, RayUnavailable):
        return "unavailable"
    if isinstance(exc, JobNotFound):
        return "not_found"
    if isinstance(exc, JobConflict):
        return "conflict"
    if isinstance(exc, RayRequestError):
        return "refused"
    return "error"


class CountingRayAdapter:
    """A RayAdapter that counts each call by name and result, and otherwise passes through.

    Wraps the adapter rather than editing it, so the fake and the real one are counted alike.
    """

    def __init__(self, inner: RayAdapter, metrics: QueueMetrics) -> None:
        self.inner = inner
        self._calls = metrics.ray_calls

    @contextmanager
    def _counted(self, call: str) -> Iterator[None]:
        try:
            yield
        except BaseException as exc:
            self._calls.labels(call, result_of(exc)).inc()
            raise
        self._calls.labels(call, "ok").inc()

    def list_jobs(self) -> list[RayJob]:
        with self._counted("list_jobs"):
            return list(self.inner.list_jobs())

    def capacity(self) -> Capacity:
        with self._counted("capacity"):
            return self.inner.capacity()

    def submit(self, request: SubmitRequest) -> None:
        with self._counted("submit"):
            self.inner.submit(request)

    def stop(self, submission_id: str) -> None:
        with self._counted("stop"):
            self.inner.stop(submission_id)

    def delete(self, submission_id: str) -> None:
        with self._counted("delete"):
            self.inner.delete(submission_id)

    def logs(self, submission_id: str) -> str:
        with self._counted("logs"):
            return self.inner.logs(submission_id)

    def job_info(self, submission_id: str) -> RayJob:
        with self._counted("job_info"):
            return self.inner.job_info(submission_id)

    def log_tail(self, submission_id: str, limits: TailLimits) -> str:
        with self._counted("log_tail"):
            return self.inner.log_tail(submission_id, limits)

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.inner, name)  # AttributeError when the inner adapter has none
        if name == "look_up_jobs":  # the loop's polls between listings (shell/loop/jobview.py)
            return self._counted_look_up(found)
        # Anything else beyond the protocol (tail_logs, close, ...) is not counted.
        return found

    def _counted_look_up(
        self, look_up: Callable[[Iterable[str]], Mapping[str, RayJob | None]]
    ) -> Callable[[Iterable[str]], Mapping[str, RayJob | None]]:
        def counted(submission_ids: Iterable[str]) -> Mapping[str, RayJob | None]:
            with self._counted("look_up_jobs"):
                return look_up(submission_ids)

        return counted
