"""`rayqueue get`: the table in queue order, the other formats, filters and -w."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from reconciler.cli import get
from specs.cluster import RUNNING
from tests.cli.conftest import spec_text, write
from tests.support.world import World


def names(table: str) -> list[str]:
    return [line.split()[0] for line in table.splitlines()[1:]]


def test_table_columns_and_queue_order(rq, world) -> None:
    t = world.tasks
    write(t, "runs", spec_text(cpu=3))
    world.step()
    sid = yaml.safe_load((t / "runs.status.yaml").read_text())["status"]["submissionId"]
    world.ray.set_status(sid, RUNNING)
    world.step()
    write(t, "waits-high", spec_text(cpu=2, priority=9))
    write(t, "waits-low", spec_text(priority=2, resources={"cpu": 2, "memory": "512Mi"}))
    write(t, "huge", spec_text(cpu=64, priority=5))
    write(t, "paused", spec_text(priority=8, suspend=True))
    write(t, "broken", spec_text().replace("priority: 0", "priorty: 1"))
    world.step()
    write(t, "unseen", spec_text(priority=3))  # no pass since: no sidecar yet

    result = rq("get")
    assert result.code == 0, result.err
    header = result.out.splitlines()[0].split()
    assert header == [
        "NAME", "PRIORITY", "PHASE", "CPU", "GPU", "MEMORY", "POSITION", "AGE", "MESSAGE",
    ]  # fmt: skip
    assert names(result.out) == [
        "runs",  # running first
        "waits-high",  # then the queue, by priority
        "waits-low",
        "paused",  # held back: suspended, unschedulable, not seen yet (by priority)
        "huge",
        "unseen",
        "broken",  # invalid
    ]
    rows = {line.split()[0]: line for line in result.out.splitlines()[1:]}
    assert rows["runs"].split()[1:4] == ["0", "Running", "3"]
    assert rows["waits-high"].split()[2] == "Queued"
    assert rows["waits-high"].split()[6] == "1"  # POSITION
    assert rows["waits-low"].split()[5:7] == ["512Mi", "2"]
    assert "needs 2 CPU" in rows["waits-high"]
    assert rows["huge"].split()[2] == "Unschedulable"
    assert rows["paused"].split()[2] == "Suspended"
    assert rows["unseen"].split()[2] == "-"
    assert rows["broken"].split()[1:3] == ["-", "Invalid"]
    assert "spec.priorty: unknown field" in rows["broken"]


def test_finished_tasks_come_last(rq, world) -> None:
    write(world.tasks, "done", spec_text(priority=9))
    world.step()
    sid = yaml.safe_load((world.tasks / "done.status.yaml").read_text())["status"]["submissionId"]
    world.ray.set_status(sid, "SUCCEEDED")
    world.step()
    write(world.tasks, "later", spec_text(cpu=64))
    world.step()
    out = rq("get").out
    assert names(out) == ["later", "done"]
    assert "Succeeded" in out.splitlines()[2]


def test_wide_adds_run_and_ray_columns(rq, world) -> None:
    labelled = spec_text().replace("kind: Task", "kind: Task\nmetadata:\n  labels: {team: x}")
    write(world.tasks, "a", labelled)
    world.step()
    world.step()  # the second pass sees the job in Ray
    out = rq("get", "-o", "wide").out
    header = out.splitlines()[0]
    for column in ("RUN", "SUBMISSION ID", "RAY STATUS", "LABELS", "MESSAGE"):
        assert column in header
    assert "team=x" in out and "rq-a-" in out and "PENDING" in out


def test_yaml_json_and_name(rq, world) -> None:
    write(world.tasks, "a", spec_text(priority=2))
    write(world.tasks, "team/b", spec_text())
    world.step()

    listing = yaml.safe_load(rq("get", "-o", "yaml").out)
    assert listing["kind"] == "List"
    assert [i["metadata"]["name"] for i in listing["items"]] == ["a", "team/b"]
    assert listing["items"][0]["spec"]["priority"] == 2
    assert listing["items"][0]["status"]["phase"] == "Starting"

    one = json.loads(rq("get", "a", "-o", "json").out)
    assert one["kind"] == "Task" and one["metadata"]["name"] == "a"
    assert one["status"]["submissionId"].startswith("rq-a-")

    assert rq("get", "-o", "name").out == "task/a\ntask/team/b\n"


def test_invalid_spec_in_yaml_output(rq, tasks: Path) -> None:
    write(tasks, "bad", "apiVersion: rayqueue/v1\nkind: Task\nspec: {}\n")
    item = yaml.safe_load(rq("get", "bad", "-o", "yaml").out)
    assert item["spec"] is None
    assert item["status"]["phase"] == "Invalid"
    assert "spec.entrypoint" in item["status"]["specError"]


def test_selectors_and_phase(rq, world) -> None:
    t = world.tasks
    labelled = spec_text().replace("kind: Task", "kind: Task\nmetadata:\n  labels: {team: v}")
    write(t, "vision", labelled)
    write(t, "other", spec_text(cpu=64))
    world.step()
    assert names(rq("get", "-l", "team=v").out) == ["vision"]
    assert names(rq("get", "-l", "team!=v").out) == ["other"]
    assert names(rq("get", "-l", "team").out) == ["vision"]
    assert names(rq("get", "-l", "!team").out) == ["other"]
    assert names(rq("get", "--phase", "unschedulable").out) == ["other"]
    assert names(rq("get", "--phase", "Starting,Unschedulable").out) == ["vision", "other"]
    assert rq("get", "--phase", "Sleeping").code == 2
    assert rq("get", "-l", "=x").code == 2


def test_names_and_not_found(rq, tasks: Path) -> None:
    write(tasks, "a", spec_text())
    write(tasks, "b", spec_text())
    assert names(rq("get", "b").out) == ["b"]
    result = rq("get", "a", "nope")
    assert result.code == 1
    assert names(result.out) == ["a"]
    assert 'task "nope" not found' in result.err


def test_empty_and_missing_folder(rq, tasks: Path, tmp_path: Path) -> None:
    result = rq("get")
    assert (result.code, result.out) == (0, "")
    assert "No tasks found" in result.err
    result = rq("get", folder=tmp_path / "nowhere")
    assert result.code == 1
    assert "does not exist" in result.err


def test_status_dir(rq, tasks: Path, tmp_path: Path) -> None:
    write(tasks, "a", spec_text())
    status_dir = tmp_path / "status"
    (status_dir).mkdir()
    (status_dir / "a.status.yaml").write_text(
        "apiVersion: rayqueue/v1\nkind: TaskStatus\nmetadata: {name: a}\n"
        "status: {phase: Queued, message: from the status dir, queuePosition: 1}\n"
    )
    assert "-" in rq("get").out.splitlines()[1].split()[2]
    out = rq("get", "--status-dir", str(status_dir)).out
    assert "Queued" in out and "from the status dir" in out


def test_watch_redraws_on_change_and_stops_on_ctrl_c(
    rq, tasks: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tasks, "a", spec_text())
    ticks = []

    def fake_sleep(seconds: float) -> None:
        ticks.append(seconds)
        if len(ticks) == 2:
            write(tasks, "b", spec_text())  # a change: one redraw
        if len(ticks) == 5:
            raise KeyboardInterrupt

    monkeypatch.setattr(time, "sleep", fake_sleep)
    result = rq("get", "-w")
    assert result.code == 0
    assert ticks == [get.WATCH_INTERVAL_SECONDS] * 5
    tables = result.out.split("\n\n")
    assert len(tables) == 2  # the first draw, and one redraw for the one change
    assert names(tables[0]) == ["a"]
    assert names(tables[1]) == ["a", "b"]


def test_beyond_the_exact_places_the_bucket_shows(rq, tasks: Path, tmp_path: Path) -> None:
    # Sidecars hold an exact place only for the first N of a queue; further back, the bucket.
    world = World.build(tasks, start=time.time(), tick=0.0, exact_queue_positions=1)
    t = world.tasks
    write(t, "runs", spec_text(cpu=4))
    world.step()
    write(t, "first", spec_text(cpu=2, priority=9))
    write(t, "second", spec_text(cpu=2, priority=1))
    world.step()

    result = rq("get")
    assert result.code == 0, result.err
    rows = {line.split()[0]: line.split() for line in result.out.splitlines()[1:]}
    assert rows["first"][6] == "1"
    assert rows["second"][6] == ">1"
