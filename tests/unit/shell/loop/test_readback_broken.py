"""The read-back of a pass that ended the run of a task whose spec it could not use is planned.

A broken file never stops a healthy job: it runs on under the last valid spec; so does a spec
the pass refuses though it parses (an explicit id another task has or claims too). The pass
that sees its job end records the outcome (Succeeded, Failed, a retry's Queued), a plan that
only moves statuses; the next pass, reading that back, turns the task Invalid. So the planner
is not a fixed point of that plan's output, and its read-back must not be skipped
(reconciler/core/incremental/standing.py). Found by the property in
tests/unit/core/incremental/test_standing_fixed_point.py, played here on purpose.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.core.incremental.standing import quiet_but_statuses
from reconciler.core.planner import Observation, plan
from specs.cluster import RUNNING, STOPPED, SUCCEEDED, Capacity
from specs.folder.atomic import write_atomic
from specs.settings.process import PlanOptions
from specs.task.models import Phase
from tests.support.incremental_history import assert_identical
from tests.support.planner_world import GIB
from tests.support.specs import read_status, write_task
from tests.unit.core.incremental.test_sequences import Sequence, names_of
from tests.unit.core.incremental.test_standing_fixed_point import ReadBack
from tests.unit.shell.loop.test_skipped_passes import assert_changes_nothing, full_plan, make


@pytest.mark.parametrize(("outcome", "after"), [(SUCCEEDED, Phase.SUCCEEDED), (STOPPED, None)])
def test_a_broken_specs_run_that_ends_has_its_read_back_planned(
    outcome: str, after: Phase | None
) -> None:
    options = PlanOptions(queue_id="q", policy="backfill", exact_queue_positions=5)
    world = ReadBack(options, None, capacity=Capacity(4, 0, 64 * GIB), check=assert_identical)
    run = Sequence(world, names_of(20), plain=True)
    run.put("t000", {"cpu": 1, "retry": {"limit": 2, "backoffSeconds": 7, "on": ["Lost"]}})
    world.run_pass()
    run.run(("start_all",))
    run.run(("tick", 1))
    assert world.statuses["t000"].status.phase is Phase.RUNNING
    run.run(("break", 0))  # t000's file no longer parses: its job runs on
    assert world.statuses["t000"].status.phase is Phase.RUNNING
    sid = world.statuses["t000"].status.submission_id
    assert sid is not None and world.jobs[sid].status == RUNNING
    world.apply(("ray", 0, outcome, 1))  # its job ends (the only live one)
    ended = world.run_pass()  # the read-back checked here (ReadBack._follow) must hold
    assert world.memo.fast and quiet_but_statuses(ended)
    phase = world.statuses["t000"].status.phase
    assert phase is not Phase.INVALID and not phase.active
    if after is not None:
        assert phase is after
    # Why: a full read of what that pass wrote moves the task on (to Invalid).
    observed = Observation(dict(world.jobs), world.capacity)
    again = plan(
        world.specs, world.statuses, observed, datetime.fromtimestamp(world.now, UTC), options
    )
    assert again.statuses["t000"].status.phase is Phase.INVALID
    world.run_pass()  # planned, not skipped: the loop writes Invalid
    assert world.statuses["t000"].status.phase is Phase.INVALID


def test_in_the_loop_a_broken_specs_ended_run_turns_invalid(tmp_path: Path) -> None:
    """As served: the pass that records the end is planned and so is its read-back, which
    writes Invalid, as a full read of the folder and of Ray gives."""
    rec, ray, clock = make(tmp_path)
    path = write_task(tmp_path, "a", "sleep 1", cpu=1)
    rec.run_pass()  # submitted
    (sid,) = ray.jobs
    ray.set_status(sid, RUNNING)
    for _ in range(3):
        clock.advance(0.1)
        rec.run_pass()
    assert read_status(tmp_path, "a")["phase"] == "Running"
    write_atomic(path, b"kind: [unclosed\n")
    rec.events.add([str(path)])
    clock.advance(0.1)
    rec.run_pass()
    assert read_status(tmp_path, "a")["phase"] == "Running"  # a broken file stops no job
    ray.set_status(sid, SUCCEEDED)
    clock.advance(0.1)
    rec.run_pass()  # records the end
    assert read_status(tmp_path, "a")["phase"] == "Succeeded"
    clock.advance(0.1)
    rec.run_pass()  # its read-back: planned
    assert read_status(tmp_path, "a")["phase"] == "Invalid"
    assert_changes_nothing(full_plan(rec, ray, clock), rec)


def test_in_the_loop_an_ended_run_under_a_refused_explicit_id_turns_invalid(
    tmp_path: Path,
) -> None:
    """As a broken file's: a runs, then its file and b's both claim the id "x", which none has
    run with (both refused; a's run goes on). The pass that records a's end is planned, and
    so is its read-back, which writes Invalid, as a full read of the folder and of Ray gives."""
    rec, ray, clock = make(tmp_path)
    path = write_task(tmp_path, "a", "sleep 1", cpu=1)
    rec.run_pass()  # submitted
    (sid,) = ray.jobs
    ray.set_status(sid, RUNNING)
    for _ in range(3):
        clock.advance(0.1)
        rec.run_pass()
    assert read_status(tmp_path, "a")["phase"] == "Running"
    other = write_task(tmp_path, "b", "sleep 1", cpu=1, submissionId="x")
    write_task(tmp_path, "a", "sleep 1", cpu=1, submissionId="x")
    rec.events.add([str(path), str(other)])
    clock.advance(0.1)
    rec.run_pass()
    assert read_status(tmp_path, "a")["phase"] == "Running"  # a refused id stops no job
    assert read_status(tmp_path, "b")["phase"] == "Invalid"
    ray.set_status(sid, SUCCEEDED)
    clock.advance(0.1)
    rec.run_pass()  # records the end
    assert read_status(tmp_path, "a")["phase"] == "Succeeded"
    clock.advance(0.1)
    rec.run_pass()  # its read-back: planned
    assert read_status(tmp_path, "a")["phase"] == "Invalid"
    assert_changes_nothing(full_plan(rec, ray, clock), rec)
