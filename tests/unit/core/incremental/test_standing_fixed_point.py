"""The planner is a fixed point of its own output (a busy queue's steady state).

A pass whose plan only moves statuses (no submit, stop, time-out, preemption, deletion or log
fetch) is followed, in the loop, by a pass that reads back what it wrote, twice per job (after
Ray's PENDING and after RUNNING). The loop skips that read-back without calling the planner
(reconciler/core/incremental/standing.py), on the claim checked here: with the same specs, the same
answer from Ray and the statuses that plan gave written, the full planner changes nothing
(still, every status the very one written) at any instant from that pass's `now` up to its
deadline, over random sequences of job starts and ends, edits, deletions and clock moves.
"""

from __future__ import annotations

import dataclasses
import math
import os
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from reconciler.core.incremental.standing import quiet_but_statuses
from reconciler.core.incremental.standing import read_back as as_read_back
from reconciler.core.planner import Observation, Plan, plan
from specs.cluster import SUCCEEDED, Capacity
from specs.settings.process import PlanOptions
from specs.task.models import Phase, Reason
from specs.task.status import TaskStatus
from specs.task.visibility import Visibility
from tests.support.incremental_history import History, assert_identical, changes
from tests.support.planner_world import GIB
from tests.unit.core.incremental.test_sequences import (
    EXAMPLES,
    FAST_QUEUE_FILES,
    QUEUE_FILES,
    Sequence,
    names_of,
    options_of,
    queues_of,
    steps,
)


