"""The quick examples of examples/tasks/ run to their end on the real local Ray head."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = {
    "hello": "Succeeded",
    "priority-high": "Succeeded",
    "priority-low": "Succeeded",
    "working-dir": "Succeeded",
    "team-a/preprocess": "Succeeded",
    "timeout": "TimedOut",  # the timeout demo is meant to be stopped
    "resumable": "Succeeded",
}


def test_example_tasks_run_to_the_end(make_queue, monkeypatch: pytest.MonkeyPatch) -> None:
    # working-dir.yaml's working_dir is relative to the repository root: Ray resolves it
    # against the submitting process's directory, as for `rayqueue serve` run from the root.
    monkeypatch.chdir(ROOT)
    q = make_queue()
    shutil.copytree(ROOT / "examples" / "tasks", q.dir, dirs_exist_ok=True)
    found = {p.relative_to(q.dir).with_suffix("").as_posix() for p in q.dir.rglob("*.yaml")}
    assert found == set(EXPECTED), "a new example? add it to EXPECTED"
    q.start()
    for name, phase in EXPECTED.items():
        status = q.wait_phase(name, {phase, "Failed", "Invalid"}, timeout=180)
        assert status["phase"] == phase, (name, status)

    jobs = {j.metadata["rayqueue.task"]: j for j in q.jobs()}
    assert jobs["working-dir"].status == "SUCCEEDED"
    assert "test job finished" in q.ray.logs(jobs["working-dir"].submission_id)
    # Priority demo: 9 was submitted before 1.
    assert jobs["priority-high"].start_time <= jobs["priority-low"].start_time
