"""Autoscaling in the planner (issue 26): the ceiling, the demand and its request, the
statuses while nodes come, and backfill and preemption on a growing cluster."""

from __future__ import annotations

from datetime import timedelta

from reconciler.core.scaling import ceiling_of, merge, shape
from specs.cluster import RUNNING, Capacity, NodeType, Scaling
from specs.models import Phase, Reason
from specs.settings import PlanOptions
from tests.support.planner_world import GIB, PlanWorld, task

SMALL = NodeType("small", Capacity(8, 0, 32 * GIB), max_count=4)
GPU = NodeType("gpu", Capacity(8, 1, 64 * GIB), max_count=2)
# A head with 4 CPU now; up to 4 small and 2 GPU nodes.
GROWS = Scaling(Capacity(4 + 32 + 16, 2, 16 * GIB + 128 * GIB + 128 * GIB), (SMALL, GPU))


def world(*, scaling: Scaling | None = GROWS, **specs: object) -> PlanWorld:
    return PlanWorld(specs=dict(specs), scaling=scaling)  # type: ignore[arg-type]


def test_without_scaling_the_request_is_left_alone() -> None:
    w = world(scaling=None, a=task(cpu=64))
    p = w.step()
    assert p.scale_request is None
    assert w.phase("a") is Phase.UNSCHEDULABLE


def test_a_task_over_the_cluster_but_under_the_ceiling_queues_for_nodes() -> None:
    w = world(a=task(cpu=16))
    p = w.step()
    assert w.phase("a") is Phase.QUEUED
    assert w.status("a").reason == Reason.WAITING_FOR_SCALE_UP
    assert not p.submits
    # 16 CPU on 8-CPU nodes: two node-sized bundles, never one 16-CPU bundle.
    assert p.scale_request == (Capacity(8, 0, 0), Capacity(8, 0, 0))


def test_a_task_over_the_ceiling_is_unschedulable_and_asks_nothing() -> None:
    w = world(a=task(cpu=100))
    p = w.step()
    assert w.phase("a") is Phase.UNSCHEDULABLE
    assert "can grow to at most 52" in (w.status("a").message or "")
    assert p.scale_request == ()


def test_a_gpu_task_on_a_cluster_with_no_gpu_now_waits_for_a_gpu_node() -> None:
    w = world(a=task(cpu=1, resources={"gpu": 1}))
    p = w.step()
    assert w.status("a").reason == Reason.WAITING_FOR_SCALE_UP
    assert p.scale_request == (Capacity(1, 1, 0),)