@dataclasses.dataclass
class ReadBack(History):
    """A History that, after each plan that only moved statuses, plans the read-back."""

    checked: int = 0
    observed: Observation | None = None

    def run_pass(self) -> Plan:
        self.observed = (  # what History.run_pass hands the planner
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
        return super().run_pass()

    def _follow(self, result: Plan) -> None:
        lost = self.fail_once | (self.unwritten if self.unwritten_passes > 0 else frozenset())
        observed = self.observed
        assert observed is not None
        before = dict(self.statuses)
        order = self.memo.order
        shown = order.gates.seen if order is not None else {}
        still = as_read_back(result, observed, self.now, self.memo.fast, self.specs, before, shown)
        super()._follow(result)
        if still is not None and not (lost & result.statuses.keys()):
            self._check_read_back(result, observed)
            assert still.statuses == self.statuses
            until = result.read_back_deadline
            assert still.still_until == (math.inf if until is None else until)

    def _check_read_back(self, result: Plan, observed: Observation) -> None:
        written: dict[str, TaskStatus] = dict(self.statuses)
        until = math.inf if result.read_back_deadline is None else result.read_back_deadline
        later = {self.now, min(until, self.now + 0.5), min(until, self.now + 3600)}
        if math.isfinite(until):
            later |= {until, (self.now + until) / 2}
        for when in sorted(later):
            at = datetime.fromtimestamp(when, UTC)
            if at.timestamp() > until:
                continue  # microseconds: rounded past the edge
            again = plan(
                self.specs,
                written,
                observed,
                at,
                self.options,
                queues=self.queues,
                usage=self.usage,
                queue_error=self.queue_error,
                seen_claims=self.seen.update(self.specs, (), self.now),
            )
            assert again.still, (
                when - self.now,
                result.deadline,
                again.deadline,
                changes(again, written),
            )
            moved = {n for n, s in again.statuses.items() if s is not written.get(n)}
            assert not moved, sorted(moved)[:5]
            assert again.summary == result.summary
            assert again.scale_request == result.scale_request
        self.checked += 1


# Derandomized by default, so a run is repeatable; RAYQUEUE_PROPERTY_EXAMPLES=N draws afresh.
@settings(
    max_examples=max(EXAMPLES // 3, 100),
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize="RAYQUEUE_PROPERTY_EXAMPLES" not in os.environ,
)
@given(
    options=options_of(),
    queue_file=st.sampled_from(QUEUE_FILES),
    size=st.sampled_from([20, 40, 100]),
    first=st.integers(0, 2**16),
    cpus=st.sampled_from([4, 8, 16]),
    plain=st.booleans(),
    simple=st.booleans(),
    simple_file=st.sampled_from(FAST_QUEUE_FILES),
    sequence=st.lists(steps(), min_size=1, max_size=30),
)
def test_the_read_back_of_a_plan_that_only_moved_statuses_plans_nothing(
    options: PlanOptions,
    queue_file: str | None,
    size: int,
    first: int,
    cpus: int,
    plain: bool,
    simple: bool,
    simple_file: str | None,
    sequence: list[tuple[Any, ...]],
) -> None:
    ids = False
    if simple:  # what the fast pass takes, as in test_sequences.py
        queue_file, plain, ids = simple_file, True, not plain
    world = ReadBack(
        options, queues_of(queue_file), capacity=Capacity(cpus, 0, 64 * GIB), compare=False
    )
    note(
        f"{options}; queue file {queue_file}, first {first}; size {size}, cpus {cpus}, "
        f"plain {plain}, ids {ids}; sequence {sequence}"
    )
    run = Sequence(world, names_of(size), plain, ids=ids)
    run.run(("add", size // 2, first))
    for step in sequence:
        run.run(step)


def test_the_busy_heads_cycle_has_read_backs_to_skip() -> None:
    """Jobs start (PENDING, then RUNNING) and end one at a time, as on the busy head: the
    passes that see PENDING or RUNNING only move the task's status, and their read-backs are
    checked (the property above would hold vacuously if none were)."""
    options = PlanOptions(queue_id="q", policy="backfill", exact_queue_positions=5)
    world = ReadBack(options, None, capacity=Capacity(4, 0, 64 * GIB), check=assert_identical)
    run = Sequence(world, names_of(60), plain=True)
    run.run(("add", 40, 7))
    for _ in range(6):
        run.run(("tick", 0.1))  # the new job is PENDING
        run.run(("start_all",))  # RUNNING
        run.run(("tick", 0.1))
        run.run(("ray", 0, SUCCEEDED, 1))  # it ends; the next is submitted
    assert world.checked >= 6


def test_the_pass_that_records_an_end_holds_no_later_than_its_jobs_retention() -> None:
    """The job's end is recorded by this pass (Running → Succeeded); from the read-back on,
    the job expires after the history retention, so this plan's deadline says so too (before,
    the job was still awaited here and did not count: the read-back would have been skipped
    past its deletion)."""
    options = PlanOptions(queue_id="q", ray_history_retention_seconds=2.0)
    world = ReadBack(options, None, capacity=Capacity(4, 0, 64 * GIB), compare=False)
    run = Sequence(world, names_of(20), plain=True)
    run.run(("add", 2, 7))
    run.run(("start_all",))
    run.run(("tick", 1))
    end = world.now
    world.apply(("ray", 0, SUCCEEDED, 1))
    recorded = world.run_pass()
    assert recorded.statuses and not recorded.deletes
    assert recorded.deadline is not None and recorded.deadline <= end + 2


def test_a_lost_run_queued_again_under_a_claimed_id_has_its_read_back_planned() -> None:
    """a ran under its explicit id "x", which b claims too (refused: a used it). Ray loses
    a's job and a is queued again, a status-only plan (the one start allowed in flight is c's)
    whose status no longer records "x": its read-back judges the claim anew (neither has run
    with "x" now: both refused), so it is planned, not skipped."""
    options = PlanOptions(queue_id="q", policy="backfill", max_inflight=1, lost_grace_seconds=5)
    world = ReadBack(options, None, capacity=Capacity(4, 0, 64 * GIB), check=assert_identical)
    retry = {"limit": 2, "on": ["Lost"], "backoffSeconds": 0}
    world.apply(("put", "a", {"submissionId": "x", "retry": retry}))
    world.run_pass()
    for sid, job in list(world.jobs.items()):
        world.jobs[sid] = dataclasses.replace(job, status="RUNNING", start_time=world.now)
    world.run_pass()
    world.apply(("put", "c", {}))
    world.run_pass()  # c submitted: PENDING, in flight
    world.apply(("put", "b", {"submissionId": "x"}))
    world.run_pass()
    assert "already used by task a" in world.statuses["b"].status.message
    del world.jobs["x"]
    world.run_pass()  # a's job missing
    world.apply(("tick", 6))
    lost = world.run_pass()  # past the grace period: queued again
    assert world.memo.fast and not lost.submits
    assert lost.read_back_deadline is not None and lost.read_back_deadline > world.now
    assert world.statuses["a"].status.submission_id is None
    world.run_pass()
    assert "claimed by task b as well" in world.statuses["a"].status.message


def test_the_read_back_of_a_claim_between_folders_keeps_the_first_seen_claimant() -> None:
    """team-a/a claims the id "x" first (suspended: no job holds it), team-b/b later. Between
    folders the claim the scheduler saw first keeps the id: the pass refuses b, a status-only
    plan; its read-back, with the same record of when each claim was seen (the loop's, which
    a read-back leaves as it was), refuses b again and a still not."""
    visibility = Visibility(readers=(("team-a",), ("team-b",)), writers=(("team-a",), ("team-b",)))
    options = PlanOptions(queue_id="q", visibility=visibility)
    world = ReadBack(options, None, capacity=Capacity(4, 0, 64 * GIB), check=assert_identical)
    world.apply(("put", "team-a/a", {"submissionId": "x", "suspend": True}))
    world.run_pass()
    world.apply(("tick", 1))
    world.apply(("put", "team-b/b", {"submissionId": "x"}))
    world.run_pass()
    assert "already in use" in world.statuses["team-b/b"].status.message
    world.run_pass()
    assert world.checked >= 1
    assert world.statuses["team-a/a"].status.reason is Reason.SUSPENDED


def test_a_dependency_that_fits_again_has_its_read_back_planned() -> None:
    """a waits for b, which asks for more than the cluster has (Unschedulable). b's file is
    edited to fit: the pass makes it Queued (c's start is the one allowed in flight), a
    status-only plan, but a's gates saw b as it was reconciled, before admission: a still
    says b is Unschedulable. Its read-back, where a sees b Queued, is planned, not skipped."""
    options = PlanOptions(queue_id="q", max_inflight=1)
    world = ReadBack(options, None, capacity=Capacity(4, 0, 64 * GIB), check=assert_identical)
    world.apply(("put", "c", {}))
    world.apply(("put", "b", {"cpu": 9}))
    world.apply(("put", "a", {"dependsOn": [{"name": "b"}]}))
    world.run_pass()
    world.run_pass()
    assert "(Unschedulable)" in world.statuses["a"].status.message
    world.apply(("put", "b", {"cpu": 1}))
    before = dict(world.statuses)
    fits = world.run_pass()
    assert world.memo.fast and quiet_but_statuses(fits)
    assert world.statuses["b"].status.phase is Phase.QUEUED
    assert world.statuses["a"] is before["a"]
    order = world.memo.order
    assert order is not None
    observed = world.observed
    assert observed is not None
    shown = order.gates.seen
    assert as_read_back(fits, observed, world.now, True, world.specs, before, shown) is None
    world.run_pass()
    assert "(Queued)" in world.statuses["a"].status.message


def test_a_run_under_a_refused_explicit_id_that_ends_has_its_read_back_planned() -> None:
    """The property's example, played on purpose: ten tasks are added and team-a/t333's job
    is submitted (the one start allowed in flight); nine others are edited to claim the
    explicit id "shared", team-a/t333 among them, and none has run with it: all are refused.
    team-a/t333's run goes on under its last valid spec (a SpecInvalid condition). Its job
    ends: the pass records Succeeded, a status-only plan; its read-back sees a finished task
    whose spec is refused and turns it Invalid, so it is planned, not skipped."""
    options = PlanOptions(queue_id="q", policy="strict", max_inflight=1, exact_queue_positions=1)
    world = ReadBack(options, None, capacity=Capacity(4, 0, 64 * GIB), check=assert_identical)
    run = Sequence(world, names_of(20))
    run.run(("add", 10, 0))
    assert world.statuses["team-a/t333"].status.phase is Phase.STARTING
    run.run(("edit", 9, 0, "submissionId", "shared"))
    claimants = [n for n, s in world.specs.items() if s.task and s.task.spec.submission_id]
    assert "team-a/t333" in claimants and len(claimants) == 9
    assert world.statuses["team-a/t333"].status.phase is Phase.STARTING  # never stopped
    before = dict(world.statuses)
    world.apply(("ray", 0, SUCCEEDED, 1))  # its job ends (the only live one)
    ended = world.run_pass()  # the read-back checked here (ReadBack._follow) must hold
    assert world.memo.fast and quiet_but_statuses(ended)
    assert world.statuses["team-a/t333"].status.phase is Phase.SUCCEEDED
    observed = world.observed
    assert observed is not None
    assert as_read_back(ended, observed, world.now, True, world.specs, before) is None
    world.run_pass()  # planned, not skipped: the loop writes Invalid
    body = world.statuses["team-a/t333"].status
    assert body.phase is Phase.INVALID
    assert "'shared' is claimed by task" in body.message


def test_a_run_under_a_hidden_dependency_that_ends_has_its_read_back_planned() -> None:
    """The same with the other rule that refuses a spec whose file parses: team-a/a runs, and
    is edited to depend on team-b/b, which its folder may not see. Refused, its run goes on;
    the pass that records its end is status-only, and its read-back turns it Invalid."""
    visibility = Visibility(readers=(("team-a",), ("team-b",)), writers=(("team-a",), ("team-b",)))
    options = PlanOptions(queue_id="q", visibility=visibility)
    world = ReadBack(options, None, capacity=Capacity(4, 0, 64 * GIB), check=assert_identical)
    world.apply(("put", "team-b/b", {"suspend": True}))
    world.apply(("put", "team-a/a", {}))
    world.run_pass()  # a submitted
    world.apply(("put", "team-a/a", {"dependsOn": [{"name": "/team-b/b"}]}))
    world.run_pass()
    body = world.statuses["team-a/a"].status
    assert body.phase is Phase.STARTING and "is not visible" in str(body.conditions)
    before = dict(world.statuses)
    world.apply(("ray", 0, SUCCEEDED, 1))
    ended = world.run_pass()
    assert world.memo.fast and quiet_but_statuses(ended)
    assert world.statuses["team-a/a"].status.phase is Phase.SUCCEEDED
    observed = world.observed
    assert observed is not None
    assert as_read_back(ended, observed, world.now, True, world.specs, before) is None
    world.run_pass()
    assert world.statuses["team-a/a"].status.phase is Phase.INVALID


def test_an_ended_run_whose_task_turns_invalid_keeps_its_record_in_the_read_back() -> None:
    """a ran under its explicit id "own" and succeeded; Ray has forgotten the job (past the
    history's retention). a and b are then edited to claim "shared", which neither has run
    with: both refused, and a turns Invalid, its status still recording the run under "own".
    That id is no longer the one a's spec derives and Ray lists no job under it, which an
    ended run's record survives: the read-back believes a's Invalid status as it believed
    the Succeeded one (no StatusIgnored, nothing written anew), a fixed point."""
    options = PlanOptions(queue_id="q", ray_history_retention_seconds=30.0)
    world = ReadBack(options, None, capacity=Capacity(4, 0, 64 * GIB), check=assert_identical)
    world.apply(("put", "a", {"submissionId": "own"}))
    world.apply(("put", "b", {}))
    world.run_pass()  # a and b submitted
    world.apply(("ray", 0, SUCCEEDED, 1))
    world.apply(("ray", 0, SUCCEEDED, 1))
    world.run_pass()
    assert world.statuses["a"].status.phase is Phase.SUCCEEDED
    world.apply(("tick", 61))
    world.run_pass()  # past the retention: the jobs deleted
    assert "own" not in world.jobs
    world.apply(("put", "a", {"submissionId": "shared"}))
    world.apply(("put", "b", {"submissionId": "shared"}))
    refused = world.run_pass()  # the read-back checked here (ReadBack._follow) must hold
    assert world.memo.fast and quiet_but_statuses(refused)
    body = world.statuses["a"].status
    assert body.phase is Phase.INVALID and body.submission_id == "own"
    assert world.checked >= 1
    written = dict(world.statuses)
    again = world.run_pass()
    assert not [e for e in again.events if e.reason is Reason.STATUS_IGNORED]
    assert world.statuses == written
