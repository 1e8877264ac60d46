"""The loop against a real local Ray head: what a user sees when they drop files in a folder."""

from __future__ import annotations

import time

import pytest

from specs.cluster import STOPPED

pytestmark = pytest.mark.ray

SLEEP = "python -c 'import time; time.sleep({})'"


def test_priority_order_under_contention(make_queue) -> None:
    q = make_queue(policy="strict")
    # Each task takes the whole 4-CPU cluster, so they must run one at a time.
    for name, priority in [("low", 1), ("high", 9), ("mid", 5)]:
        q.write(name, {"entrypoint": SLEEP.format(0.5), "resources": {"cpu": 4}}, priority)
    q.start()
    for name in ("low", "mid", "high"):
        q.wait_phase(name, {"Succeeded"}, timeout=90)
    jobs = {j.metadata["rayqueue.task"]: j for j in q.jobs()}
    order = sorted(jobs, key=lambda n: jobs[n].start_time or 0)
    assert order == ["high", "mid", "low"]
    # strict: each started only after the one before had ended
    assert jobs["mid"].start_time >= jobs["high"].end_time
    assert jobs["low"].start_time >= jobs["mid"].end_time


def test_timeout_really_stops_the_job(make_queue) -> None:
    q = make_queue()
    q.write("slow", {"entrypoint": SLEEP.format(120), "resources": {"cpu": 1}, "timeoutSeconds": 2})
    q.start()
    status = q.wait_phase("slow", {"TimedOut"}, timeout=60)
    assert status["reason"] == "TimeoutExceeded"
    q.wait_for(
        lambda: q.ray.job_info(str(status["submissionId"])).status == STOPPED,
        "Ray to report the job STOPPED",
    )


def test_deleting_a_running_spec_stops_its_job(make_queue) -> None:
    q = make_queue()
    q.write("victim", {"entrypoint": SLEEP.format(120), "resources": {"cpu": 1}})
    q.start()
    status = q.wait_phase("victim", {"Running"})
    sid = str(status["submissionId"])
    (q.dir / "victim.yaml").unlink()
    q.wait_for(lambda: q.ray.job_info(sid).status == STOPPED, "the job to be stopped")
    q.wait_for(lambda: not (q.dir / "victim.status.yaml").exists(), "the sidecar to go")


def test_restart_adopts_running_job_without_resubmitting(make_queue) -> None:
    q = make_queue()
    q.write("long", {"entrypoint": SLEEP.format(4), "resources": {"cpu": 1}})
    q.start()
    sid = str(q.wait_phase("long", {"Running"})["submissionId"])
    q.halt()
    q.start()  # a fresh Reconciler: nothing in memory, only the folder and Ray
    status = q.wait_phase("long", {"Succeeded"}, timeout=60)
    assert status["submissionId"] == sid
    assert [j.submission_id for j in q.jobs()] == [sid]


def test_invalid_file_beside_valid_ones(make_queue) -> None:
    q = make_queue()
    (q.dir / "broken.yaml").write_text(
        "apiVersion: rayqueue/v1\nkind: Task\nspec:\n  entrypoint: echo hi\n  priorty: 3\n"
        "  resources: {cpu: 1}\n"
    )
    q.write("fine", {"entrypoint": "echo fine", "resources": {"cpu": 1}})
    q.start()
    q.wait_phase("fine", {"Succeeded"})
    broken = q.wait_phase("broken", {"Invalid"})
    assert "priorty" in str(broken["message"]) and ":5:" in str(broken["message"])
    assert [j.metadata["rayqueue.task"] for j in q.jobs()] == ["fine"]


def test_failed_job_records_log_tail(make_queue) -> None:
    q = make_queue()
    q.write(
        "bad",
        {
            "entrypoint": "python -c 'print(\"boom-marker\"); raise SystemExit(3)'",
            "resources": {"cpu": 1},
        },
    )
    q.start()
    status = q.wait_phase("bad", {"Failed"})
    q.wait_for(lambda: "boom-marker" in str(q.status("bad").get("logTail", "")), "the log tail")
    assert status["rayStatus"] == "FAILED"


def test_spec_change_while_running_starts_new_run(make_queue) -> None:
    q = make_queue()
    q.write("job", {"entrypoint": SLEEP.format(120), "resources": {"cpu": 1}})
    q.start()
    first = str(q.wait_phase("job", {"Running"})["submissionId"])
    q.write("job", {"entrypoint": "echo v2", "resources": {"cpu": 1}})
    q.wait_for(lambda: q.status("job").get("submissionId") not in (None, first), "a new run")
    q.wait_phase("job", {"Succeeded"})
    q.wait_for(lambda: q.ray.job_info(first).status == STOPPED, "the old run to stop")
    assert len(q.jobs()) == 2


def test_file_event_wakes_loop_fast(make_queue) -> None:
    q = make_queue(interval_seconds=30.0)  # only the watcher can make this fast
    q.start()
    time.sleep(0.5)
    from reconciler.shell.watch.watcher import Watcher

    assert q.reconciler is not None and q.stop_event is not None
    watcher = Watcher(q.dir, q.reconciler.wake, q.stop_event)
    watcher.start()
    time.sleep(0.5)
    q.write("quick", {"entrypoint": "echo hi", "resources": {"cpu": 1}})
    # Without the watcher nothing would happen for 30 s.
    q.wait_phase("quick", {"Starting", "Running", "Succeeded"}, timeout=10)
