"""The census against a real Ray head, wired as serve wires it (its own thread beside the
loop): a task declaring 1 CPU whose driver starts actors holding more, and a job submitted
straight to Ray that creates a placement group, are seen with what they really hold."""

from __future__ import annotations

import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from reconciler.app.assembly import build_reconciler, start_loop
from reconciler.cli.main import main
from specs.cluster import Capacity, Census, Holdings, SubmitRequest
from specs.tenancy.access import Tokens
from tests.integration.conftest import Queue
from tests.support.waiting import wait_until

pytestmark = pytest.mark.ray

ACTORS = """
import time, ray
ray.init()
@ray.remote(num_cpus=1)
class Worker:
    def ping(self):
        return 1
workers = [Worker.remote() for _ in range(2)]
ray.get([w.ping.remote() for w in workers])
print("HOLDING", flush=True)
time.sleep(120)
"""

GROUP = """
import time, ray
ray.init()
group = ray.util.placement_group([{"CPU": 0.5}, {"CPU": 0.5}])
ray.get(group.ready())
print("HOLDING", flush=True)
time.sleep(120)
"""


def holdings(queue: Queue, job_id: str) -> Holdings | None:
    assert queue.reconciler is not None
    taken: Census | None = queue.reconciler.latest_census()
    return None if taken is None else taken.of(job_id)


def job_id_of(queue: Queue, submission_id: str) -> str:
    found: list[str] = []

    def started() -> bool:
        job_id = queue.ray.job_info(submission_id).job_id
        if job_id is not None:
            found.append(job_id)
        return job_id is not None

    wait_until(started, f"{submission_id}'s driver to start", 60)
    return found[0]


def test_the_census_sees_what_jobs_really_hold(
    make_queue: Callable[..., Queue],
    tmp_path: Path,
    ray_head: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    q = make_queue(census_seconds=1)
    actors, group = tmp_path / "actors.py", tmp_path / "group.py"
    actors.write_text(ACTORS)
    group.write_text(GROUP)
    q.write("fanout", {"entrypoint": f"{sys.executable} {actors}", "resources": {"cpu": 1}})
    # A job another client submits straight to Ray, not through rayqueue.
    foreign = f"foreign-{uuid.uuid4().hex[:8]}"
    q.ray.submit(SubmitRequest(foreign, f"{sys.executable} {group}", None, {}))
    # The loop as serve builds it, with its census thread.
    q.reconciler = build_reconciler(q.settings, q.ray, tokens=Tokens())
    q.stop_event = threading.Event()
    threads = start_loop(q.reconciler, q.stop_event)
    q.thread = threads.loop
    try:
        sid = str(q.wait_phase("fanout", {"Running"}, timeout=90)["submissionId"])
        ours, theirs = job_id_of(q, sid), job_id_of(q, foreign)
        q.wait_for(
            lambda: (held := holdings(q, ours)) is not None and held.actors == Capacity(2),
            "the census to see fanout's two 1-CPU actors",
            timeout=60,
        )
        q.wait_for(
            lambda: (held := holdings(q, theirs)) is not None and held.groups == Capacity(1),
            "the census to see the foreign job's placement group",
            timeout=60,
        )
        # Physical use from the dashboard's node data (refreshed there every few seconds):
        # the two actors' worker processes, tied to the job by their pids, and its driver,
        # by the node and pid Ray's job listing names.
        q.wait_for(
            lambda: (
                (held := holdings(q, ours)) is not None
                and held.usage is not None
                and held.usage.processes == 3
                and held.usage.memory > 0
            ),
            "the census to see fanout's worker processes",
            timeout=60,
        )
        fanout, other = holdings(q, ours), holdings(q, theirs)
        assert fanout is not None and other is not None
        # Declared 1 CPU; holds 2 in Ray (the driver itself reserves nothing).
        assert fanout.logical == Capacity(2) and fanout.complete
        assert other.logical == Capacity(1) and other.complete
        # `rayqueue describe` asks Ray for the run's own holdings, beside the declaration.
        capsys.readouterr()
        assert main(["describe", "fanout", "--dir", str(q.dir), "--address", ray_head]) == 0
        assert (
            "Holds in Ray:       2 CPU, 0 GPU, 0 memory (declared 1 CPU, 0 GPU, 0 memory)"
            in capsys.readouterr().out
        )
        taken = q.reconciler.latest_census()
        assert taken is not None and taken.whole
        assert taken.entrypoints.get(sid) == Capacity()
        assert taken.requests >= 3 and taken.bytes_read > 0
        # The metric beside rayqueue_cluster_reserved.
        metrics = q.reconciler.metrics
        assert metrics is not None

        def held(owner: str) -> float:
            value = metrics.registry.get_sample_value(
                "rayqueue_census_held", {"owner": owner, "resource": "cpu"}
            )
            return 0.0 if value is None else value

        q.wait_for(lambda: held("queue") == 2 and held("foreign") >= 1, "the held metric", 30)

        # What admission charges the run: the more of what it declares (1) and holds (2).
        def reserved() -> float | None:
            return metrics.registry.get_sample_value(
                "rayqueue_cluster_reserved", {"resource": "cpu"}
            )

        q.wait_for(lambda: reserved() == 2, "the run to be charged what it holds", timeout=30)
    finally:
        q.ray.stop(foreign)
        q.halt()
        threads.join(10)
