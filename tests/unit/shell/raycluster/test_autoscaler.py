"""The shell's side of autoscaling: reading Ray's autoscaler report, joining it with
the configured ceiling, and sending the plan's request only when it changes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from reconciler.shell.loop.scaling import RESEND_SECONDS, AutoscalerMetrics, ScaleRequests, combine
from reconciler.shell.raycluster.autoscaler import bundle_dict, gcs_address_for, read_report
from specs.cluster import Capacity, NodeType, RayUnavailable, Scaling
from specs.queues.config import ClusterSection, NodeTypeEntry, Quota
from tests.support.world import World

GiB = 2**30


def _report(report: dict[str, Any], error: str | None = None) -> dict[str, Any]:
    """GET /api/cluster_status as Ray 2.60's dashboard answers it (keys camelCased)."""
    return {
        "result": True,
        "msg": "Got cluster status.",
        "data": {
            "autoscalingStatus": "Cluster status: ...",
            "autoscalingError": error,
            "clusterStatus": {"autoscalerReport": report, "loadMetricsReport": {}},
        },
    }


# Seen on a plain `ray start --head`: Ray's read-only monitor, one type per node named after it.
PLAIN = _report(
    {
        "activeNodes": {"nodeFe61": 1},
        "pendingNodes": [],
        "pendingLaunches": {},
        "failedNodes": [],
        "nodeAvailabilitySummary": {"nodeAvailabilities": {}},
        "nodeTypeMapping": {"fe61": "node_fe61"},
        "legacy": True,
    }
)
# Seen on the fake-provider head of tests/support/autoscaling_head.py, a launch under way.
LAUNCHING = _report(
    {
        "activeNodes": {"ray.head.default": 1},
        "pendingNodes": [["ff01", "small", "uninitialized"]],
        "pendingLaunches": {"small": 1},
        "failedNodes": [["ff00", "small"]],
        "nodeAvailabilitySummary": {
            "nodeAvailabilities": {
                "gpu": {
                    "nodeType": "gpu",
                    "isAvailable": False,
                    "unavailableNodeInformation": {
                        "category": "LaunchFailed",
                        "description": "Quota exceeded for NVIDIA_T4_GPUS",
                    },
                }
            }
        },
        "nodeTypeMapping": {"f0": "ray.head.default"},
        "legacy": True,
    },
    error="The autoscaler failed with the following error: boom",
)


def test_a_head_without_an_autoscaler_reports_no_scaling() -> None:
    assert read_report(PLAIN) is None
    assert read_report(_report(None)) is None  # type: ignore[arg-type]
    assert read_report({"data": {"clusterStatus": None}}) is None


def test_the_report_gives_pending_launches_and_failures_in_ray_words() -> None:
    scaling = read_report(LAUNCHING)
    assert scaling is not None
    assert scaling.source == "autoscaler"
    assert scaling.pending == ("small", "small")
    assert scaling.failures == (
        "a small node (ff00) failed",
        "gpu: Quota exceeded for NVIDIA_T4_GPUS",
        "The autoscaler failed with the following error: boom",
    )
    # Ray's report does not say how far a type may grow: no ceiling, no node types.
    assert scaling.ceiling == Capacity() and scaling.node_types == ()


def test_the_gcs_address_defaults_to_the_dashboard_host_on_6379() -> None:
    assert gcs_address_for("http://raycluster-head-svc:8265", None) == "raycluster-head-svc:6379"
    assert gcs_address_for("10.0.0.5:8265", None) == "10.0.0.5:6379"
    assert gcs_address_for("http://h:8265", "gcs.example:7000") == "gcs.example:7000"


def test_bundles_go_to_ray_in_its_units_without_zeros() -> None:
    assert bundle_dict(Capacity(cpu=2, memory=1.5 * GiB)) == {"CPU": 2.0, "memory": 1.5 * GiB}
    assert bundle_dict(Capacity(gpu=1)) == {"GPU": 1.0}


SMALL = NodeType("small", Capacity(cpu=1), max_count=2)
SECTION = ClusterSection(
    node_types=[NodeTypeEntry(name="small", resources=Quota(cpu=1), max_count=2)]
)


def test_no_autoscaler_and_no_config_is_a_fixed_cluster() -> None:
    assert combine(None) is None
    # An autoscaler whose reach nothing tells: still today's fixed cluster.
    assert combine(read_report(LAUNCHING)) is None


