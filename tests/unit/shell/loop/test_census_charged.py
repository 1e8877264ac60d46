"""The loop charges what its census saw each Ray job hold (shell/loop/holdings.py joined in
Reconciler.observe), against the fake Ray: a run that holds more than it declares keeps the
queue from submitting into a cluster full in fact; a census too old is not read."""

from __future__ import annotations

from pathlib import Path

from reconciler.shell.loop.holdings import STALE_INTERVALS
from reconciler.shell.loop.runner import Reconciler
from reconciler.shell.ops.census import CensusPoller
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import RUNNING, Capacity
from specs.folder.store import TaskStore
from specs.settings.process import Settings
from tests.support.clock import FakeClock
from tests.support.specs import read_status, write_task

CENSUS_SECONDS = 5.0


def make(tmp_path: Path) -> tuple[Reconciler, FakeRay, FakeClock, CensusPoller]:
    clock = FakeClock()
    ray = FakeRay(Capacity(4, 0, 2**34), clock=clock)
    settings = Settings(tasks_dir=tmp_path, queue_id="q", api=False, git_revision=False)
    census = CensusPoller(ray, CENSUS_SECONDS)
    rec = Reconciler(settings, TaskStore(tmp_path, clock=clock), ray, clock=clock, census=census)
    return rec, ray, clock, census


def test_a_run_holding_the_cluster_keeps_the_queue_waiting_until_the_census_is_stale(
    tmp_path: Path,
) -> None:
    rec, ray, clock, census = make(tmp_path)
    write_task(tmp_path, "holder", cpu=1)
    rec.run_pass()
    sid = read_status(tmp_path, "holder")["submissionId"]
    ray.set_status(sid, RUNNING)
    ray.hold(sid, actors=Capacity(4))
    clock.advance(1)
    census.take()
    clock.advance(1)
    write_task(tmp_path, "next", cpu=2)
    rec.run_pass()
    observed = rec.observe()
    assert observed.held == {sid: Capacity(4)} and observed.ray_available == Capacity(0, 0, 2**34)
    status = read_status(tmp_path, "next")
    assert "submissionId" not in status
    assert "cluster full in fact: holder holds 4 CPU, declared 1" in status["message"]
    # No census since: past three intervals it is not read, and the declarations admit.
    clock.advance(STALE_INTERVALS * CENSUS_SECONDS)
    rec.run_pass()
    assert rec.observe().held == {}
    assert read_status(tmp_path, "next").get("submissionId")
