"""What Ray's jobs hold is charged, against a real 4-CPU Ray head, with the loop wired as serve
wires it (its census on a thread of its own): a job that holds the whole head (a task that
declares 1 CPU and starts actors on every CPU, or a job submitted straight to Ray) keeps
every other task waiting, with the holder and the numbers in their statuses, instead of
being submitted into a full cluster; when it ends, the highest priority starts first."""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from reconciler.app.assembly import build_reconciler, start_loop
from reconciler.shell.loop.holdings import STALE_INTERVALS, in_ray
from specs.cluster import Capacity, SubmitRequest
from specs.tenancy.access import Tokens
from tests.integration.conftest import Queue
from tests.support.ray_head import RAY_HEAD_CPUS

pytestmark = pytest.mark.ray

CENSUS_SECONDS = 3.0

# Holds every CPU of the head with 1-CPU actors until the file named on its command line
# appears.
HOLDER = f"""
import os, sys, time, ray
ray.init()
@ray.remote(num_cpus=1)
class Worker:
    def ping(self):
        return 1
workers = [Worker.remote() for _ in range({RAY_HEAD_CPUS})]
ray.get([w.ping.remote() for w in workers])
print("HOLDING", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.2)
"""

WAITING = ("low-a", "low-b", "low-c")  # priority 0, dropped first
URGENT = "urgent"  # priority 9, dropped last


def charged_in_ray(q: Queue, key: str) -> Capacity | None:
    """What the loop's join of the latest census gives `key` now (None: not observed)."""
    assert q.reconciler is not None
    jobs = {job.submission_id: job for job in q.ray.list_jobs()}
    found = in_ray(
        q.reconciler.latest_census(), jobs, time.time(), STALE_INTERVALS * CENSUS_SECONDS
    )
    return found.held.get(key)


def submitted(q: Queue) -> list[str]:
    return [n for n in (*WAITING, URGENT) if q.status(n).get("submissionId")]


@pytest.mark.parametrize("holder", ["task", "foreign"])
def test_nothing_is_submitted_into_a_cluster_a_job_holds_in_fact(
    make_queue: Callable[..., Queue], tmp_path: Path, holder: str
) -> None:
    q = make_queue(census_seconds=CENSUS_SECONDS)
    script, release = tmp_path / "holder.py", tmp_path / "release"
    script.write_text(HOLDER)
    entrypoint = f"{sys.executable} {script} {release}"
    foreign = f"foreign-{uuid.uuid4().hex[:8]}"
    if holder == "task":
        q.write("holder", {"entrypoint": entrypoint, "resources": {"cpu": 1}})
    else:  # another client's job, submitted straight to Ray
        q.ray.submit(SubmitRequest(foreign, entrypoint, None, {}))
    q.reconciler = build_reconciler(q.settings, q.ray, tokens=Tokens())
    q.stop_event = threading.Event()
    threads = start_loop(q.reconciler, q.stop_event)
    q.thread = threads.loop
    try:
        if holder == "task":
            key = str(q.wait_phase("holder", {"Running"}, timeout=90)["submissionId"])
            who, declared = "holder", 1
        else:
            key, who, declared = foreign, f"job {foreign}", 0
        q.wait_for(
            lambda: charged_in_ray(q, key) == Capacity(RAY_HEAD_CPUS),
            "the census to see the holder's actors on every CPU",
            timeout=90,
        )
        taken = q.reconciler.latest_census()
        assert taken is not None and taken.available is not None
        # Three tasks that the declarations alone would let in (the head has 4 CPUs; the
        # holder declares at most 1), then a more urgent one.
        for name in WAITING:
            q.write(name, {"entrypoint": f"{sys.executable} -c pass", "resources": {"cpu": 3}})
        words = f"cluster full in fact: {who} holds {RAY_HEAD_CPUS} CPU, declared {declared}"

        def waits_in_fact(name: str) -> Callable[[], bool]:
            def waiting() -> bool:
                assert submitted(q) == [], "submitted into a full cluster"
                return words in str(q.status(name).get("message", ""))

            return waiting

        # The queue's head says why, with the holder and the numbers; the others wait
        # behind it, in priority order.
        q.wait_for(waits_in_fact(WAITING[0]), f"{WAITING[0]} to wait with {words!r}", 30)
        head = q.status(WAITING[0])
        assert head["reason"] == "WaitingForResources"
        assert "needs 3 CPU; 0 free" in str(head["message"])
        q.wait_for(
            lambda: all(
                q.status(n).get("reason") == "WaitingBehindHigherPriority" for n in WAITING[1:]
            ),
            f"the others to wait behind {WAITING[0]}",
            timeout=30,
        )
        q.write(
            URGENT,
            {
                "entrypoint": f"{sys.executable} -c 'import time; time.sleep(5)'",
                "resources": {"cpu": 3},
            },
            priority=9,
        )
        q.wait_for(waits_in_fact(URGENT), f"{URGENT} to wait with {words!r}", timeout=30)
        q.wait_for(
            lambda: all(f"waits behind {URGENT}" in str(q.status(n)["message"]) for n in WAITING),
            f"the others to wait behind {URGENT}",
            timeout=30,
        )
        # Still nothing submitted a few census intervals on.
        deadline = time.monotonic() + 2 * CENSUS_SECONDS
        while time.monotonic() < deadline:
            assert submitted(q) == [], "submitted into a full cluster"
            time.sleep(0.1)
        release.write_text("")
        first: list[str] = []

        def one_started() -> bool:
            first.extend(submitted(q))
            return bool(first)

        q.wait_for(one_started, "a task to start once the holder ended", timeout=60)
        assert first == [URGENT]
    finally:
        release.write_text("")
        if holder == "foreign":
            q.ray.stop(foreign)
        q.halt()
        threads.join(10)