def test_the_configured_ceiling_joins_the_autoscaler_report() -> None:
    joined = combine(read_report(LAUNCHING), SECTION)
    assert joined is not None
    assert joined.ceiling == Capacity(cpu=2)
    assert joined.node_types == (SMALL,)
    assert joined.source == "autoscaler"
    assert joined.pending == ("small", "small")
    capped = combine(read_report(LAUNCHING), SECTION, Capacity(cpu=1, gpu=0, memory=0))
    assert capped is not None and capped.ceiling == Capacity(cpu=1)
    # Configuration alone: a ceiling from configuration, nothing pending.
    alone = combine(None, SECTION)
    assert alone is not None and alone.source == "config" and alone.pending == ()


class FakeAutoscaler:
    def __init__(self, report: Scaling | None = None, fail: bool = False) -> None:
        self.report = report
        self.fail = fail
        self.requests: list[tuple[Capacity, ...]] = []
        self.reads = 0

    def scaling(self) -> Scaling | None:
        self.reads += 1
        return self.report

    def request(self, bundles: Sequence[Capacity]) -> None:
        if self.fail:
            raise RayUnavailable("GCS down")
        self.requests.append(tuple(bundles))


def _sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_a_request_is_sent_when_it_changes_and_again_now_and_then() -> None:
    fake = FakeAutoscaler()
    registry = CollectorRegistry()
    sender = ScaleRequests(fake, AutoscalerMetrics(registry))
    one = (Capacity(cpu=1),)
    sender.act(None, 0.0, 0)  # a fixed cluster: nothing asked
    assert fake.requests == []
    sender.act(one, 1.0, 0)
    sender.act(one, 2.0, 0)  # unchanged: not sent again
    assert fake.requests == [one]
    assert _sample(registry, "rayqueue_autoscaler_requested", resource="cpu") == 1
    sender.act(one, 1.0 + RESEND_SECONDS, 0)  # the autoscaler may have forgotten it
    assert fake.requests == [one, one]
    sender.act(one, 100.0, 1)  # a task starts 99 s after the request began
    assert _sample(registry, "rayqueue_autoscaler_request_to_start_seconds_count") == 1
    assert _sample(registry, "rayqueue_autoscaler_request_to_start_seconds_sum") == 99.0
    sender.act((), 50.0 + RESEND_SECONDS, 0)  # nothing waits: cleared
    assert fake.requests[-1] == ()
    assert _sample(registry, "rayqueue_autoscaler_requested", resource="cpu") == 0


def test_a_failed_request_is_tried_again_after_a_growing_wait() -> None:
    fake = FakeAutoscaler(fail=True)
    sender = ScaleRequests(fake)
    one = (Capacity(cpu=1),)
    sender.act(one, 0.0, 0)  # fails: the next try after 2 s
    fake.fail = False
    sender.act(one, 1.0, 0)  # too soon: not tried (a try may wait out a timeout)
    assert fake.requests == []
    sender.act(one, 2.5, 0)
    assert fake.requests == [one]


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    path = tmp_path / "tasks"
    path.mkdir()
    return path


def test_the_loop_asks_the_autoscaler_for_what_waits_for_nodes(tasks: Path) -> None:
    # Ray's report with node types (what a future Ray may give): the ceiling is 2 one-CPU nodes.
    report = Scaling(Capacity(cpu=2), (SMALL,), "autoscaler")
    fake = FakeAutoscaler(report)
    world = World.build(tasks, Capacity(0, 0, 0), autoscaler=fake)
    world.write("a", resources={"cpu": 1})
    world.step()
    waiting = world.status("a")
    assert (waiting["phase"], waiting["reason"]) == ("Queued", "WaitingForScaleUp")
    assert fake.requests and fake.requests[-1] == (Capacity(cpu=1),)
    sent = len(fake.requests)
    world.step()
    assert len(fake.requests) == sent  # the same target is not sent every pass
    (tasks / "a.yaml").unlink()
    world.step(2)
    assert fake.requests[-1] == ()  # nothing waits: the request is cleared


def test_without_an_autoscaler_or_config_nothing_changes(tasks: Path) -> None:
    world = World.build(tasks, Capacity(0, 0, 0))
    world.write("a", resources={"cpu": 1})
    world.step()
    assert world.reconciler.autoscaler is None
    assert world.status("a")["phase"] == "Unschedulable"
    assert world.reconciler.observe().scaling is None


def test_a_cluster_whose_report_says_no_autoscaler_stays_fixed(tasks: Path) -> None:
    fake = FakeAutoscaler(None)
    world = World.build(tasks, Capacity(0, 0, 0), autoscaler=fake)
    world.write("a", resources={"cpu": 1})
    world.step()
    assert world.status("a")["phase"] == "Unschedulable"
    assert fake.requests == [] and fake.reads >= 1
