"""One task's reconcile in progress (TaskStep) and what it yields (TaskResult): the
values the per-task part of a pass passes around, and the pass-wide TaskEnv it reads."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from reconciler.core.admission import policies
from reconciler.core.decisions import Event, Submit, TimeOut, Wanted
from reconciler.core.inputs import Observation
from reconciler.core.preemption import rules as preemptrules
from reconciler.core.preemption import victims
from reconciler.core.task import retries
from reconciler.core.timestamps import to_datetime
from specs.cluster import (
    META_QUEUE,
    META_TASK,
    Capacity,
    RayJob,
)
from specs.queues.config import DEFAULT_OVERUSE_POLICY, Overuse, QueueConfig
from specs.settings.process import PlanOptions
from specs.task.models import ConditionType, Reason
from specs.task.records import Task
from specs.task.status import TaskStatusBody


@dataclass(frozen=True)
class TaskEnv:
    """What every task's own reconcile reads besides its spec and status: the same for all
    tasks of a pass."""

    options: PlanOptions
    obs: Observation
    ours: Mapping[str, RayJob]  # our jobs by submission id
    by_task: Mapping[str, Sequence[RayJob]]  # our jobs by task name
    # each queue's preemption rules; a task's job gets its queue's grace period
    preemption: preemptrules.Setup
    # each queue's `overuse:` policy (none without a queue file: the default, Charge)
    overuse: Mapping[str, Overuse] = field(default_factory=dict)

    def overuse_of(self, task: str) -> Overuse:
        """What the task's queue does about a run that holds more than it declares."""
        return self.overuse.get(self.preemption.queue_of(task), DEFAULT_OVERUSE_POLICY)


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
    overuse = (
        {name: queues.overuse_of(name) for name in queues.queue_names()}
        if queues is not None
        else {}
    )
    return TaskEnv(options, observed, ours, by_task, preemptrules.setup(queues, options), overuse)


@dataclass(frozen=True)
class InUse:
    """An active run's use of the cluster: its job is kept, and it counts as used for what it
    is charged (`request`: what it declares, or what Ray says its job holds if more:
    jobs.charged). `observed`: Ray's holdings show its job, so what Ray reports available
    already leaves out what it holds; a run not observed (not started yet, or started since)
    is taken from that report by what it is charged."""

    submission_id: str
    request: Capacity
    claim: policies.Claim
    observed: bool = False


# Waiter and TaskResult are built for every task in every full pass (and carried over for
# every waiting one after a start): named tuples, which build several times faster than
# frozen dataclasses and are just as immutable.
class QueueKey(NamedTuple):
    """A waiting task's place in the queue's order: lowest first."""

    rank: int  # -priority: the highest priority first
    queued_at: float  # then the earliest queued (epoch seconds)
    name_order: str  # then by name (arrays' elements in index order: arrays.order_key)


class Waiter(NamedTuple):
    """A task waiting for admission: its place in the queue's order, and what it asks for."""

    key: QueueKey
    candidate: policies.Candidate
    task: Task
    gated: bool  # has dependencies, or is held in a dependency cycle


class TaskResult(NamedTuple):
    """One task's own part of a pass: decided from its spec, its status, its run's job, the
    pass-wide TaskEnv and `now` alone, before dependencies and admission look at all tasks.

    `valid_from`..`valid_until` (inclusive) is the span of `now` over which the same inputs
    give this very result: every time-dependent rule the reconcile ran narrowed it."""

    body: TaskStatusBody
    conds: tuple[tuple[ConditionType, tuple[Reason | ConditionType, str]], ...] = ()
    events: tuple[Event, ...] = ()
    submits: tuple[Submit, ...] = ()
    timeouts: tuple[TimeOut, ...] = ()
    # the submission id of the run that failed this pass, whose log tail the shell fetches
    # (not the status's: a retry with no backoff is resubmitted under a new id in the same pass)
    fetch_log: str | None = None
    in_use: InUse | None = None
    waiter: Waiter | None = None
    running: victims.Running | None = None
    valid_from: float = -math.inf
    valid_until: float = math.inf
    # As valid_until, but for the pass that reads this result's status back: a time this
    # result records once (TaskStep.recorded) pins it to its instant, not its read-back.
    settles_until: float = math.inf

    def valid_at(self, now: float) -> bool:
        return self.valid_from <= now <= self.valid_until


class TaskStep:
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
        self.settles_until = math.inf  # see TaskResult.settles_until
        self.conds: Wanted = {}
        self.events: list[Event] = []
        self.submits: list[Submit] = []
        self.timeouts: list[TimeOut] = []
        self.fetch_log: str | None = None
        self.resubmit = False  # a Starting run Ray has never heard of
        self.in_use: InUse | None = None
        self.waiter: Waiter | None = None
        self.body: TaskStatusBody | None = None

    @property
    def now(self) -> float:
        self.valid_from = self.valid_until = self.settles_until = self._now
        return self._now

    def recorded(self, at: datetime | None) -> datetime:
        """The time a field holds once set (a run's start): `at` if set, else now. Now pins
        this result to its instant (the same inputs later would record another time), but not
        the pass that reads the status back: with the field written, it reads no clock for it
        (Plan.read_back_deadline)."""
        if at is not None:
            return at
        self.valid_from = self.valid_until = self._now
        return to_datetime(self._now)

    @property
    def stamp(self) -> datetime:
        return to_datetime(self.now)

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
            self.settles_until = min(self.settles_until, max(edge, now))
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
            self.in_use,
            self.waiter,
            running,
            self.valid_from,
            self.valid_until,
            self.settles_until,
        )
