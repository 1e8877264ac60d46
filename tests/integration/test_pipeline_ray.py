"""Retries and dependencies against a real local Ray head, timed by Ray's own clock."""

from __future__ import annotations

import itertools

import pytest

from specs.cluster import META_RUN, META_TASK, RayJob

pytestmark = pytest.mark.ray

EXIT_1 = "python -c 'import sys; sys.exit(1)'"
SLEEP = "python -c 'import time; time.sleep({})'"


def runs_of(q, name: str) -> list[RayJob]:  # type: ignore[no-untyped-def]
    jobs = [j for j in q.jobs() if j.metadata.get(META_TASK) == name]
    return sorted(jobs, key=lambda j: int(j.metadata[META_RUN]))


def test_always_failing_task_runs_limit_plus_one_times_with_backoff(make_queue) -> None:
    q = make_queue()
    q.write(
        "flaky",
        {"entrypoint": EXIT_1, "resources": {"cpu": 1}, "retry": {"limit": 2, "backoffSeconds": 2}},
    )
    q.start()
    q.wait_for(lambda: q.status("flaky").get("reason") == "RetryBackoff", "the first backoff")
    status = q.wait_phase("flaky", {"Failed"}, timeout=120)
    assert status["reason"] == "BackoffLimitExceeded", status
    assert status["exitCode"] == 1 and status["retries"] == 2 and status["run"] == 3
    assert "3 runs" in str(status["message"]) and "exit code 1" in str(status["message"])
    runs = runs_of(q, "flaky")
    assert [j.status for j in runs] == ["FAILED"] * 3
    assert [j.exit_code for j in runs] == [1, 1, 1]
    # Ray's start_time is the submission; each retry waits its backoff after the run before.
    gaps = [b.start_time - a.end_time for a, b in itertools.pairwise(runs)]  # type: ignore[operator]
    print(f"retry gaps in Ray: {[round(g, 2) for g in gaps]} s")  # for the docs (pytest -s)
    assert gaps[0] >= 2 and gaps[1] >= 4, gaps


def test_three_step_pipeline_runs_in_order(make_queue) -> None:
    q = make_queue()
    q.write("c-report", {"entrypoint": "echo report", "resources": {"cpu": 1},
                         "dependsOn": [{"name": "b-train", "condition": "Finished"}]})  # fmt: skip
    q.write("b-train", {"entrypoint": SLEEP.format(1), "resources": {"cpu": 1},
                        "dependsOn": [{"name": "a-prep"}]})  # fmt: skip
    q.write("a-prep", {"entrypoint": SLEEP.format(1), "resources": {"cpu": 1}})
    q.start()
    waiting = q.wait_phase("c-report", {"Queued"})
    assert waiting["reason"] == "WaitingForDependency" and "b-train" in str(waiting["message"])
    for name in ("a-prep", "b-train", "c-report"):
        q.wait_phase(name, {"Succeeded"}, timeout=120)
    prep, train, report = (runs_of(q, n)[-1] for n in ("a-prep", "b-train", "c-report"))
    assert train.start_time is not None and prep.end_time is not None
    assert train.start_time >= prep.end_time
    assert report.start_time is not None and train.end_time is not None
    assert report.start_time >= train.end_time


def test_failed_dependency_rerun_lets_the_dependent_run(make_queue) -> None:
    q = make_queue()
    q.write("prep", {"entrypoint": EXIT_1, "resources": {"cpu": 1}})
    q.write("train", {"entrypoint": "echo trained", "resources": {"cpu": 1},
                      "dependsOn": [{"name": "prep"}]})  # fmt: skip
    q.start()
    q.wait_phase("prep", {"Failed"})
    q.wait_for(lambda: q.status("train").get("reason") == "DependencyFailed", "DependencyFailed")
    assert runs_of(q, "train") == []
    q.write("prep", {"entrypoint": "echo fixed", "resources": {"cpu": 1}})  # fix and rerun
    q.wait_phase("prep", {"Succeeded"}, timeout=60)
    q.wait_phase("train", {"Succeeded"}, timeout=60)
    prep_runs, train_runs = runs_of(q, "prep"), runs_of(q, "train")
    assert len(prep_runs) == 2 and len(train_runs) == 1
    assert train_runs[0].start_time >= prep_runs[1].end_time  # type: ignore[operator]
