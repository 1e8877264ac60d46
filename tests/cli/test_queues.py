"""`rayqueue queues`, and the loop behind it: _queues.yaml read, bad edits kept out, the
queues' status written beside the config."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from tests.cli.conftest import spec_text, write

CONFIG = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
      nominalQuota: {cpu: 2}
    - name: team-b
      nominalQuota: {cpu: 2}
      borrowingLimit: {cpu: 0}
"""


def _status(tasks: Path) -> dict[str, object]:
    return yaml.safe_load((tasks / "_queues.status.yaml").read_text())["status"]


def test_table_after_a_pass(rq, world) -> None:
    # The messages below are strict's (backfill adds why it cannot promise a start).
    world.reconciler.options = replace(world.reconciler.options, policy="strict")
    t = world.tasks
    (t / "_queues.yaml").write_text(CONFIG)
    for i in range(4):
        write(t, f"team-b/b{i}", spec_text(cpu=1))
    write(t, "team-a/a0", spec_text(cpu=1))
    write(t, "loose", spec_text(cpu=1))
    world.step()

    head = yaml.safe_load((t / "team-b/b2.status.yaml").read_text())["status"]
    assert head["queue"] == "team-b" and head["reason"] == "QuotaExceeded"
    assert (head["queuePosition"], head["message"]) == (
        1,
        "team-b uses 2/2 CPU of its quota; can borrow 0 more (borrowingLimit 0); first in team-b",
    )
    behind = yaml.safe_load((t / "team-b/b3.status.yaml").read_text())["status"]
    assert (behind["queuePosition"], behind["reason"]) == (2, "WaitingBehindHigherPriority")

    result = rq("queues")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert lines[0].split() == [
        "NAME", "NOMINAL", "USED", "BORROWED", "PAST", "SHARE", "PENDING", "RUNNING",
        "PREEMPTION", "BORROWING-LIMIT",
    ]  # fmt: skip
    rows = {line.split()[0]: line for line in lines[1:] if line.strip()}
    assert set(rows) == {"team-a", "team-b", "default"}
    assert rows["team-b"].split()[-4:] == ["2", "2", "none", "cpu=0"]  # 2 pending, 2 running
    assert rows["team-a"].split()[-4:-2] == ["0", "1"]
    assert "0.000" in rows["team-b"]  # 2 of its 2 nominal CPUs: nothing borrowed, share 0

    as_json = json.loads(rq("queues", "-o", "json").out)
    assert as_json["kind"] == "QueueStatus"
    entry = next(q for q in as_json["status"]["queues"] if q["name"] == "default")
    assert entry["nominalQuota"]["cpu"] == 0  # the 4-CPU fake cluster is all team quota
    assert entry["borrowed"]["cpu"] == 1
    assert yaml.safe_load(rq("queues", "-o", "yaml").out) == as_json


def test_a_bad_edit_keeps_the_last_good_config(rq, world, caplog) -> None:
    t = world.tasks
    (t / "_queues.yaml").write_text(CONFIG)
    for i in range(3):
        write(t, f"team-b/b{i}", spec_text(cpu=1))
    world.step()
    (t / "_queues.yaml").write_text(CONFIG.replace("borrowingLimit", "borowingLimit"))
    write(t, "team-b/late", spec_text(cpu=1, priority=9))
    world.step()

    state = _status(t)["config"]
    assert state["valid"] is False and state["inForce"] is True
    assert "spec.queues[1].borowingLimit: unknown field" in state["error"]
    assert "_queues.yaml:9:7" in state["error"]
    assert any("keeping the last good configuration" in r.message for r in caplog.records)
    # still team-b's 2-CPU quota without borrowing: the late task waits
    late = yaml.safe_load((t / "team-b/late.status.yaml").read_text())["status"]
    assert late["phase"] == "Queued" and late["reason"] == "QuotaExceeded"
    result = rq("queues")
    assert result.code == 0 and "is invalid (the last good one is in force)" in result.err

    (t / "_queues.yaml").write_text(CONFIG)
    world.step()
    assert _status(t)["config"] == {"file": str(t / "_queues.yaml"), "valid": True, "inForce": True}


def test_without_a_config_there_are_no_queues(rq, world) -> None:
    write(world.tasks, "team-a/a0", spec_text(cpu=1))
    world.step()
    assert not (world.tasks / "_queues.status.yaml").exists()
    status = yaml.safe_load((world.tasks / "team-a/a0.status.yaml").read_text())["status"]
    assert "queue" not in status
    result = rq("queues")
    assert result.code == 1 and "no queues are configured" in result.err


def test_removing_the_config_goes_back_to_one_queue(world) -> None:
    t = world.tasks
    (t / "_queues.yaml").write_text(CONFIG)
    write(t, "team-a/a0", spec_text(cpu=1))
    world.step()
    assert (t / "_queues.status.yaml").exists()
    (t / "_queues.yaml").unlink()
    world.step()
    assert not (t / "_queues.status.yaml").exists()
    status = yaml.safe_load((t / "team-a/a0.status.yaml").read_text())["status"]
    assert "queue" not in status


