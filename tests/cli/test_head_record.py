"""`logs`, `plan` and `describe` find the Ray of a running `rayqueue serve` in its state folder."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from reconciler.shell.ops import head_record
from tests.cli.test_logs import running  # noqa: F401  (the fixture)


@pytest.fixture
def recorded(running):  # noqa: F811
    head_record.write(running.tasks / ".rayqueue", "http://127.0.0.1:40121", private=True)
    return running


def test_logs_uses_the_recorded_head_and_says_so(rq, recorded) -> None:
    result = rq("logs", "train")
    assert (result.code, result.out) == (0, "one\ntwo\nthree\n")
    assert recorded.addresses == ["http://127.0.0.1:40121"]
    assert "private Ray head of rayqueue serve" in result.err
    assert f"pid {os.getpid()}" in result.err and "http://127.0.0.1:40121" in result.err


def test_an_explicit_address_wins_over_the_record(rq, recorded) -> None:
    assert rq("logs", "train", "--address", "http://head:8265").code == 0
    assert recorded.addresses == ["http://head:8265"]


def test_plan_and_describe_use_it_too(rq, recorded) -> None:
    result = rq("plan")
    assert result.code == 0, result.err
    assert "Ray at http://127.0.0.1:40121" in result.out
    described = rq("describe", "train")
    assert described.code == 0
    assert "http://127.0.0.1:40121/#/jobs/" in described.out
    assert "using the private Ray head" in described.err


def test_a_stale_record_is_ignored_with_a_message(rq, running) -> None:  # noqa: F811
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    record = head_record.HeadRecord("http://127.0.0.1:40121", child.pid, private=True)
    state = running.tasks / ".rayqueue"
    state.mkdir(exist_ok=True)
    (state / head_record.RECORD_NAME).write_text(record.to_json())
    result = rq("logs", "train")
    assert result.code == 1
    assert "no longer running" in result.err
    assert "start `rayqueue serve` on this folder, pass --address" in result.err
    assert running.addresses == []
    described = rq("describe", "train")
    assert described.code == 0 and "no longer running" in described.err


def test_without_record_or_address_logs_explains(rq, running) -> None:  # noqa: F811
    result = rq("logs", "train")
    assert result.code == 1
    assert "no running `rayqueue serve` recorded" in result.err
    assert running.addresses == []
