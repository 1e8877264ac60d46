"""The incremental planner's test harness: `History` plays a history of edits, Ray moves and
clock ticks against `plan_incremental`, applying each plan as the loop and Ray would, and checks
every pass against the full `plan()` (tests/unit/core/incremental/test_histories.py,
tests/unit/core/incremental/test_sequences.py)."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from reconciler.core import incremental
from reconciler.core.incremental import Memo, plan_incremental
from reconciler.core.planner import Observation, Plan, TaskInput, plan
from reconciler.core.queues.usage import QueueUsage, Tracked, since_of
from reconciler.shell.loop.seenclaims import SeenClaims
from specs.cluster import FAILED, PENDING, RUNNING, STOPPED, SUCCEEDED, Capacity, RayJob, Scaling
from specs.queues.config import QueueConfig
from specs.settings.process import PlanOptions
from specs.task.errors import SpecError
from specs.task.models import Reason
from specs.task.status import TaskStatus
from tests.support.planner_world import GIB, task

T0 = 1_767_225_600.0  # 2026-01-01


def assert_same(full: Plan, inc: Plan, before: dict[str, TaskStatus]) -> None:
    assert inc.submits == full.submits
    assert inc.stops == full.stops
    assert inc.timeouts == full.timeouts
    assert inc.preemptions == full.preemptions
    assert inc.delete_statuses == full.delete_statuses
    assert inc.fetch_logs == full.fetch_logs
    assert inc.deletes == full.deletes
    assert inc.events == full.events
    assert inc.refused_deletions == full.refused_deletions
    assert inc.summary == full.summary
    assert inc.scale_request == full.scale_request
    assert inc.statuses == full.statuses
    for name, status in full.statuses.items():
        # Unchanged means the very object passed in, for both: the loop skips those writes.
        assert (inc.statuses[name] is before.get(name)) == (status is before.get(name)), name


def assert_identical(full: Plan, inc: Plan, before: dict[str, TaskStatus]) -> None:
    """Every field of the two plans equal (deadline, write_classes and `still` too), field by
    field so a failure names the field; and unchanged statuses the very objects handed in."""
    assert_same(full, inc, before)
    for f in dataclasses.fields(Plan):
        assert getattr(inc, f.name) == getattr(full, f.name), f.name


def changes(result: Plan, before: dict[str, TaskStatus]) -> dict[str, Any]:
    """What a plan changes, briefly (for a failure's message)."""
    moved = {
        name: (status.status.phase.value, status.status.reason, status.status.message)
        for name, status in result.statuses.items()
        if status is not before.get(name)
    }
    acted = {
        f.name: getattr(result, f.name)
        for f in dataclasses.fields(Plan)
        if f.name in ("submits", "stops", "timeouts", "preemptions", "deletes", "events")
        and getattr(result, f.name)
    }
    return {"statuses": moved, **acted, "write_classes": dict(result.write_classes)}


@dataclass
class History:
    """Plays a history against both planners, applying each plan as the loop and Ray would."""

    options: PlanOptions
    queues: QueueConfig | None
    usage: QueueUsage | None = None  # the queues' decayed past use (fair share)
    specs: dict[str, TaskInput] = field(default_factory=dict)
    statuses: dict[str, TaskStatus] = field(default_factory=dict)
    jobs: dict[str, RayJob] = field(default_factory=dict)
    capacity: Capacity = field(default_factory=lambda: Capacity(4, 0, 16 * GIB))
    now: float = T0
    available: bool = True
    scaling: Scaling | None = None
    # The queue file's error, when no configuration was ever valid (planner.plan's).
    queue_error: str | None = None
    unwritten: frozenset[str] = frozenset()
    unwritten_passes: int = 0
    fail_once: frozenset[str] = frozenset()
    # What Ray says each job holds (Observation.held), by submission id (a key no job has: a
    # driver connected directly), and what it reports available (None: not read).
    held: dict[str, Capacity] = field(default_factory=dict)
    ray_available: Capacity | None = None
    # How many passes a job asked to stop stays live (Ray slow to stop it): 0, stopped at once.
    stop_after: int = 0
    stopping: dict[str, int] = field(default_factory=dict)  # by job: passes left live
    memo: Memo = incremental.EMPTY
    compare: bool = True  # also run plan() and check the two agree
    tell_changed: bool = False  # hand the planner the names whose version changed
    every_field: bool = False  # also the deadline, write classes and stillness alike
    last_versions: dict[str, Any] = field(default_factory=dict)
    # A known gap in the still check to pass over (a predicate on the later plan and the
    # statuses before), for a bug reported and pinned by an xfail test elsewhere; None: none.
    still_gap: Callable[[Plan, dict[str, TaskStatus]], bool] | None = None
    # How the two plans are compared: assert_same (the decisions and the statuses), or
    # assert_identical (every field of the Plan).
    check: Callable[[Plan, Plan, dict[str, TaskStatus]], None] = field(
        default=lambda full, inc, before: assert_same(full, inc, before)
    )
    # Reorders a list (a permutation the test draws): with it, the incremental planner gets
    # every mapping of its inputs in that order, and plan() of the inputs so reordered (the
    # queue file's entries too) must equal plan() of them as kept, in every field
    # (tests/unit/core/test_plan_input_order.py). None: the inputs as kept.
    permute: Callable[[list[Any]], list[Any]] | None = None
    # Generations, as the store stamps them: a new one for each spec read and status written.
    generations: Any = field(default_factory=lambda: itertools.count(1))
    spec_generation: dict[str, int] = field(default_factory=dict)
    status_generation: dict[str, int] = field(default_factory=dict)
    # How many passes ran, and how many of them the fast pass took (Memo.fast).
    passes: int = 0
    fast_passes: int = 0
    # How many waiting tasks the fast passes took as quiet right after the loop wrote their
    # status (Memo.carried_over): the writes `_follow` makes, as the loop's, bump their versions.
    carried: int = 0
    # How many fast passes reused the last pass's walk over the queue's head (Order.reused).
    reused: int = 0
    # How many fast passes preempted (Plan.preemptions).
    fast_preempting: int = 0
    # When each explicit id claim was first seen, kept as the loop keeps it (looking at every
    # task each pass): both planners get it.
    seen: SeenClaims = field(default_factory=lambda: SeenClaims(None))

    def apply(self, step: tuple[Any, ...]) -> None:
        kind = step[0]
        if kind in ("put", "touch", "break") and (kind != "touch" or step[1] in self.specs):
            self.spec_generation[step[1]] = next(self.generations)
        if kind == "put":
            t = task(**step[2])
            self.specs[step[1]] = TaskInput(step[1], t, None, t, t.spec_hash())
        elif kind == "touch" and step[1] in self.specs:
            # Read again: equal values, new objects (as after the store re-parses a file).
            old = self.specs[step[1]]
            self.specs[step[1]] = replace(old, task=old.task.model_copy() if old.task else None)
        elif kind == "break":
            old_input = self.specs.get(step[1])
            last = (old_input.task or old_input.last_valid) if old_input else None
            self.specs[step[1]] = TaskInput(step[1], None, SpecError.unplaced("bad yaml"), last)
        elif kind == "delete":
            self.specs.pop(step[1], None)
            self.spec_generation.pop(step[1], None)
        elif kind == "ray":
            self._move_job(step[1], step[2], step[3])
        elif kind == "rebuild":
            self.jobs = {sid: replace(job) for sid, job in self.jobs.items()}
        elif kind == "tick":
            self.now += step[1]
        elif kind == "capacity":
            self.capacity = Capacity(step[1], 0, 16 * GIB)
        elif kind == "outage":
            self.available = not step[1]
        elif kind == "scaling":
            self.scaling = step[1]
        elif kind == "queue_error":
            self.queue_error = step[1]
        elif kind == "foreign":
            sid = f"foreign-{step[1]}"
            self.jobs[sid] = RayJob(sid, RUNNING, start_time=self.now, entrypoint_cpus=1)
        elif kind == "hold":  # a live job holds `cpu` CPUs (and nothing else)
            live = sorted(sid for sid, job in self.jobs.items() if not job.terminal)
            if live:
                self.held[live[step[1] % len(live)]] = Capacity(step[2], 0, 0)
        elif kind == "unhold":  # Ray's holdings no longer show a job (read before it started)
            if self.held:
                del self.held[sorted(self.held)[step[1] % len(self.held)]]
        elif kind == "holder":  # a driver Ray lists no job for holds `cpu` CPUs (0: none)
            if step[2]:
                self.held[f"driver-{step[1]}"] = Capacity(step[2], 0, 0)
            else:
                self.held.pop(f"driver-{step[1]}", None)
        elif kind == "report":  # what Ray reports available (None: not read)
            self.ray_available = None if step[1] is None else Capacity(step[1], 0, 16 * GIB)
        elif kind == "lose_writes":
            self.unwritten, self.unwritten_passes = step[1], step[2]
        elif kind == "restart":
            # A restarted loop has nothing kept: no memo, and no versions to tell changes by.
            self.memo = incremental.EMPTY
            self.last_versions = {}

    def _move_job(self, index: int, outcome: str, exit_code: int) -> None:
        live = sorted(sid for sid, job in self.jobs.items() if not job.terminal)
        if not live:
            return
        sid = live[index % len(live)]
        job = self.jobs[sid]
        if outcome == "vanish":
            del self.jobs[sid]
        elif outcome == RUNNING:
            self.jobs[sid] = replace(job, status=RUNNING, start_time=self.now)
        else:
            code = 0 if outcome == SUCCEEDED else (exit_code if outcome == FAILED else None)
            self.jobs[sid] = replace(job, status=outcome, end_time=self.now, exit_code=code)

    def run_pass(self) -> Plan:
        observed = (
            Observation(
                dict(self.jobs),
                self.capacity,
                scaling=self.scaling,
                held=dict(self.held),
                ray_available=self.ray_available,
            )
            if self.available
            else Observation(None, None, "connection refused")
        )
        at = datetime.fromtimestamp(self.now, UTC)
        before = dict(self.statuses)
        versions = {
            n: (self.spec_generation[n], self.status_generation.get(n, 0)) for n in self.specs
        }
        changed = None
        if self.tell_changed:
            changed = {n for n, v in versions.items() if self.last_versions.get(n) != v}
        self.last_versions = versions
        self.seen.stale = True
        seen = self.seen.update(self.specs, (), self.now)
        given = _Inputs(self.specs, before, observed, self.usage, versions, changed)
        if self.permute is not None:
            given = given.reordered(self.permute)
        inc, self.memo = plan_incremental(
            self.memo,
            given.specs,
            given.statuses,
            given.observed,
            at,
            self.options,
            queues=self.queues,
            usage=given.usage,
            versions=given.versions,
            queue_error=self.queue_error,
            changed=given.changed,
            seen_claims=seen,
        )
        self.passes += 1
        self.fast_passes += self.memo.fast
        self.carried += self.memo.carried_over
        self.reused += self.memo.order is not None and self.memo.order.reused
        self.fast_preempting += self.memo.fast and bool(inc.preemptions)
        # The state machine refusing a transition is a planner bug.
        assert not [e for e in inc.events if e.reason is Reason.ILLEGAL_TRANSITION], inc.events
        if self.compare:
            full = plan(
                self.specs,
                before,
                observed,
                at,
                self.options,
                queues=self.queues,
                usage=self.usage,
                queue_error=self.queue_error,
                seen_claims=seen,
            )
            self.check(full, inc, before)
            if self.permute is not None:
                self._check_order(full, given, at, before)
            if self.every_field:
                assert (inc.deadline, inc.still) == (full.deadline, full.still)
                assert inc.write_classes == full.write_classes
        if self.compare and inc.still_until is not None:
            self._check_still(inc.still_until, before, observed)
        self._follow(inc)
        return inc

    def _check_order(
        self, full: Plan, given: _Inputs, at: datetime, before: dict[str, TaskStatus]
    ) -> None:
        """plan() of the inputs in another order (the queue file's entries too) gives the
        very plan of the inputs as kept: every field, the order of every list."""
        assert self.permute is not None
        queues = self.queues
        if queues is not None:
            entries = self.permute(list(queues.spec.queues))
            queues = queues.model_copy(
                update={"spec": queues.spec.model_copy(update={"queues": entries})}
            )
        again = plan(
            given.specs,
            given.statuses,
            given.observed,
            at,
            self.options,
            queues=queues,
            usage=given.usage,
            queue_error=self.queue_error,
            seen_claims=self.seen.update(self.specs, (), self.now),
        )
        assert_identical(full, again, before)
        assert list(again.statuses) == list(full.statuses)  # the loop writes in this order

    def _check_still(
        self, until: float, before: dict[str, TaskStatus], observed: Observation
    ) -> None:
        """A plan that changed nothing says how long it stays so: the full planner, with the
        same inputs at any later instant up to then, changes nothing either (the loop skips
        those passes)."""
        # The planner's clock is a datetime (microseconds): `now` as the planner saw it.
        assert until >= datetime.fromtimestamp(self.now, UTC).timestamp()
        later = {self.now, min(until, self.now + 0.5), min(until, self.now + 3600)}
        if math.isfinite(until):
            later |= {until, (self.now + until) / 2}
        for when in sorted(later):
            at = datetime.fromtimestamp(when, UTC)
            if at.timestamp() > until:
                continue  # a datetime holds microseconds: this one rounded past the edge
            again = plan(
                self.specs,
                before,
                observed,
                at,
                self.options,
                queues=self.queues,
                usage=self.usage,
                queue_error=self.queue_error,
                seen_claims=self.seen.update(self.specs, (), self.now),
            )
            if self.still_gap is not None and self.still_gap(again, before):
                continue
            assert again.still_until is not None, (when - self.now, changes(again, before))
            assert again.statuses == before

    def _follow(self, result: Plan) -> None:
        """As the loop: statuses first (some writes may fail), then submits and stops of what
        was written; Ray takes them at once."""
        lost = self.fail_once | (self.unwritten if self.unwritten_passes > 0 else frozenset())
        self.unwritten_passes -= 1
        self.fail_once = frozenset()
        for name, status in result.statuses.items():
            if name not in lost and self.statuses.get(name) is not status:
                self.statuses[name] = status  # written: the loop writes changed statuses only
                self.status_generation[name] = next(self.generations)
        for submit in result.submits:
            sid = submit.request.submission_id
            if submit.task in lost or sid in self.jobs:
                continue
            metadata = dict(submit.request.metadata)
            self.jobs[sid] = RayJob(sid, PENDING, start_time=self.now, metadata=metadata)
        for sid, left in list(self.stopping.items()):  # asked before: stopped now, or later
            if left > 1:
                self.stopping[sid] = left - 1
                continue
            del self.stopping[sid]
            job = self.jobs.get(sid)
            if job is not None and not job.terminal:
                self.jobs[sid] = replace(job, status=STOPPED, end_time=self.now)
        for stop in result.stops:
            job = self.jobs.get(stop.submission_id)
            if stop.task not in lost and job is not None and not job.terminal:
                if self.stop_after:
                    self.stopping.setdefault(stop.submission_id, self.stop_after)
                    continue
                self.jobs[stop.submission_id] = replace(job, status=STOPPED, end_time=self.now)
        for sid in result.deletes:
            self.jobs.pop(sid, None)
        for name in result.delete_statuses:
            self.statuses.pop(name, None)
            self.status_generation.pop(name, None)


@dataclass(frozen=True)
class _Inputs:
    """What a pass hands the planner, but the clock and the options."""

    specs: Mapping[str, TaskInput]
    statuses: Mapping[str, TaskStatus]
    observed: Observation
    usage: QueueUsage | None
    versions: Mapping[str, Any]
    changed: set[str] | None

    def reordered(self, permute: Callable[[list[Any]], list[Any]]) -> _Inputs:
        """The same inputs, every mapping (and the set of changed names) built in the order
        `permute` gives its items."""

        def again(mapping: Mapping[str, Any]) -> dict[str, Any]:
            return dict(permute(list(mapping.items())))

        jobs = self.observed.jobs
        observed = replace(self.observed, jobs=again(jobs) if jobs is not None else None)
        usage = self.usage
        if usage is not None:
            usage = Tracked(again(usage), since_of(usage))
        changed = set(permute(list(self.changed))) if self.changed is not None else None
        return _Inputs(
            again(self.specs), again(self.statuses), observed, usage, again(self.versions), changed
        )
