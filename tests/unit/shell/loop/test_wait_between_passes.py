"""The loop's wait comes from the last plan's deadline, at most the interval (Ray is only
seen by asking); a backlog of first records is written at the busy pace."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from reconciler.shell.loop.runner import Reconciler
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import RUNNING, Capacity
from specs.folder.store import TaskStore
from specs.settings.process import Settings
from tests.support.clock import FakeClock
from tests.support.specs import write_task


def make(tmp_path: Path) -> tuple[Reconciler, FakeRay, FakeClock]:
    clock = FakeClock()
    settings = Settings(tasks_dir=tmp_path, queue_id="q", api=False, git_revision=False)
    ray = FakeRay(Capacity(2, 0, 2**34), clock=clock)
    rec = Reconciler(settings, TaskStore(tmp_path, clock=clock), ray, clock=clock)
    return rec, ray, clock


def test_with_no_deadline_the_loop_polls_at_the_interval(tmp_path: Path) -> None:
    rec, ray, _clock = make(tmp_path)
    plan = rec.run_pass()
    assert plan is not None and plan.deadline is None  # an empty folder: nothing to time
    assert rec.next_wait() == rec.settings.interval_seconds
    write_task(tmp_path, "big", "sleep 1000", cpu=2)  # no timeout: no deadline either
    rec.run_pass()
    ray.set_status(next(iter(ray.jobs)), RUNNING)
    plan = rec.run_pass()
    # It wrote the clock (startedAt): it holds this instant only, which sets no earlier wake.
    assert plan is not None and plan.deadline == rec.clock()
    assert rec.next_wait() == rec.settings.interval_seconds
    plan = rec.run_pass()
    assert plan is not None and plan.still and plan.deadline is None
    assert rec.next_wait() == rec.settings.interval_seconds
    # The interval counts from the start of the pass.
    assert rec.next_wait(elapsed=0.25) == pytest.approx(rec.settings.interval_seconds - 0.25)


def test_the_loop_wakes_just_after_the_plans_deadline(tmp_path: Path) -> None:
    rec, ray, clock = make(tmp_path)
    write_task(tmp_path, "big", "sleep 1000", cpu=2, timeoutSeconds=100)
    rec.run_pass()
    (sid,) = ray.jobs
    ray.set_status(sid, RUNNING)
    rec.run_pass()
    started = ray.jobs[sid].start_time
    assert started is not None
    clock.now = started + 99.6
    plan = rec.run_pass()
    assert plan is not None and not plan.timeouts
    assert plan.deadline is not None and plan.deadline == pytest.approx(started + 100)
    assert rec.next_wait() == pytest.approx(0.4, abs=0.01)  # not the 1 s interval
    clock.now += rec.next_wait()
    plan = rec.run_pass()
    assert plan is not None and [t.task for t in plan.timeouts] == ["big"]


def test_a_plan_is_frozen(tmp_path: Path) -> None:
    rec, _ray, _clock = make(tmp_path)
    plan = rec.run_pass()
    assert plan is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.deadline = 0.0  # type: ignore[misc]


def test_a_backlog_of_first_records_is_written_at_the_busy_pace(tmp_path: Path) -> None:
    settings = Settings(
        tasks_dir=tmp_path, queue_id="q", api=False, status_write_budget=2, settle_seconds=0
    )
    pace = FakeClock()
    rec = Reconciler(settings, TaskStore(tmp_path), FakeRay(Capacity(1, 0, 2**34)), monotonic=pace)
    write_task(tmp_path, "blocker", "sleep 1000", cpu=1, priority=9)
    for i in range(7):
        write_task(tmp_path, f"t{i}", "echo hi", cpu=1)
    rec.run_pass()
    waits = []
    while rec.store.deferred_statuses:
        waits.append(rec.next_wait())
        rec.run_pass()
    assert waits and all(w == pytest.approx(0.1) for w in waits)
    pace.advance(100)  # long quiet: asking Ray backs off to the interval
    assert rec.next_wait() == pytest.approx(1.0)  # all written: the interval again
    assert all((tmp_path / f"t{i}.status.yaml").exists() for i in range(7))


def test_ray_is_asked_sooner_while_tasks_wait_on_running_jobs(tmp_path: Path) -> None:
    """A job's end is seen only by asking Ray: right after a change the loop asks at the busy
    pace, then backs off with the quiet time, never beyond the interval."""
    clock = FakeClock()
    settings = Settings(tasks_dir=tmp_path, queue_id="q", api=False, git_revision=False)
    ray = FakeRay(Capacity(1, 0, 2**34), clock=clock)
    store = TaskStore(tmp_path, clock=clock)
    rec = Reconciler(settings, store, ray, clock=clock, monotonic=clock)
    write_task(tmp_path, "first", "sleep 1000", cpu=1)
    write_task(tmp_path, "second", "sleep 1000", cpu=1)  # waits for first's CPU
    rec.run_pass()
    ray.set_status(next(iter(ray.jobs)), RUNNING)
    rec.run_pass()
    assert (rec.state.queued, rec.state.running) == (1, 1)
    assert rec.next_wait() == settings.busy_interval_seconds
    clock.advance(4)  # quiet for 4 s: 5 % of it
    assert rec.next_wait() == pytest.approx(0.2)
    clock.advance(60)
    assert rec.next_wait() == settings.interval_seconds
