"""Bounded output: what a team puts in its folder or prints from its job must not grow the
statuses without limit. A dependency ring of many small files must not write the whole ring
into every member's message (quadratic sidecars and listings); a failing job that prints one
huge line must not copy it whole into its status's log tail. The caps below are the wanted
ones: a status message at most 4 KiB, a log tail at most 16 KiB."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fastapi.testclient import TestClient

from specs.cluster import FAILED
from tests.support.world import World

MESSAGE_CAP = 4 * 1024
LOG_TAIL_CAP = 16 * 1024
RING = 200  # members, with long names: the ring written out is some 8 KiB, twice the cap
MEMBER = "ring/a-member-of-a-long-dependency-ring-{:04}"


def test_a_dependency_rings_messages_are_capped(
    make_world: Callable[..., tuple[World, TestClient]], tasks_dir: Path
) -> None:
    world, _ = make_world()
    for i in range(RING):
        world.write(MEMBER.format(i), dependsOn=[{"name": MEMBER.format((i + 1) % RING)}])
    world.step(2)
    statuses = {MEMBER.format(i): world.status(MEMBER.format(i)) for i in range(RING)}
    assert {s.get("reason") for s in statuses.values()} == {"DependencyCycle"}
    longest = max(len(str(s.get("message", "")).encode()) for s in statuses.values())
    assert longest <= MESSAGE_CAP, f"a member's message is {longest} bytes"


def test_a_huge_log_line_is_capped_in_the_log_tail(
    make_world: Callable[..., tuple[World, TestClient]], tasks_dir: Path
) -> None:
    world, _ = make_world()
    world.write("team-a/noisy")
    world.step(2)
    submission_id = str(world.status("team-a/noisy")["submissionId"])
    world.ray.set_logs(submission_id, "starting\n" + "x" * (1 << 20) + "\n")
    world.ray.set_status(submission_id, FAILED)
    world.step(2)
    status = world.status("team-a/noisy")
    assert status["phase"] == "Failed", status["phase"]
    size = len(str(status.get("logTail", "")).encode())
    assert size <= LOG_TAIL_CAP, f"the log tail is {size} bytes"
    sidecar = world.reconciler.store.status_path("team-a/noisy")
    assert sidecar.stat().st_size <= LOG_TAIL_CAP + MESSAGE_CAP + 4096
