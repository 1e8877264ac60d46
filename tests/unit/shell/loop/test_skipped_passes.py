"""A pass that would change nothing is skipped, and only then: every skipped pass equals what a
full read of the folder and of Ray would plan at that instant (no action, the same statuses),
and a file event, a change in Ray, or a deadline brings the full pass back."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from reconciler.core import planner
from reconciler.shell.loop.runner import Reconciler, observe_ray, plan_options, scan_specs
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import RUNNING, SUCCEEDED, Capacity
from specs.folder.store import TaskStore
from specs.settings.process import Settings
from tests.support.clock import FakeClock
from tests.support.specs import read_status, write_task


def make(tmp_path: Path) -> tuple[Reconciler, FakeRay, FakeClock]:
    clock = FakeClock()
    ray = FakeRay(Capacity(2, 0, 2**34), clock=clock)
    settings = Settings(
        tasks_dir=tmp_path, queue_id="q", api=False, rescan_seconds=3600, git_revision=False
    )
    rec = Reconciler(settings, TaskStore(tmp_path, clock=clock), ray, clock=clock)
    rec.events.armed()  # as with a watcher: passes trust events between rescans
    return rec, ray, clock


def full_plan(rec: Reconciler, ray: FakeRay, clock: FakeClock) -> planner.Plan:
    """What a fresh read of everything plans now, as a restarted loop would."""
    store = TaskStore(rec.settings.tasks_dir)
    return planner.plan(
        scan_specs(store),
        store.read_statuses(),
        observe_ray(ray),
        datetime.fromtimestamp(clock(), UTC),
        plan_options(rec.settings),
    )


def assert_changes_nothing(plan: planner.Plan, rec: Reconciler) -> None:
    assert not (plan.submits or plan.stops or plan.timeouts or plan.preemptions)
    assert {n: s.status for n, s in plan.statuses.items()} == {
        n: s.status for n, s in rec.store.read_statuses().items()
    }


def settle(rec: Reconciler) -> None:
    """Passes until one skips: statuses written, positions recorded."""
    before = rec.skipped
    for _ in range(6):
        rec.run_pass()
        if rec.skipped > before:
            return
    raise AssertionError("no pass was ever still")


def test_still_passes_are_skipped_and_equal_a_full_read(tmp_path: Path) -> None:
    rec, ray, clock = make(tmp_path)
    write_task(tmp_path, "big", "sleep 1000", cpu=2, priority=9, timeoutSeconds=100)
    write_task(tmp_path, "small", "echo hi", cpu=1)
    rec.run_pass()
    (sid,) = ray.jobs
    ray.set_status(sid, RUNNING)
    settle(rec)
    for _ in range(5):
        clock.advance(1)
        skipped, calls = rec.skipped, ray.calls["list_jobs"]
        rec.run_pass()
        assert rec.skipped == skipped + 1
        # Ray is still asked every pass: a job's end is only seen by asking.
        assert ray.calls["list_jobs"] == calls + 1
        assert_changes_nothing(full_plan(rec, ray, clock), rec)
    assert read_status(tmp_path, "small")["reason"] != ""


def test_a_file_event_brings_the_full_pass_back(tmp_path: Path) -> None:
    rec, ray, _clock = make(tmp_path)
    write_task(tmp_path, "big", "sleep 1000", cpu=2, priority=9)
    rec.run_pass()
    ray.set_status(next(iter(ray.jobs)), RUNNING)
    settle(rec)
    path = write_task(tmp_path, "new", "echo new", cpu=1)
    rec.events.add([str(path)])
    skipped = rec.skipped
    rec.run_pass()
    assert rec.skipped == skipped
    assert read_status(tmp_path, "new")["phase"] == "Queued"


def test_a_job_that_ends_brings_the_full_pass_back(tmp_path: Path) -> None:
    rec, ray, _clock = make(tmp_path)
    write_task(tmp_path, "big", "sleep 1000", cpu=2, priority=9)
    write_task(tmp_path, "small", "echo hi", cpu=1)
    rec.run_pass()
    (sid,) = ray.jobs
    ray.set_status(sid, RUNNING)
    settle(rec)
    ray.set_status(sid, SUCCEEDED)
    skipped = rec.skipped
    plan = rec.run_pass()
    assert rec.skipped == skipped
    assert plan is not None and [s.task for s in plan.submits] == ["small"]


def test_a_deadline_brings_the_full_pass_back_at_its_instant(tmp_path: Path) -> None:
    rec, ray, clock = make(tmp_path)
    write_task(tmp_path, "big", "sleep 1000", cpu=2, priority=9, timeoutSeconds=100)
    rec.run_pass()
    (sid,) = ray.jobs
    ray.set_status(sid, RUNNING)
    settle(rec)
    started = ray.jobs[sid].start_time
    assert started is not None
    clock.now = started + 99
    skipped = rec.skipped
    rec.run_pass()
    assert rec.skipped == skipped + 1  # not yet
    clock.now = started + 100.5
    plan = rec.run_pass()
    assert rec.skipped == skipped + 1
    assert plan is not None and [t.task for t in plan.timeouts] == ["big"]


def test_a_file_still_settling_is_never_skipped_over(tmp_path: Path) -> None:
    clock = FakeClock()
    store = TaskStore(tmp_path, settle_seconds=1.0, clock=clock)
    write_task(tmp_path, "a", "python one.py")
    store.scan()
    assert store.still()
    path = tmp_path / "a.yaml"
    path.write_text(path.read_text().replace("one", "two"))  # in place: it settles
    store.scan({str(path)})
    assert not store.still()  # the next scan must look at it again, with no new event
    clock.advance(1.0)
    store.scan(set())
    assert store.still()


def test_a_swapped_root_link_is_never_skipped_over(tmp_path: Path) -> None:
    for rev in ("rev1", "rev2"):
        (tmp_path / rev).mkdir()
        write_task(tmp_path / rev, "a", f"python {rev}.py")
    root = tmp_path / "current"
    root.symlink_to(tmp_path / "rev1")
    store = TaskStore(root)
    store.scan()
    assert store.still()
    (tmp_path / "next").symlink_to(tmp_path / "rev2")
    (tmp_path / "next").replace(root)  # git-sync's atomic swap
    assert not store.still()


def test_a_walk_that_reads_back_the_same_inputs_is_still_and_one_that_finds_more_is_not(
    tmp_path: Path,
) -> None:
    rec, ray, clock = make(tmp_path)
    write_task(tmp_path, "big", "sleep 1000", cpu=2, priority=9)
    write_task(tmp_path, "small", "echo hi", cpu=1)
    rec.run_pass()
    ray.set_status(next(iter(ray.jobs)), RUNNING)
    settle(rec)
    rec.events.lost()  # the next pass walks the whole folder and rereads every sidecar
    skipped = rec.skipped
    rec.run_pass()
    assert rec.skipped == skipped + 1  # the walk found nothing new: the planner did not run
    assert_changes_nothing(full_plan(rec, ray, clock), rec)
    write_task(tmp_path, "missed", "echo missed", cpu=1)  # no event reaches the loop
    clock.advance(2)  # past the settle time of a file written in place
    rec.events.lost()
    rec.run_pass()
    rec.events.lost()
    rec.run_pass()
    assert read_status(tmp_path, "missed")["phase"] == "Queued"
