"""`rayqueue logs`: the current run's log from Ray, -f to follow, clear errors otherwise."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from reconciler.cli import common
from specs.cluster import RUNNING, RayUnavailable
from tests.cli.conftest import spec_text, write


@pytest.fixture
def running(world, monkeypatch: pytest.MonkeyPatch):
    write(world.tasks, "train", spec_text())
    world.step()
    status = yaml.safe_load((world.tasks / "train.status.yaml").read_text())["status"]
    sid = status["submissionId"]
    world.ray.set_status(sid, RUNNING)
    world.ray.set_logs(sid, "one\ntwo\nthree\n")
    addresses = []

    def adapter(address: str, *args: object, **kwargs: object):
        addresses.append(address)
        return world.ray

    monkeypatch.setattr(common, "make_adapter", adapter)
    world.addresses = addresses
    return world


def test_prints_the_log(rq, running) -> None:
    result = rq("logs", "train", "--address", "http://head:8265")
    assert (result.code, result.out) == (0, "one\ntwo\nthree\n")
    assert running.addresses == ["http://head:8265"]
    assert rq("logs", "train", "--address", "http://head:8265", "--tail", "2").out == "two\nthree\n"


def test_address_from_the_environment(rq, running, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_ADDRESS", "http://from-ray-address:8265")
    assert rq("logs", "train").code == 0
    monkeypatch.setenv("RAY_DASHBOARD_ADDRESS", "http://dashboard:8265")
    assert rq("logs", "train").code == 0
    assert running.addresses == ["http://from-ray-address:8265", "http://dashboard:8265"]


def test_follow_streams_chunks_and_closes(rq, running, monkeypatch: pytest.MonkeyPatch) -> None:
    closed = []

    def tail(sid: str) -> Iterator[str]:
        try:
            yield "first\n"
            yield "second\n"
        finally:
            closed.append(sid)

    monkeypatch.setattr(running.ray, "tail_logs", tail)
    result = rq("logs", "train", "-f", "--address", "http://head:8265")
    assert (result.code, result.out) == (0, "first\nsecond\n")
    assert len(closed) == 1


def test_follow_stops_cleanly_on_ctrl_c(rq, running, monkeypatch: pytest.MonkeyPatch) -> None:
    closed = []

    def tail(sid: str) -> Iterator[str]:
        try:
            yield "first\n"
            raise KeyboardInterrupt
        finally:
            closed.append(sid)

    monkeypatch.setattr(running.ray, "tail_logs", tail)
    result = rq("logs", "train", "-f", "--address", "http://head:8265")
    assert (result.code, result.out) == (0, "first\n")
    assert closed


def test_no_address_is_a_clear_error(rq, running) -> None:
    result = rq("logs", "train")
    assert result.code == 1
    assert "--address" in result.err and "RAY_DASHBOARD_ADDRESS" in result.err


def test_not_submitted_and_not_found(rq, world, tasks: Path) -> None:
    write(tasks, "waits", spec_text(cpu=64))
    write(tasks, "fresh", spec_text())
    world.reconciler.run_pass()
    (tasks / "fresh.status.yaml").unlink()
    address = ("--address", "http://head:8265")
    waits = rq("logs", "waits", *address)
    assert waits.code == 1 and "not been submitted" in waits.err and "Unschedulable" in waits.err
    fresh = rq("logs", "fresh", *address)
    assert fresh.code == 1 and "no status yet" in fresh.err
    nope = rq("logs", "nope", *address)
    assert nope.code == 1 and 'task "nope" not found' in nope.err


def test_ray_errors(rq, running) -> None:
    running.ray.fail_next("logs", RayUnavailable("connection refused"))
    result = rq("logs", "train", "--address", "http://head:8265")
    assert result.code == 1 and "connection refused" in result.err
    running.ray.jobs.clear()
    result = rq("logs", "train", "--address", "http://head:8265")
    assert result.code == 1 and "has no job" in result.err


def test_tail_and_follow_conflict(rq, running) -> None:
    result = rq("logs", "train", "-f", "--tail", "3", "--address", "http://head:8265")
    assert result.code == 2


def test_not_an_http_address(rq, world, tasks: Path) -> None:
    write(tasks, "train", spec_text())
    world.step()
    result = rq("logs", "train", "--address", "ray://head:10001")
    assert result.code == 2 and "Ray Client address" in result.err and "HOST:6379" in result.err
