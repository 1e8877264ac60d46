"""Bounded output against a real Ray head: a failing job that prints one huge line ends Failed
with a log tail within its cap, read from Ray by its last lines (never the whole log), and the
logs route's `tail` reads only the end too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from specs.cluster import EARLIER_CUT
from specs.task.status import LOG_LINE_BYTES, LOG_TAIL_BYTES, TEXT_BYTES
from tests.api.conftest import task_json
from tests.tenancy.conftest import auth
from tests.tenancy.realloop import RealLoop, real_loop

pytestmark = pytest.mark.ray

HUGE_LINE = 16 << 20  # one line of 16 MiB, the log's last but one


@pytest.fixture
def loop_and_api(
    ray_head: str, tasks_dir: Path, tokens_file: Path
) -> Iterator[tuple[RealLoop, TestClient]]:
    with real_loop(ray_head, tasks_dir, tokens_file) as loop:
        yield loop, loop.api


def test_a_job_printing_a_huge_line_fails_with_a_capped_tail(
    loop_and_api: tuple[RealLoop, TestClient], tasks_dir: Path
) -> None:
    loop, api = loop_and_api
    printing = f"import sys; print('x' * {HUGE_LINE}); print('the end'); sys.exit(3)"
    a = auth("team-a")
    assert api.put("/tasks/team-a/noisy", json=task_json(f'python -c "{printing}"'), headers=a)
    loop.until(lambda: loop.status("team-a/noisy").get("phase") == "Failed", "the job to fail")
    loop.until(lambda: "logTail" in loop.status("team-a/noisy"), "the log tail")
    status = loop.status("team-a/noisy")
    tail = str(status["logTail"])
    assert tail == EARLIER_CUT + "\nthe end", tail[-100:]  # the huge line, said to be cut
    assert len(tail.encode()) <= LOG_TAIL_BYTES
    assert all(len(line.encode()) <= LOG_LINE_BYTES for line in tail.splitlines())
    assert len(str(status.get("message", "")).encode()) <= TEXT_BYTES
    sidecar = loop.reconciler.store.status_path("team-a/noisy")
    assert sidecar.stat().st_size <= LOG_TAIL_BYTES + TEXT_BYTES + 4096
    # The route's tail: the last line; the huge one past the route's byte cap, said so.
    last = api.get("/tasks/team-a/noisy/logs", params={"tail": 1}, headers=a)
    assert last.status_code == 200 and last.text == "the end\n"
    two = api.get("/tasks/team-a/noisy/logs", params={"tail": 2}, headers=a).text
    assert two == EARLIER_CUT + "\nthe end\n"
