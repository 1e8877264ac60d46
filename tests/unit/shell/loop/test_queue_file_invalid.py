"""An invalid `_queues.yaml` never holds a task back: a task dropped while it is invalid gets its
status in the next pass. With a last good configuration, that one stays in force; with none
(the file was never valid since serve started), every task is in the one default queue and
each waiting or running task has the condition `QueueConfigInvalid` naming file:line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from specs.cluster import RUNNING, Capacity
from tests.support.world import World

GOOD = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
      nominalQuota: {cpu: 1}
      borrowingLimit: {cpu: 0}
"""
BAD = GOOD.replace("{cpu: 1}", "{cpu: lots}")  # line 6, column 27


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    path = tmp_path / "tasks"
    (path / "team-a").mkdir(parents=True)
    return path


def _condition(status: dict[str, Any]) -> dict[str, Any] | None:
    found = [c for c in status.get("conditions", []) if c["type"] == "QueueConfigInvalid"]
    return found[0] if found else None


def test_invalid_from_the_start_one_default_queue_and_every_task_says_why(tasks: Path) -> None:
    (tasks / "_queues.yaml").write_text(BAD)
    world = World.build(tasks, Capacity(2, 0, 16 * 2**30))
    world.write("team-a/first", resources={"cpu": 2})
    world.step()
    world.ray.set_status(world.our_jobs()[0].submission_id, RUNNING)
    world.step()
    world.write("team-a/dropped", resources={"cpu": 1})
    world.step()  # the very next pass
    dropped = world.status("team-a/dropped")
    assert dropped["phase"] == "Queued"
    # No quotas in force: team-a's 1-CPU nominal quota does not hold a 2-CPU task back.
    assert world.status("team-a/first")["phase"] == "Running"
    for name in ("team-a/first", "team-a/dropped"):
        cond = _condition(world.status(name))
        assert cond is not None and cond["reason"] == "QueueConfigInvalid"
        assert cond["message"].startswith("_queues.yaml:6:27: spec.queues[0].nominalQuota.cpu")
        assert "one default queue" in cond["message"]
    # Fixed: the queues apply and the condition goes.
    (tasks / "_queues.yaml").write_text(GOOD)
    world.step()
    dropped = world.status("team-a/dropped")
    assert _condition(dropped) is None and dropped["queue"] == "team-a"
    assert _condition(world.status("team-a/first")) is None


def test_invalid_after_a_good_one_the_last_good_stays_and_tasks_carry_no_condition(
    tasks: Path,
) -> None:
    (tasks / "_queues.yaml").write_text(GOOD)
    world = World.build(tasks)
    world.write("team-a/first", resources={"cpu": 1})
    world.step()
    (tasks / "_queues.yaml").write_text(BAD)
    world.write("team-a/dropped", resources={"cpu": 1})
    world.step()
    dropped = world.status("team-a/dropped")
    assert dropped["phase"] == "Queued" and dropped["queue"] == "team-a"
    assert dropped["reason"] == "QuotaExceeded" or "team-a" in dropped["message"]
    assert _condition(dropped) is None


def test_a_file_that_turns_invalid_is_seen_by_a_pass_woken_only_by_its_event(
    tasks: Path,
) -> None:
    world = World.build(tasks, rescan_seconds=3600)
    world.reconciler.events.armed()  # as with a watcher: passes trust events between walks
    world.write("waiting", resources={"cpu": 64})  # never fits: Unschedulable, not in a queue
    world.write("queued", resources={"cpu": 4})
    world.write("zblocked", resources={"cpu": 1})  # behind "queued": the cluster is full
    world.step(3)
    assert _condition(world.status("zblocked")) is None
    config = tasks / "_queues.yaml"
    config.write_text(BAD)
    world.reconciler.events.add([str(config)])
    world.step()
    assert _condition(world.status("zblocked")) is not None
    assert _condition(world.status("waiting")) is None  # Unschedulable: no queue decides it
    config.unlink()
    world.reconciler.events.add([str(config)])
    world.step()
    assert _condition(world.status("zblocked")) is None
