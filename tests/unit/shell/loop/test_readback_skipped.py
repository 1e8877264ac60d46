"""In the loop: the pass that reads back what the last one wrote is skipped without calling
the planner when the last plan only moved statuses and nothing else changed since; it then
equals what a full read of the folder and of Ray plans at that instant (nothing). A change in
Ray, a file event, a full walk or a failed write brings the planned pass back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reconciler.core.planner import Plan
from reconciler.shell.loop import runner as loop
from reconciler.shell.loop.runner import Reconciler
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import RUNNING, SUCCEEDED
from tests.support.clock import FakeClock
from tests.support.specs import write_task
from tests.unit.shell.loop.test_skipped_passes import assert_changes_nothing, full_plan, make

_PLAN = loop.incremental.plan_incremental


@pytest.fixture
def loop_with_plans(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Reconciler, FakeRay, FakeClock, list[Plan]]:
    rec, ray, clock = make(tmp_path)
    plans: list[Plan] = []

    def planned(*args: Any, **kwargs: Any) -> Any:
        plan, memo = _PLAN(*args, **kwargs)
        if not memo.stood:  # a plan that stands is not planned (incremental.Stand)
            plans.append(plan)
        return plan, memo

    monkeypatch.setattr(loop.incremental, "plan_incremental", planned)
    for name in "abcd":
        write_task(tmp_path, name, "sleep 1", cpu=1)
    rec.run_pass()  # a and b submitted (2 CPUs), c and d wait
    return rec, ray, clock, plans


def step(rec: Reconciler, clock: FakeClock, plans: list[Plan]) -> Plan | None:
    """One pass 0.1 s later: its plan, or None if the planner was not called."""
    clock.advance(0.1)
    before = len(plans)
    rec.run_pass()
    return plans[-1] if len(plans) > before else None


def test_the_read_back_is_skipped_and_equals_a_full_read(loop_with_plans) -> None:
    rec, ray, clock, plans = loop_with_plans
    moved = step(rec, clock, plans)  # Ray lists the jobs PENDING: the statuses move
    assert moved is not None and not moved.still and not moved.submits and moved.write_classes
    skipped = rec.skipped
    assert step(rec, clock, plans) is None  # the read-back: not planned
    assert rec.skipped == skipped + 1
    assert_changes_nothing(full_plan(rec, ray, clock), rec)
    # and the passes after it are still ones, as after any still pass
    assert step(rec, clock, plans) is None
    assert_changes_nothing(full_plan(rec, ray, clock), rec)
    # A job's end and the next start: the pass that submits is planned, as is the next one
    # (the new job listed), whose read-back is skipped again.
    sid = sorted(ray.jobs)[0]
    ray.set_status(sid, RUNNING)
    assert step(rec, clock, plans) is not None
    ray.set_status(sid, SUCCEEDED)
    ended = step(rec, clock, plans)
    assert ended is not None and ended.submits
    assert step(rec, clock, plans) is not None
    assert step(rec, clock, plans) is None
    assert_changes_nothing(full_plan(rec, ray, clock), rec)


def test_a_change_in_ray_with_the_read_back_is_planned(loop_with_plans) -> None:
    rec, ray, clock, plans = loop_with_plans
    assert step(rec, clock, plans) is not None
    ray.set_status(sorted(ray.jobs)[0], RUNNING)
    running = step(rec, clock, plans)
    assert running is not None and running.write_classes


def test_a_file_event_with_the_read_back_is_planned(loop_with_plans, tmp_path: Path) -> None:
    rec, _ray, clock, plans = loop_with_plans
    assert step(rec, clock, plans) is not None
    write_task(tmp_path, "e", "sleep 1", cpu=1)
    rec.events.add([str(tmp_path / "e.yaml")])
    assert step(rec, clock, plans) is not None


def test_a_walk_with_the_read_back_is_planned(loop_with_plans) -> None:
    rec, _ray, clock, plans = loop_with_plans
    assert step(rec, clock, plans) is not None
    rec.events.lost()  # events may be lost: the next pass walks and rereads every sidecar
    assert step(rec, clock, plans) is not None


def test_a_failed_write_leaves_no_read_back(
    loop_with_plans, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec, _ray, clock, plans = loop_with_plans

    def refuse(*args: Any, **kwargs: Any) -> bool:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(rec.store, "write_status", refuse)
    monkeypatch.setattr(rec.store, "defer_status", refuse)
    assert step(rec, clock, plans) is not None
    monkeypatch.undo()
    monkeypatch.setattr(loop.incremental, "plan_incremental", _PLAN)
    before = rec.skipped
    rec.run_pass()  # the statuses not written are planned again, not skipped
    assert rec.skipped == before
