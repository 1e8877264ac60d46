"""rayqueue's autoscaler adapter against Ray's real autoscaler.

The head (tests/support/autoscaling_head.py) has no CPU; Ray's fake node provider may add up to
2 one-CPU nodes, and removes an idle one after 6 s."""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from reconciler.shell.raycluster.adapter import RayJobsAdapter
from reconciler.shell.raycluster.autoscaler import RayAutoscaler
from specs.cluster import Capacity
from specs.folder.atomic import write_atomic
from specs.settings.process import Settings
from tests.integration.conftest import Queue
from tests.support.autoscaling_head import IDLE_TIMEOUT_SECONDS, WORKER_TYPE, AutoscalingHead
from tests.support.waiting import wait_until

pytestmark = pytest.mark.ray


def _cpus(dashboard: str) -> float:
    url = (
        f"{dashboard}/api/v0/nodes?detail=1"
        "&filter_keys=state&filter_predicates=%3D&filter_values=ALIVE"
    )
    with urllib.request.urlopen(url, timeout=10) as resp:
        nodes = json.loads(resp.read())["data"]["result"]["result"]
    return sum(float((n.get("resources_total") or {}).get("CPU", 0)) for n in nodes)


def test_plain_head_does_not_autoscale(ray_head: str) -> None:
    # A head started without --autoscaling-config runs only Ray's read-only monitor.
    assert RayAutoscaler(ray_head, "127.0.0.1:1").scaling() is None


def test_request_launches_a_node_and_clearing_it_lets_the_node_go(
    autoscaling_head: AutoscalingHead,
) -> None:
    scaler = RayAutoscaler(autoscaling_head.dashboard, autoscaling_head.gcs)
    wait_until(lambda: scaler.scaling() is not None, "the autoscaler's first report", 60)
    first = scaler.scaling()
    assert first is not None and first.source == "autoscaler" and first.pending == ()
    assert _cpus(autoscaling_head.dashboard) == 0

    scaler.request([Capacity(cpu=1)])
    assert scaler.requested() == [{"CPU": 1.0}]
    seen: list[tuple[str, ...]] = []

    def grown() -> bool:
        report = scaler.scaling()
        if report is not None and report.pending:
            seen.append(report.pending)
        return _cpus(autoscaling_head.dashboard) >= 1

    wait_until(grown, "a worker node for the request", 120, poll=0.5)
    assert (WORKER_TYPE,) in seen  # the launch was reported while it was under way

    # Cleared: the node is idle and goes after the idle timeout.
    scaler.request([])
    assert scaler.requested() == []
    wait_until(
        lambda: _cpus(autoscaling_head.dashboard) == 0,
        "the idle node to be removed",
        IDLE_TIMEOUT_SECONDS + 60,
        poll=0.5,
    )


def test_a_bundle_no_node_type_holds_launches_nothing(autoscaling_head: AutoscalingHead) -> None:
    scaler = RayAutoscaler(autoscaling_head.dashboard, autoscaling_head.gcs)
    scaler.request([Capacity(cpu=2)])  # nodes have 1 CPU
    try:
        for _ in range(6):
            time.sleep(1)  # one autoscaler update (AUTOSCALER_UPDATE_INTERVAL_S=1)
            report = scaler.scaling()
            assert report is not None and report.pending == ()
        assert _cpus(autoscaling_head.dashboard) == 0
    finally:
        scaler.request([])


# --- rayqueue's loop on the autoscaling cluster ------------------------------------------------

SLEEP = "python -c 'import time; time.sleep({})'"
CLUSTER = {
    # Ray's report does not say how far each type may grow: the ceiling is configured (the
    # head, with nothing for tasks, is left out).
    "nodeTypes": [
        {"name": WORKER_TYPE, "resources": {"cpu": 1}, "maxCount": 2},
    ]
}


@pytest.fixture
def queue(autoscaling_head: AutoscalingHead, tmp_path: Path) -> Iterator[Queue]:
    settings = Settings(
        tasks_dir=tmp_path / "tasks",
        address=autoscaling_head.dashboard,
        queue_id=f"as-{uuid.uuid4().hex[:8]}",
        interval_seconds=0.2,
        api=False,
    )
    settings.tasks_dir.mkdir()
    ray = RayJobsAdapter(autoscaling_head.dashboard, timeout_seconds=10)
    scaler = RayAutoscaler(autoscaling_head.dashboard, autoscaling_head.gcs)
    q = Queue(settings, ray, autoscaler=scaler)
    yield q
    q.halt()
    for job in q.jobs():
        if not job.terminal:
            ray.stop(job.submission_id)
    scaler.request([])  # leave the cluster as found: no request, and (soon) no node


def _queues(q: Queue, spec: dict[str, object]) -> None:
    doc = {"apiVersion": "rayqueue/v1", "kind": "QueueConfig", "spec": spec}
    write_atomic(q.dir / "_queues.yaml", yaml.safe_dump(doc).encode())


def test_a_task_that_needs_a_worker_gets_one_and_the_drained_queue_lets_it_go(
    queue: Queue, autoscaling_head: AutoscalingHead
) -> None:
    scaler = queue.autoscaler
    assert isinstance(scaler, RayAutoscaler)
    wait_until(lambda: _cpus(autoscaling_head.dashboard) == 0, "no worker left", 90)
    _queues(queue, {"cluster": CLUSTER})
    queue.write("one", {"entrypoint": SLEEP.format(2), "resources": {"cpu": 1}})
    queue.start()
    waiting = queue.wait_phase("one", {"Queued", "Running", "Succeeded"}, timeout=60)
    assert (waiting["phase"], waiting["reason"]) == ("Queued", "WaitingForScaleUp")
    wait_until(lambda: scaler.requested() == [{"CPU": 1.0}], "the request for 1 CPU", 30)
    queue.wait_phase("one", {"Succeeded"}, timeout=180)
    # It ran on the node the request bought (the head has no CPU) and the queue is empty now:
    # the request is cleared, and the idle node goes after the autoscaler's idle timeout.
    wait_until(lambda: scaler.requested() == [], "the request to be cleared", 30)
    wait_until(
        lambda: _cpus(autoscaling_head.dashboard) == 0,
        "the idle worker to be removed",
        IDLE_TIMEOUT_SECONDS + 90,
    )


def test_over_the_ceiling_or_over_quota_buys_no_node(
    queue: Queue, autoscaling_head: AutoscalingHead
) -> None:
    scaler = queue.autoscaler
    assert isinstance(scaler, RayAutoscaler)
    wait_until(lambda: _cpus(autoscaling_head.dashboard) == 0, "no worker left", 90)
    _queues(
        queue,
        {
            "cluster": CLUSTER,
            "queues": [{"name": "team", "nominalQuota": {"cpu": 0}, "borrowingLimit": {"cpu": 0}}],
        },
    )
    queue.write("big", {"entrypoint": SLEEP.format(1), "resources": {"cpu": 3}})
    queue.write("team/small", {"entrypoint": SLEEP.format(1), "resources": {"cpu": 1}})
    queue.start()
    big = queue.wait_phase("big", {"Unschedulable"}, timeout=60)
    assert "3" in str(big.get("message"))
    small = queue.wait_phase("team/small", {"Queued"}, timeout=60)
    assert small["reason"] != "WaitingForScaleUp"
    for _ in range(6):  # six autoscaler updates: nothing is asked, nothing launched
        time.sleep(1)
        report = scaler.scaling()
        assert report is not None and report.pending == ()
        assert scaler.requested() in ([], None)
    assert _cpus(autoscaling_head.dashboard) == 0
    assert queue.status("team/small")["phase"] == "Queued"