def test_decayed_usage_is_kept_shown_and_survives_a_restart(rq, world, tmp_path) -> None:
    from tests.support.world import World

    t = world.tasks
    (t / "_queues.yaml").write_text(CONFIG + "  fairSharing: {usageHalfLife: 1h}\n")
    write(t, "team-a/a0", spec_text(cpu=2))
    world.step()
    world.step()  # a0 is Running, holding 2 CPUs
    write(t, "team-a/a1", spec_text(cpu=4))  # a change, so the next pass plans
    world.step(seconds=3600)
    past = next(q for q in _status(t)["queues"] if q["name"] == "team-a")["decayedUsage"]
    # an hour at 2 CPUs with a 1 h half-life: 2 x tau x (1 - 1/2) = 2 x 3600 / (2 ln 2)
    assert past["cpu"] == pytest.approx(2 * 3600 / (2 * math.log(2)), rel=1e-3)
    assert _status(t)["fairSharing"] == {"mode": "DecayedUsage", "usageHalfLife": 3600.0}
    row = next(line for line in rq("queues").out.splitlines() if line.startswith("team-a"))
    assert "1.44 CPU-h" in row

    # serve stops; a0 goes on in Ray for an hour; serve starts again and plans
    later = World.build(
        t,
        ray=world.ray,
        start=world.clock() + 3600,
        tick=0.0,
        queue_id=world.reconciler.options.queue_id,
        state_dir=tmp_path / "state",
    )
    write(t, "team-a/a2", spec_text(cpu=4))
    later.step()
    again = next(q for q in _status(t)["queues"] if q["name"] == "team-a")["decayedUsage"]
    # the first hour halved, plus another hour at 2 CPUs: what one uninterrupted serve counts
    assert again["cpu"] == pytest.approx(past["cpu"] * 1.5, rel=1e-3)


def test_a_zero_weight_or_half_life_keeps_the_last_good_config(world) -> None:
    t = world.tasks
    (t / "_queues.yaml").write_text(CONFIG + "  fairSharing: {usageHalfLife: 2h}\n")
    write(t, "team-a/a0", spec_text(cpu=1))
    world.step()
    for bad, where in (
        (CONFIG + "  fairSharing: {usageHalfLife: 0h}\n", "_queues.yaml:10:32"),
        (
            CONFIG.replace(
                "nominalQuota: {cpu: 2}\n    - name: team-b", "weight: 0\n    - name: team-b", 1
            ),
            "_queues.yaml:6:15",
        ),
    ):
        (t / "_queues.yaml").write_text(bad)
        write(t, "team-a/a1", spec_text(cpu=1))  # a change, so the pass plans
        world.step()
        state = _status(t)
        assert state["config"]["valid"] is False and state["config"]["inForce"] is True
        assert where in state["config"]["error"], state["config"]["error"]
        assert state["fairSharing"]["usageHalfLife"] == 7200.0  # the last good one
        (t / "team-a/a1.yaml").unlink()


def test_memory_is_shown_in_binary_units(rq, world) -> None:
    # A quota in bytes, as a node's memory is reported, reads as Kubernetes writes it.
    t = world.tasks
    (t / "_queues.yaml").write_text(
        CONFIG.replace(
            "nominalQuota: {cpu: 2}\n    - name: team-b",
            "nominalQuota: {cpu: 2, memory: 16145911399B}\n    - name: team-b",
            1,
        )
    )
    world.step()
    result = rq("queues")
    assert result.code == 0, result.err
    row = next(line for line in result.out.splitlines() if line.startswith("team-a"))
    assert "2 CPU, 15Gi" in row and "16145911399" not in result.out


def test_a_default_queue_without_cpus_is_warned_of_once(world, caplog) -> None:
    # team-a's nominal quota is the whole 4-CPU cluster: top-level tasks get none of their own.
    t = world.tasks
    (t / "_queues.yaml").write_text(
        CONFIG.replace("nominalQuota: {cpu: 2}", "nominalQuota: {cpu: 4}", 1)
    )
    write(t, "loose", spec_text(cpu=1))
    with caplog.at_level("WARNING"):
        world.step()
        world.step()
    said = [r.getMessage() for r in caplog.records if "queue default" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("queue default (tasks outside every listed")
    assert "nominal quota of 0" in said[0] and "lower a listed nominalQuota" in said[0]
    caplog.clear()  # 1 + 2 of 4 CPU: default has 1 CPU of its own, and nothing is said
    (t / "_queues.yaml").write_text(
        CONFIG.replace("nominalQuota: {cpu: 2}", "nominalQuota: {cpu: 1}", 1)
    )
    with caplog.at_level("WARNING"):
        world.step()
    assert not [r for r in caplog.records if "queue default" in r.getMessage()]
