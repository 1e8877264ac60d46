"""The run history file (whole lines, capped fields, rotation) and the ledger that fills it,
wired in the loop with the fake Ray: a run seen by the censuses while it lives ends in one
record, its aggregate dropped; each team queue's totals reach `_queues.status.yaml`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from reconciler.app.assembly import build_reconciler
from reconciler.shell.loop.runner import Reconciler
from reconciler.shell.ops.rightsize import GI, RunIdentity, RunUse
from reconciler.shell.ops.runhistory import (
    FILE_NAME,
    QueueUse,
    RunHistory,
    read_records,
    rolled_up,
)
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import RUNNING, SUCCEEDED, Capacity, Usage
from specs.settings.process import Settings
from specs.tenancy.access import Tokens


def a_record(task: str = "train", run: int = 1) -> object:
    use = RunUse()
    use.observe(0, Capacity(1), Usage(cpu_percent=100, memory=GI), complete=True)
    return use.record(RunIdentity(task, run, f"{task}-{run}", "q", Capacity(2)), ended_at=10)


def test_records_are_whole_lines_read_back_oldest_first(tmp_path: Path) -> None:
    history = RunHistory(tmp_path / FILE_NAME, 1 << 20)
    for run in (1, 2, 3):
        history.append(a_record(run=run))  # type: ignore[arg-type]
    # A line being written (no newline yet) and a foreign line are skipped.
    with (tmp_path / FILE_NAME).open("ab") as fh:
        fh.write(b'{"not": "a record"}\n{"task": "half')
    assert [r.run for r in history.records()] == [1, 2, 3]


def test_every_field_is_capped(tmp_path: Path) -> None:
    history = RunHistory(tmp_path / FILE_NAME, 1 << 20)
    history.append(a_record("x" * 100_000))  # type: ignore[arg-type]
    line = (tmp_path / FILE_NAME).read_bytes()
    assert len(line) < 2048 and line.endswith(b"\n")
    assert json.loads(line)["task"].endswith("[... cut]")


def test_the_file_rotates_and_keeps_four(tmp_path: Path) -> None:
    path = tmp_path / FILE_NAME
    history = RunHistory(path, 2000)
    for run in range(1, 60):
        history.append(a_record(run=run))  # type: ignore[arg-type]
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == [FILE_NAME, f"{FILE_NAME}.1", f"{FILE_NAME}.2", f"{FILE_NAME}.3"]
    assert all(p.stat().st_size <= 2000 for p in tmp_path.iterdir())
    runs = [r.run for r in read_records(path)]
    assert runs == sorted(runs) and runs[-1] == 59 and runs[0] > 1  # the oldest dropped


def test_sub_queues_roll_up_into_their_parent() -> None:
    one = QueueUse().plus(Capacity(2), Capacity(1), None, True)
    totals = rolled_up({"team-a/x": one, "team-a": one}, {"team-a/x": "team-a", "team-a": None})
    assert totals["team-a"].runs == 2 and totals["team-a"].held == Capacity(2)
    assert totals["team-a/x"].runs == 1


QUEUES = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
      nominalQuota: {cpu: 8}
"""


class World:
    def __init__(self, tmp_path: Path) -> None:
        self.now = 1000.0
        self.tasks = tmp_path
        self.fake = FakeRay(Capacity(8, 0, 64 * GI), clock=lambda: self.now)
        settings = Settings(
            tasks_dir=tmp_path, queue_id="q", api=False, census_seconds=5, settle_seconds=0
        )
        self.loop: Reconciler = build_reconciler(
            settings, self.fake, tokens=Tokens(), clock=lambda: self.now
        )

    def census(self, seconds: float) -> None:
        """A pass, then a census, `seconds` later, then the pass that reads it."""
        self.now += seconds
        self.loop.run_pass()
        assert self.loop.census is not None
        self.loop.census.take()
        self.loop.run_pass()

    def history(self) -> list[dict[str, object]]:
        path = self.tasks / ".rayqueue" / FILE_NAME
        lines = path.read_text().splitlines() if path.exists() else []
        return [json.loads(line) for line in lines]


@pytest.fixture
def world(tmp_path: Path) -> World:
    (tmp_path / "_queues.yaml").write_text(QUEUES)
    (tmp_path / "team-a").mkdir()
    (tmp_path / "team-a" / "train.yaml").write_text(
        "apiVersion: rayqueue/v1\nkind: Task\nspec:\n  entrypoint: python t.py\n"
        "  resources: {cpu: 2, memory: 4Gi}\n"
    )
    return World(tmp_path)


def test_a_run_followed_by_the_censuses_ends_in_one_record(world: World) -> None:
    world.loop.run_pass()
    (sid,) = world.fake.jobs
    world.fake.set_status(sid, RUNNING)
    world.fake.hold(sid, actors=Capacity(1), usage=Usage(cpu_percent=40, memory=GI))
    world.census(1)
    world.fake.hold(sid, actors=Capacity(1), usage=Usage(cpu_percent=60, memory=2 * GI))
    world.census(10)
    assert world.loop.report.ledger is not None and sid in world.loop.report.ledger.live

    status = yaml.safe_load((world.tasks / "_queues.status.yaml").read_text())["status"]
    (team,) = [q for q in status["queues"] if q["name"] == "team-a"]
    assert team["observed"]["runs"] == 1
    assert team["observed"]["declared"]["cpu"] == 2 and team["observed"]["held"]["cpu"] == 1
    assert team["observed"]["used"]["memory"] == "2Gi" and "observedAt" in status
    assert team["usage"]["cpu"] == 2  # the planner's figures stay as they were

    world.fake.set_status(sid, SUCCEEDED, now=world.now + 10)
    world.census(20)
    (line,) = world.history()
    assert line["task"] == "team-a/train" and line["queue"] == "team-a"
    assert line["outcome"] == SUCCEEDED and line["polls"] == 2 and not line["lowerBound"]
    assert line["declared"] == {"cpu": 2.0, "gpu": 0.0, "memory": 4 * GI}
    assert line["peak"]["cpu"] == 1 and line["mean"]["cpu"] == 1
    assert line["peakMemory"] == 2 * GI
    # 0.4 cores for 10 s, then 0.6 held for at most 2.5 censuses (12.5 s) of the 10 s left.
    assert line["cpuEfficiency"] == pytest.approx((0.4 * 10 + 0.6 * 10) / 20 / 2)
    assert world.loop.report.ledger is not None and not world.loop.report.ledger.live
    world.census(5)
    assert len(world.history()) == 1  # recorded once


def test_a_cut_census_marks_the_record_a_lower_bound(world: World) -> None:
    world.loop.run_pass()
    (sid,) = world.fake.jobs
    world.fake.set_status(sid, RUNNING)
    world.fake.hold(sid, tasks=Capacity(3), complete=False)
    world.census(1)
    world.fake.set_status(sid, SUCCEEDED)
    world.census(5)
    (line,) = world.history()
    assert line["lowerBound"] is True and line["peak"]["cpu"] == 3


def test_nothing_is_written_without_a_census(tmp_path: Path) -> None:
    settings = Settings(tasks_dir=tmp_path, queue_id="q", api=False, census_seconds=0)
    loop = build_reconciler(settings, FakeRay(), tokens=Tokens())
    (tmp_path / "a.yaml").write_text(
        "apiVersion: rayqueue/v1\nkind: Task\nspec:\n  entrypoint: x\n"
    )
    loop.run_pass()
    assert loop.report.ledger is None
    assert not os.path.exists(tmp_path / ".rayqueue" / FILE_NAME)
