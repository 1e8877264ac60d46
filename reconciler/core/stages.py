"""The values a planning pass hands from stage to stage.

A pass runs in stages, each a function of the values before it that returns a frozen value:

1. each task's own reconcile (`reconciler.core.task.reconcile`), merged in name order by
   `TaskMerge` into `Reconciled`;
2. stray jobs (`reconciler.core.cleanup.stop_strays`): `Strays`;
3. dependency gates (`reconciler.core.gates.gate_dependencies`): `Gated`;
4. admission, with preemption (`reconciler.core.admit.admit`): `Admitted`;
5. clean-up of Ray's history and of orphan sidecars (`reconciler.core.cleanup`);
6. the statuses and the `Plan` (`reconciler.core.planner`).

`PassInputs` is what every stage reads of the pass as a whole. Containers in these values are
the stage's own, typed read-only: nobody writes into them once the stage has returned.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from reconciler.core.admission import policies
from reconciler.core.admission.waits import Lack
from reconciler.core.decisions import Event, Submit, TimeOut, Wanted
from reconciler.core.inputs import Observation
from reconciler.core.preemption import victims
from reconciler.core.queues.usage import QueueUsage
from reconciler.core.task.idclaims import Folders
from reconciler.core.task.step import QueueKey, TaskEnv, TaskResult
from reconciler.core.timestamps import to_datetime
from specs.cluster import Capacity
from specs.queues.config import QueueConfig
from specs.settings.process import PlanOptions
from specs.task.inputs import TaskInput
from specs.task.records import Task
from specs.task.status import TaskStatusBody
from specs.task.submission_ids import SeenClaim

__all__ = [
    "Holdings",
    "PassInputs",
    "QueueKey",
    "QueuedCandidate",
    "Reconciled",
    "TaskMerge",
    "WalkEnd",
    "walk_end",
]


@dataclass(frozen=True)
class PassInputs:
    """What every stage reads of the pass as a whole."""

    options: PlanOptions
    obs: Observation
    now: float
    env: TaskEnv
    # The specs as read, before explicit id claims turned any Invalid: each one's source.
    read: Mapping[str, TaskInput]
    queues: QueueConfig | None = None  # team queues with quotas; None: one queue
    usage: QueueUsage | None = None  # the queues' decayed past use (core/queues/usage.py)
    # _queues.yaml's error (file:line:col: field: message) while no configuration is in force
    queue_error: str | None = None
    folder_empty: bool = False  # no spec and no sidecar at all: unmounted, or wiped
    # When the scheduler first saw each task claim its explicit id (the loop's own record)
    seen_claims: Mapping[str, SeenClaim] = field(default_factory=dict)

    @property
    def folders(self) -> Folders:
        """What decides between two folders' claims of one explicit id."""
        return Folders(self.options.visibility, self.seen_claims)

    @property
    def stamp(self) -> datetime:
        return to_datetime(self.now)


class QueuedCandidate(NamedTuple):  # one per waiting task per pass: a tuple builds fastest
    """A waiting task as admission sees it: its place in the order, and what it asks for."""

    key: QueueKey
    candidate: policies.Candidate


class WalkEnd(NamedTuple):
    """Where the one queue's policy walk ended (policies.Admission.tail)."""

    tail_at: int | None  # the index from which every task waits for `lack`; None: it took all
    lack: Lack | None
    started: int  # how many it started


def walk_end(admission: policies.Admission) -> WalkEnd:
    """Where the policy's walk in `admission` ended, and how many it started."""
    tail = admission.tail
    if tail is None:
        return WalkEnd(None, None, len(admission.start))
    return WalkEnd(tail.at, tail.lack, len(admission.start))


@dataclass(frozen=True)
class Holdings:
    """What runs hold of the cluster: in all, by task, and each active run's claim, each as
    it is charged (jobs.charged). `unobserved`: the part of `used` that Ray's holdings do not
    show (runs not started, or started since they were read), which what Ray reports
    available does not leave out yet."""

    used: Capacity
    in_use: Mapping[str, Capacity]
    claims: Sequence[policies.Claim]
    unobserved: Capacity = field(default_factory=Capacity)


