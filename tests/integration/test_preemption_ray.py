"""Preemption on the real Ray head: urgent work starts within a pass plus the grace period,
exactly the minimal victims are stopped in Ray, and each victim runs again and succeeds."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from specs.cluster import RUNNING, STOPPED, SUCCEEDED, RayJob
from specs.folder.atomic import write_atomic
from tests.integration.conftest import Queue

pytestmark = [pytest.mark.ray, pytest.mark.timeout(240)]

GRACE = 4
# A victim that ignores SIGTERM, so only the SIGKILL after the grace period ends it; it prints
# what it saw. It sleeps 60 s while the marker file exists, else 3 s: the test removes the
# marker once the preemption is seen, so each victim's second run soon succeeds.
SLEEPER = """\
import os, signal, sys, time
print("stop wait", os.environ.get("RAY_JOB_STOP_WAIT_TIME_S"), flush=True)
print("run", os.environ.get("RAYQUEUE_RUN"), os.environ.get("RAYQUEUE_PREEMPTED"), flush=True)
signal.signal(signal.SIGTERM, lambda *args: print("got SIGTERM", flush=True))
end = time.time() + (60 if os.path.exists(sys.argv[1]) else 3)
while time.time() < end:
    time.sleep(0.1)
"""


def test_urgent_task_preempts_minimal_victims_who_run_again(
    make_queue: Callable[..., Queue],
) -> None:
    q = make_queue(
        preemption="LowerPriority",
        preemption_grace_seconds=GRACE,
        interval_seconds=0.5,
    )
    entry, marker = _sleeper(q)
    for i in range(4):
        q.write(f"low{i}", {"entrypoint": entry, "resources": {"cpu": 1}}, priority=0)
    q.start()
    for i in range(4):
        q.wait_phase(f"low{i}", {"Running"}, timeout=90)

    q.write("urgent", {"entrypoint": "python -c 'print(9)'", "resources": {"cpu": 2}}, 9)
    written = time.time()
    q.wait_for(lambda: q.status("urgent").get("submittedAt"), "the urgent task to be submitted", 60)
    preempted = sorted(n for n in (f"low{i}" for i in range(4)) if q.status(n).get("preemptions"))
    assert len(preempted) == 2, {n: q.status(n) for n in (f"low{i}" for i in range(4))}
    marker.unlink()

    # Exactly the minimal victims were stopped in Ray; the two others still run.
    runs1 = {j.metadata["rayqueue.task"]: j for j in q.jobs() if j.metadata["rayqueue.run"] == "1"}
    assert {n for n, j in runs1.items() if j.status == STOPPED} == set(preempted)
    assert all(
        runs1[n].status == RUNNING for n in runs1 if n.startswith("low") and n not in preempted
    )
    _assert_preempted_with_grace(q, "urgent", written, runs1[preempted[0]], "WithinQueue")

    q.wait_phase("urgent", {"Succeeded"}, timeout=60)
    for name in preempted:
        final = q.wait_phase(name, {"Succeeded"}, timeout=90)
        assert final["run"] == 2 and final["preemptions"] == 1
        assert "conditions" not in final  # the condition ends when the next run starts
    jobs = q.jobs()
    assert sorted(
        (j.metadata["rayqueue.task"], j.metadata["rayqueue.run"], j.status)
        for j in jobs
        if j.metadata["rayqueue.task"] in preempted
    ) == sorted([(n, "1", STOPPED) for n in preempted] + [(n, "2", SUCCEEDED) for n in preempted])
    # Each run is told its number, and the run after a preemption that it follows one.
    told = {
        (j.metadata["rayqueue.task"], j.metadata["rayqueue.run"]): q.ray.logs(j.submission_id)
        for j in jobs
        if j.metadata["rayqueue.task"] in preempted
    }
    for name in preempted:
        assert "run 1 None" in told[(name, "1")] and "run 2 1" in told[(name, "2")]


RECLAIM_QUEUES = {
    "apiVersion": "rayqueue/v1",
    "kind": "QueueConfig",
    "spec": {
        "queues": [
            # The grace is the victim's queue's: its jobs carry it from their submission.
            {
                "name": "team-a",
                "nominalQuota": {"cpu": 2},
                "preemption": {"gracePeriodSeconds": GRACE},
            },
            {
                "name": "team-b",
                "nominalQuota": {"cpu": 2},
                "preemption": {"reclaimWithinCohort": "Any"},
            },
        ]
    },
}


def test_a_queue_below_its_quota_reclaims_exactly_what_was_lent(
    make_queue: Callable[..., Queue],
) -> None:
    """team-a borrows team-b's idle half of the 4-CPU head; team-b's task takes it back by
    stopping exactly two of team-a's runs (the youngest), which run again once there is room."""
    q = make_queue(interval_seconds=0.5)
    write_atomic(q.dir / "_queues.yaml", yaml.safe_dump(RECLAIM_QUEUES).encode())
    entry, marker = _sleeper(q)
    names = [f"team-a/a{i}" for i in range(4)]
    for name in names:
        q.write(name, {"entrypoint": entry, "resources": {"cpu": 1}}, priority=5)
    q.start()
    for name in names:
        q.wait_phase(name, {"Running"}, timeout=90)

    started = {n: str(q.status(n)["startedAt"]) for n in names}  # ISO 8601 UTC: sorts as time
    # Priority 0: reclaim under `Any` does not ask for a higher priority than the victims'.
    q.write("team-b/b", {"entrypoint": "python -c 'print(2)'", "resources": {"cpu": 2}}, 0)
    written = time.time()
    q.wait_for(lambda: q.status("team-b/b").get("submittedAt"), "team-b's task to start", 60)
    preempted = sorted(n for n in names if q.status(n).get("preemptions"))
    assert len(preempted) == 2, {n: q.status(n) for n in names}
    marker.unlink()

    runs1 = {j.metadata["rayqueue.task"]: j for j in q.jobs() if j.metadata["rayqueue.run"] == "1"}
    assert {n for n in names if runs1[n].status == STOPPED} == set(preempted)
    assert all(runs1[n].status == RUNNING for n in names if n not in preempted)
    # The victims are the two youngest of team-a's runs (the least work thrown away), the
    # names breaking a tie between runs seen starting in the same pass.
    youngest = sorted(names, key=lambda n: (-_epoch(started[n]), n))
    assert set(preempted) == set(youngest[:2]), started
    _assert_preempted_with_grace(q, "team-b/b", written, runs1[preempted[0]], "Reclaim")

    q.wait_phase("team-b/b", {"Succeeded"}, timeout=60)
    for name in preempted:
        final = q.wait_phase(name, {"Succeeded"}, timeout=120)
        assert final["run"] == 2 and final["preemptions"] == 1


