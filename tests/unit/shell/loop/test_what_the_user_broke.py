"""Serve's log says what the user broke: one WARNING when a spec becomes invalid (file, line,
field, message), once per version of the file, again when it changes and is still invalid, an
INFO when it is valid again. The queue file settles as specs do: a `_queues.yaml` being written
(empty, then cut short) logs no error and changes no queue until it is complete; a complete
wrong one is reported once, and the last good configuration stays in force."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from reconciler.shell.loop.queuefile import QueueFile
from tests.support.world import World

GOOD = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
      nominalQuota: {cpu: 1}
"""
GROWN = (
    GOOD
    + """\
    - name: team-b
      nominalQuota: {cpu: 1}
"""
)
BAD = GOOD.replace("{cpu: 1}", "{cpu: lots}")


def _records(caplog: pytest.LogCaptureFixture, logger: str, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger and r.levelno == level]


# --- an invalid spec ------------------------------------------------------------------------


def test_an_invalid_spec_is_warned_once_per_version(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    world = World.build(tasks)
    caplog.set_level(logging.INFO, logger="rayqueue.specs")
    spec = tasks / "typo.yaml"
    head = "apiVersion: rayqueue/v1\nkind: Task\nspec:\n  entrypoint: x\n  resources: {cpu: 1}\n"
    spec.write_text(head + "  priorty: 3\n")
    world.step(3)
    warned = _records(caplog, "rayqueue.specs", logging.WARNING)
    assert warned == ["task typo: invalid spec: typo.yaml:6:3: spec.priorty: unknown field"]
    assert world.status("typo")["phase"] == "Invalid"
    # Changed and still invalid: warned again, with the new place.
    spec.write_text(head + "  prio: 3\n")
    world.step(2)
    warned = _records(caplog, "rayqueue.specs", logging.WARNING)
    assert len(warned) == 2 and "spec.prio" in warned[1]
    # Fixed: one INFO line, and no warning.
    spec.write_text(head)
    world.step(2)
    assert len(_records(caplog, "rayqueue.specs", logging.WARNING)) == 2
    assert _records(caplog, "rayqueue.specs", logging.INFO) == [
        "task typo: its spec is valid again"
    ]


# --- the queue file -------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def settled(tmp_path: Path) -> tuple[QueueFile, Clock]:
    clock = Clock()
    return QueueFile(tmp_path / "_queues.yaml", settle_seconds=1.0, clock=clock), clock


def test_a_queue_file_being_written_logs_nothing_and_changes_nothing(
    settled: tuple[QueueFile, Clock], caplog: pytest.LogCaptureFixture
) -> None:
    queues, clock = settled
    caplog.set_level(logging.INFO, logger="rayqueue.queues")
    queues.path.write_text(GOOD)
    os.utime(queues.path, (time.time() - 60, time.time() - 60))  # complete before serve looked
    first = queues.load()
    assert first.config is not None and first.config.queue_names() == ["team-a", "default"]
    # `cat > _queues.yaml`: first empty, then cut mid-write.
    for text in ("", GROWN[: len(GROWN) - 30]):
        queues.path.write_text(text)
        clock.now += 0.3
        loaded = queues.load()
        assert loaded.config == first.config and loaded.generation == first.generation
    assert _records(caplog, "rayqueue.queues", logging.ERROR) == []
    # Complete: read once it has stayed so for the settle time.
    queues.path.write_text(GROWN)
    for _ in range(2):
        clock.now += 0.45
        assert queues.load().generation == first.generation  # settling since first seen
    clock.now += 0.6
    grown = queues.load()
    assert grown.config is not None and grown.config.queue_names() == [
        "team-a",
        "team-b",
        "default",
    ]
    assert grown.generation > first.generation
    assert _records(caplog, "rayqueue.queues", logging.ERROR) == []


def test_a_complete_wrong_queue_file_is_reported_once_and_the_last_good_one_serves(
    settled: tuple[QueueFile, Clock], caplog: pytest.LogCaptureFixture
) -> None:
    queues, clock = settled
    queues.path.write_text(GOOD)
    clock.now += 2
    queues.load()
    clock.now += 2
    good = queues.load()
    assert good.config is not None
    queues.path.write_text(BAD)
    for _ in range(5):
        clock.now += 0.7
        loaded = queues.load()
    assert loaded.config == good.config  # the last good configuration keeps serving
    assert loaded.state is not None and not loaded.state.valid
    errors = _records(caplog, "rayqueue.queues", logging.ERROR)
    assert len(errors) == 1 and "_queues.yaml:6" in errors[0]
    assert "keeping the last good configuration" in errors[0]


def test_without_a_settle_time_the_file_is_read_as_it_is(tmp_path: Path) -> None:
    """`rayqueue plan` and the API read the file once, as it is."""
    path = tmp_path / "_queues.yaml"
    path.write_text(GOOD)
    loaded = QueueFile(path).load()
    assert loaded.config is not None and loaded.config.queue_names() == ["team-a", "default"]


def test_serve_s_loop_lets_its_queue_file_settle(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    world = World.build(tasks, settle_seconds=1.0)
    caplog.set_level(logging.INFO, logger="rayqueue.queues")
    (tasks / "_queues.yaml").write_text("")  # `cat >` has opened it
    world.step(seconds=0.2)
    assert _records(caplog, "rayqueue.queues", logging.ERROR) == []
    (tasks / "_queues.yaml").write_text(GOOD)
    world.step(passes=4, seconds=0.5)
    assert _records(caplog, "rayqueue.queues", logging.ERROR) == []
    assert world.reconciler.queue_file.load().config is not None