@dataclass(frozen=True)
class Reconciled:
    """Every task's own reconcile, merged in name order."""

    bodies: Mapping[str, TaskStatusBody]
    conds: Mapping[str, Wanted]
    events: Sequence[Event]
    submits: Sequence[Submit]
    timeouts: Sequence[TimeOut]
    # task -> the submission id of its run that failed, whose log tail it needs
    fetch_logs: Mapping[str, str]
    kept_jobs: Set[str]  # our live jobs that belong to an active run
    holdings: Holdings
    queue: Sequence[QueuedCandidate]  # the waiting tasks, in name order
    tasks: Mapping[str, Task]  # the waiting ones, for admission
    gated: bool  # some waiting task has dependencies or sits in a cycle
    running: Sequence[victims.Running]  # possible victims
    settles_until: float  # the latest `now` at which every task's answer still holds
    # ... counting a time a status records once (TaskResult.valid_until)
    recorded_until: float


@dataclass
class TaskMerge:
    """The per-task stage while its results come in; `done` freezes it into `Reconciled`.
    Results are added in name order, as `planner.plan` reconciles them, so sums and lists
    come out the same whoever adds them (the incremental planner adds only some)."""

    bodies: dict[str, TaskStatusBody] = field(default_factory=dict)
    conds: dict[str, Wanted] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    submits: list[Submit] = field(default_factory=list)
    timeouts: list[TimeOut] = field(default_factory=list)
    fetch_logs: dict[str, str] = field(default_factory=dict)
    kept_jobs: set[str] = field(default_factory=set)
    used: Capacity = field(default_factory=Capacity)
    unobserved: Capacity = field(default_factory=Capacity)  # Holdings.unobserved so far
    in_use: dict[str, Capacity] = field(default_factory=dict)
    claims: list[policies.Claim] = field(default_factory=list)
    queue: list[QueuedCandidate] = field(default_factory=list)
    tasks: dict[str, Task] = field(default_factory=dict)
    gated: bool = False
    running: list[victims.Running] = field(default_factory=list)
    until: float = math.inf  # settles_until so far
    recorded_until: float = math.inf

    def add(self, name: str, result: TaskResult) -> None:
        """One task's result."""
        self.bodies[name] = result.body
        if result.conds:
            self.conds[name] = dict(result.conds)
        if result.events:
            self.events.extend(result.events)
        if result.submits:
            self.submits.extend(result.submits)
        if result.timeouts:
            self.timeouts.extend(result.timeouts)
        if result.fetch_log is not None:
            self.fetch_logs[name] = result.fetch_log
        in_use = result.in_use
        if in_use is not None:
            self.kept_jobs.add(in_use.submission_id)
            self.used = self.used + in_use.request
            if not in_use.observed:
                self.unobserved = self.unobserved + in_use.request
            self.in_use[name] = self.in_use.get(name, Capacity()) + in_use.request
            self.claims.append(in_use.claim)
        waiter = result.waiter
        if waiter is not None:
            self.queue.append(QueuedCandidate(waiter.key, waiter.candidate))
            self.tasks[name] = waiter.task
            self.gated = self.gated or waiter.gated
        if result.running is not None:
            self.running.append(result.running)
        self.until = min(self.until, result.settles_until)
        self.recorded_until = min(self.recorded_until, result.valid_until)

    @property
    def holdings(self) -> Holdings:
        return Holdings(self.used, self.in_use, self.claims, self.unobserved)

    def done(self) -> Reconciled:
        return Reconciled(
            bodies=self.bodies,
            conds=self.conds,
            events=self.events,
            submits=self.submits,
            timeouts=self.timeouts,
            fetch_logs=self.fetch_logs,
            kept_jobs=self.kept_jobs,
            holdings=self.holdings,
            queue=self.queue,
            tasks=self.tasks,
            gated=self.gated,
            running=self.running,
            settles_until=self.until,
            recorded_until=self.recorded_until,
        )
