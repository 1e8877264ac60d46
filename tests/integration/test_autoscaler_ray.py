"""rayqueue's autoscaler adapter against Ray's real autoscaler (issue 26).

The head (tests/support/autoscaling_head.py) has no CPU; Ray's fake node provider may add up to
2 one-CPU nodes, and removes an idle one after 6 s."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest

from reconciler.shell.raycluster.autoscaler import RayAutoscaler
from specs.cluster import Capacity
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