def _epoch(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _sleeper(q: Queue) -> tuple[str, Path]:
    """SLEEPER beside q's folder: its entrypoint, and the marker that keeps it sleeping long."""
    script, marker = q.dir.parent / f"{q.dir.name}-sleeper.py", q.dir.parent / f"{q.dir.name}.long"
    script.write_text(SLEEPER)
    marker.write_text("")
    return f"python {script} {marker}", marker


def _job_of(q: Queue, task: str) -> RayJob | None:
    return next((j for j in q.jobs() if j.metadata["rayqueue.task"] == task), None)


def _assert_preempted_with_grace(
    q: Queue, preemptor: str, written: float, victim_run: RayJob, reason: str
) -> None:
    # Within one pass plus the grace period (the victims ignore SIGTERM, so SIGKILL ends them)
    # plus Ray's own latency in starting the supervisor and reporting the stop.
    # Its status records the run before Ray has it (the write-ahead record comes first).
    q.wait_for(lambda: _job_of(q, preemptor) is not None, f"{preemptor}'s job in Ray", 30)
    job = _job_of(q, preemptor)
    assert job is not None and job.start_time is not None
    waited = job.start_time - written
    assert waited <= 0.5 + GRACE + 6, f"{preemptor} started {waited:.1f}s after it was written"
    assert waited >= GRACE - 1, "the victims did not get their grace period"

    # What a stopped job saw: the grace in its environment, then SIGTERM.
    log = q.ray.logs(victim_run.submission_id)
    assert f"stop wait {GRACE}" in log and "got SIGTERM" in log

    status = q.status(victim_run.metadata["rayqueue.task"])
    if status.get("run") == 1:  # not yet started again: the condition still holds
        conditions = status.get("conditions")
        assert isinstance(conditions, list)
        (cond,) = conditions
        assert (cond["type"], cond["reason"]) == ("Preempted", reason)
        assert preemptor in cond["message"]
