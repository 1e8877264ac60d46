"""Tampering made visible: on one shared Ray cluster any job can stop another team's job
through Ray's own API, which rayqueue cannot prevent. A run of ours that ends STOPPED without
a stop from us is shown so in its status (StoppedInRay) and must also leave an audit line, so
the tampering is seen where the operator looks for who changed what."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from reconciler.shell.loop.runner import Reconciler
from reconciler.shell.ops.metrics import QueueMetrics
from specs.cluster import RUNNING, STOPPED
from specs.queues.config import DEFAULT_QUEUE
from tests.support.world import World
from tests.unit.shell.ops.test_metrics import value


def _stopped_from_outside(world: World) -> dict[str, object]:
    world.write("team-b/train")
    world.step(2)
    submission_id = str(world.status("team-b/train")["submissionId"])
    world.ray.set_status(submission_id, RUNNING)
    world.step()
    world.ray.set_status(submission_id, STOPPED)  # another job's Ray client stopped it
    world.step(2)
    assert world.ray.calls["stop"] == 0  # not by us
    return world.status("team-b/train")


def test_a_stop_from_outside_shows_in_the_status(
    make_world: Callable[..., tuple[World, TestClient]], tasks_dir: Path
) -> None:
    world, _ = make_world()
    status = _stopped_from_outside(world)
    assert status["reason"] == "StoppedInRay"
    assert "outside rayqueue" in str(status["message"])


def test_a_stop_from_outside_leaves_an_audit_line(
    make_world: Callable[..., tuple[World, TestClient]],
    tasks_dir: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    world, _ = make_world()
    with caplog.at_level(logging.INFO):
        status = _stopped_from_outside(world)
        world.step(3)  # later passes record nothing new: one line per run
    audit = [r.getMessage() for r in caplog.records if r.name == "rayqueue.audit"]
    lines = [line for line in audit if "team-b/train" in line]
    assert len(lines) == 1, audit
    assert "outside rayqueue" in lines[0] and str(status["submissionId"]) in lines[0]


def test_a_stop_of_ours_leaves_no_audit_line(
    make_world: Callable[..., tuple[World, TestClient]],
    tasks_dir: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A run rayqueue stops itself (here: its spec asks to suspend it) is no tampering."""
    world, _ = make_world()
    world.write("team-b/train")
    world.step(2)
    world.ray.set_status(str(world.status("team-b/train")["submissionId"]), RUNNING)
    world.step()
    with caplog.at_level(logging.INFO):
        world.write("team-b/train", suspend=True)
        world.step(3)
    assert world.ray.calls["stop"] == 1
    assert world.status("team-b/train")["phase"] == "Suspended"
    assert [r for r in caplog.records if r.name == "rayqueue.audit"] == []


def test_a_stop_from_outside_is_counted(tasks_dir: Path) -> None:
    world = World.build(tasks_dir)
    metrics = QueueMetrics("0")
    old = world.reconciler
    world.reconciler = Reconciler(
        old.settings, old.store, world.ray, clock=world.clock, metrics=metrics
    )
    name = "rayqueue_stopped_in_ray_tasks_total"
    assert value(metrics, name, queue=DEFAULT_QUEUE) == 0  # the series exists before any stop
    _stopped_from_outside(world)
    world.step(3)
    assert value(metrics, name, queue=DEFAULT_QUEUE) == 1
