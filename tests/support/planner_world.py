"""The pure planner's harness: Task builders and a PlanWorld that applies each plan the way the
loop and Ray would, so a test can run several passes on a datetime clock without a Reconciler.
(The Reconciler-level harness is `tests.support.world.World`.)"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from reconciler.core.planner import Observation, Plan, TaskInput, plan
from specs.cluster import FAILED, PENDING, RUNNING, STOPPED, SUCCEEDED, Capacity, RayJob, Scaling
from specs.queues.config import QueueConfig
from specs.queues.parse import parse_queue_config
from specs.settings.process import PlanOptions
from specs.task.errors import SpecError
from specs.task.models import Phase, Reason
from specs.task.records import Task
from specs.task.status import TaskStatus, TaskStatusBody
from specs.task.submission_ids import SeenClaim

GIB = 2**30
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def task(priority: int = 0, cpu: float = 1, **spec: Any) -> Task:
    """A valid Task; `spec` adds spec fields, `resources` merges, `annotations` go to metadata."""
    body = {
        "entrypoint": spec.pop("entrypoint", "python job.py"),
        "priority": priority,
        "resources": {"cpu": cpu, **spec.pop("resources", {})},
        **spec,
    }
    annotations = body.pop("annotations", {})
    return Task.model_validate(
        {
            "apiVersion": "rayqueue/v1",
            "kind": "Task",
            "metadata": {"annotations": annotations},
            "spec": body,
        }
    )


@dataclass
class PlanWorld:
    """Applies plans the way the loop and Ray would, so tests can run several passes."""

    specs: dict[str, Task | None]
    capacity: Capacity | None = field(default_factory=lambda: Capacity(4, 0, 16 * GIB))
    jobs: dict[str, RayJob] = field(default_factory=dict)
    statuses: dict[str, TaskStatus] = field(default_factory=dict)
    now: datetime = T0
    options: PlanOptions = field(default_factory=PlanOptions)
    available: bool = True
    errors: dict[str, str] = field(default_factory=dict)
    last_valid: dict[str, Task] = field(default_factory=dict)
    submitted: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)
    queues: QueueConfig | None = None  # team queues (_queues.yaml); None: one queue
    scaling: Scaling | None = None  # what the cluster can grow to; None: a fixed cluster
    # When the scheduler first saw each task claim its explicit id (the loop's record)
    seen_claims: dict[str, SeenClaim] = field(default_factory=dict)
    # What Ray says each job holds, by submission id, and what it reports available (None:
    # not read): Observation.held and Observation.ray_available.
    held: dict[str, Capacity] = field(default_factory=dict)
    ray_available: Capacity | None = None

    def inputs(self) -> dict[str, TaskInput]:
        result: dict[str, TaskInput] = {}
        for name, t in self.specs.items():
            error = self.errors.get(name)
            spec_error = SpecError.unplaced(error) if error is not None else None
            result[name] = TaskInput(name, t, spec_error, self.last_valid.get(name))
            if t is not None:
                self.last_valid[name] = t
        return result

    def observe(self) -> Observation:
        if not self.available:
            return Observation(None, None, "connection refused")
        return Observation(
            dict(self.jobs),
            self.capacity,
            scaling=self.scaling,
            held=dict(self.held),
            ray_available=self.ray_available,
        )

    def step(self, seconds: float = 1.0) -> Plan:
        p = plan(
            self.inputs(),
            dict(self.statuses),
            self.observe(),
            self.now,
            self.options,
            queues=self.queues,
            seen_claims=self.seen_claims,
        )
        # The state machine refusing a transition is a planner bug, whatever the test checks.
        assert not [e for e in p.events if e.reason is Reason.ILLEGAL_TRANSITION], p.events
        self.statuses.update(p.statuses)
        for s in p.submits:
            sid = s.request.submission_id
            assert sid not in self.jobs, f"duplicate submission of {sid}"
            self.jobs[sid] = RayJob(
                sid,
                PENDING,
                s.request.entrypoint,
                start_time=self.now.timestamp(),
                metadata=dict(s.request.metadata),
            )
            self.submitted.append(sid)
        for stop in p.stops:
            job = self.jobs[stop.submission_id]
            if not job.terminal:
                self.jobs[stop.submission_id] = replace(
                    job, status=STOPPED, end_time=self.now.timestamp()
                )
            self.stopped.append(stop.submission_id)
        for name in p.delete_statuses:
            del self.statuses[name]
        self.now += timedelta(seconds=seconds)
        return p

    def ray(self, name: str, status: str) -> None:
        """Move the task's current job in Ray."""
        sid = self.status(name).submission_id
        assert sid is not None
        end = self.now.timestamp() if status in (SUCCEEDED, FAILED, STOPPED) else None
        self.jobs[sid] = replace(self.jobs[sid], status=status, end_time=end)

    def status(self, name: str) -> TaskStatusBody:
        return self.statuses[name].status

    def phase(self, name: str) -> Phase:
        return self.status(name).phase


@dataclass
class Cluster(PlanWorld):
    """Stops take effect only when `finish_stops` is called (the grace period)."""

    stopping: set[str] = field(default_factory=set)

    def step(self, seconds: float = 1.0) -> Plan:
        before = dict(self.jobs)
        p = super().step(seconds)
        for stop in p.stops:
            job = before.get(stop.submission_id)
            if job is not None and not job.terminal:
                self.jobs[stop.submission_id] = job  # still running until the grace is over
                self.stopping.add(stop.submission_id)
        return p

    def finish_stops(self) -> None:
        for sid in sorted(self.stopping):
            self.jobs[sid] = replace(self.jobs[sid], status=STOPPED, end_time=self.now.timestamp())
        self.stopping.clear()

    def run_all(self) -> None:
        """Everything submitted is running (one pass to record it)."""
        for sid, job in self.jobs.items():
            if not job.terminal:
                self.jobs[sid] = replace(job, status=RUNNING)
        self.step()


def running_cluster(
    runs: dict[str, Task],
    queues: QueueConfig | str | None,
    cpus: float = 8,
    age: float = 600,
    preemption: str = "Never",
) -> Cluster:
    """`runs` running for `age` seconds on a `cpus`-CPU cluster, backfill; `queues` is the
    queue configuration or its YAML text (None: one queue)."""
    w = Cluster(
        dict(runs),
        capacity=Capacity(cpus, 0, 64 * GIB),
        options=PlanOptions(policy="backfill", preemption=preemption),
        queues=parse_queue_config(queues) if isinstance(queues, str) else queues,
    )
    w.step()
    w.run_all()
    assert all(w.phase(n) is Phase.RUNNING for n in runs)
    w.now += timedelta(seconds=age)
    return w
