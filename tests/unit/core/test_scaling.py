"""Autoscaling in the planner: the ceiling, the demand and its request, the
statuses while nodes come, and backfill and preemption on a growing cluster."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from pydantic import ValidationError

from reconciler.core.scaling import ceiling_of, from_config, merge, shape
from specs.cluster import RUNNING, Capacity, NodeType, RayJob, Scaling
from specs.queues.config import parse_capacity
from specs.queues.parse import parse_queue_config
from specs.settings.process import PlanOptions
from specs.task.models import Phase, Reason
from tests.support.planner_world import GIB, T0, PlanWorld, task

SMALL = NodeType("small", Capacity(8, 0, 32 * GIB), max_count=4)
GPU = NodeType("gpu", Capacity(8, 1, 64 * GIB), max_count=2)
# A head with 4 CPU now; up to 4 small and 2 GPU nodes.
GROWS = Scaling(Capacity(4 + 32 + 16, 2, 16 * GIB + 128 * GIB + 128 * GIB), (SMALL, GPU))


def plan_world(*, scaling: Scaling | None = GROWS, **specs: object) -> PlanWorld:
    return PlanWorld(specs=dict(specs), scaling=scaling)  # type: ignore[arg-type]


def test_without_scaling_the_request_is_left_alone() -> None:
    w = plan_world(scaling=None, a=task(cpu=64))
    p = w.step()
    assert p.scale_request is None
    assert w.phase("a") is Phase.UNSCHEDULABLE


def test_a_task_over_the_cluster_but_under_the_ceiling_queues_for_nodes() -> None:
    w = plan_world(a=task(cpu=16))
    p = w.step()
    assert w.phase("a") is Phase.QUEUED
    assert w.status("a").reason == Reason.WAITING_FOR_SCALE_UP
    assert not p.submits
    # 16 CPU on 8-CPU nodes: two node-sized bundles, never one 16-CPU bundle.
    assert p.scale_request == (Capacity(8, 0, 0), Capacity(8, 0, 0))


def test_a_task_over_the_ceiling_is_unschedulable_and_asks_nothing() -> None:
    w = plan_world(a=task(cpu=100))
    p = w.step()
    assert w.phase("a") is Phase.UNSCHEDULABLE
    assert "can grow to at most 52" in (w.status("a").message or "")
    assert p.scale_request == ()


def test_a_gpu_task_on_a_cluster_with_no_gpu_now_waits_for_a_gpu_node() -> None:
    w = plan_world(a=task(cpu=1, resources={"gpu": 1}))
    p = w.step()
    assert w.status("a").reason == Reason.WAITING_FOR_SCALE_UP
    assert p.scale_request == (Capacity(1, 1, 0),)


def started(p: object) -> list[str]:
    return [s.task for s in p.submits]  # type: ignore[attr-defined]


def test_it_is_submitted_only_once_the_nodes_are_there_and_then_the_request_clears() -> None:
    w = plan_world(a=task(cpu=16))
    w.step()
    w.capacity = Capacity(12, 0, 48 * GIB)  # one node came: 12 free, still not 16
    assert not started(w.step())
    assert w.status("a").reason == Reason.WAITING_FOR_SCALE_UP
    w.capacity = Capacity(20, 0, 80 * GIB)
    p = w.step()
    assert started(p) == ["a"]
    assert p.scale_request == ()  # nothing waits for nodes: clear, idle nodes may go


def test_the_request_holds_what_runs_beside_what_waits_for_nodes() -> None:
    w = plan_world(small=task(cpu=2))
    assert started(w.step()) == ["small"]
    w.ray("small", RUNNING)
    w.specs["big"] = task(cpu=16)
    p = w.step()
    assert p.scale_request == (Capacity(2, 0, 0), Capacity(8, 0, 0), Capacity(8, 0, 0))


def test_demand_is_what_the_ceiling_holds_in_queue_order() -> None:
    # 48 CPU of new nodes; the 4 CPU of today hold nothing of these. Three 20-CPU tasks: two
    # fit the ceiling at once (40), the third would not, so it asks for nothing yet.
    w = plan_world(a=task(5, cpu=20), b=task(4, cpu=20), c=task(3, cpu=20))
    w.options = PlanOptions(policy="strict")
    p = w.step()
    assert [w.status(n).reason for n in "abc"] == [
        Reason.WAITING_FOR_SCALE_UP,
        Reason.WAITING_FOR_SCALE_UP,
        Reason.WAITING_BEHIND_HIGHER_PRIORITY,
    ]
    assert p.scale_request is not None and sum(b.cpu for b in p.scale_request) == 40


def test_demand_keeps_to_max_inflight() -> None:
    w = plan_world(a=task(5, cpu=8), b=task(4, cpu=8))
    w.options = PlanOptions(max_inflight=1)
    p = w.step()
    assert w.status("a").reason == Reason.WAITING_FOR_SCALE_UP
    assert w.status("b").reason != Reason.WAITING_FOR_SCALE_UP  # one may start at a time
    assert p.scale_request == (Capacity(8, 0, 0),)


QUEUES = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
      nominalQuota: {cpu: 8}
      borrowingLimit: {cpu: 0}
      lendingLimit: {cpu: 0}
"""


def test_a_task_over_its_queue_quota_buys_no_node() -> None:
    w = plan_world(**{"team-a/big": task(cpu=12), "team-a/ok": task(cpu=6)})
    w.queues = parse_queue_config(QUEUES)
    p = w.step()
    assert w.status("team-a/big").reason == Reason.QUOTA_EXCEEDED
    assert w.status("team-a/ok").reason == Reason.WAITING_FOR_SCALE_UP
    assert p.scale_request == (Capacity(6, 0, 0),)


def test_the_default_queue_gets_what_the_ceiling_holds_beyond_the_listed_quotas() -> None:
    # Today's 4 CPU are less than team-a's nominal 8: at today's size the default queue's
    # quota would be 0 and this task QuotaExceeded; at the ceiling it is 44 CPU.
    w = plan_world(other=task(cpu=8))
    w.queues = parse_queue_config(QUEUES)
    w.step()
    assert w.status("other").reason == Reason.WAITING_FOR_SCALE_UP
    fixed = plan_world(scaling=None, other=task(cpu=2))
    fixed.queues = parse_queue_config(QUEUES)
    fixed.step()
    assert fixed.status("other").reason == Reason.QUOTA_EXCEEDED


def test_the_request_time_is_kept_in_the_status_and_the_deadline_is_the_timeout() -> None:
    w = plan_world(a=task(cpu=8))
    w.step()
    since = w.status("a").scale_up_requested_at
    assert since == T0
    assert "scaleUpRequestedAt" in w.statuses["a"].to_document()["status"]
    p = w.step()  # (a first sight always plans again at once)
    assert p.deadline is not None and 599 < p.deadline - T0.timestamp() <= 600
    w.now = T0 + timedelta(seconds=300)
    w.step()
    assert w.status("a").scale_up_requested_at == since  # not moved by later passes


def test_after_the_timeout_it_stops_asking_for_a_backoff_and_says_why() -> None:
    failing = replace(GROWS, failures=("small: InsufficientInstanceCapacity",))
    w = plan_world(scaling=failing, a=task(cpu=8))
    w.step()
    w.now = T0 + timedelta(seconds=600)
    p = w.step()
    body = w.status("a")
    assert body.phase is Phase.QUEUED and body.reason == Reason.SCALE_UP_TIMEOUT
    assert "InsufficientInstanceCapacity" in (body.message or "")
    assert p.scale_request == ()  # one impossible request does not keep nodes up
    assert p.deadline is not None and 1199 < p.deadline - T0.timestamp() <= 1200
    w.now = T0 + timedelta(seconds=1200)  # the backoff is over: it asks again, from now
    p = w.step()
    assert w.status("a").reason == Reason.WAITING_FOR_SCALE_UP
    assert w.status("a").scale_up_requested_at == T0 + timedelta(seconds=1200)
    assert p.scale_request == (Capacity(8, 0, 0),)


def test_the_wait_survives_a_restart_because_it_is_in_the_status() -> None:
    w = plan_world(a=task(cpu=8))
    w.step()
    again = plan_world(a=task(cpu=8))
    again.statuses = dict(w.statuses)  # a new process reads the sidecars
    again.now = T0 + timedelta(seconds=600)
    again.step()
    assert again.status("a").reason == Reason.SCALE_UP_TIMEOUT


def test_once_it_starts_the_request_time_is_cleared() -> None:
    w = plan_world(a=task(cpu=8))
    w.step()
    w.capacity = Capacity(12, 0, 48 * GIB)
    w.step()
    assert w.phase("a") is Phase.STARTING
    assert w.status("a").scale_up_requested_at is None


def _partly_grown(scaling: Scaling | None) -> PlanWorld:
    """`low` runs on 3 of the head's 4 CPU until 1000 s; `head` (12 CPU) waits; one 8-CPU
    node of the two it needs has come (12 CPU, 9 free); `filler` (1 CPU) ends by 100 s."""
    w = plan_world(scaling=scaling, low=task(5, cpu=3, timeoutSeconds=1000))
    assert started(w.step()) == ["low"]
    w.ray("low", RUNNING)
    w.specs["head"] = task(4, cpu=12)
    w.step()
    w.capacity = Capacity(12, 0, 48 * GIB)
    w.specs["filler"] = task(1, cpu=1, timeoutSeconds=100)
    return w


def test_backfill_does_not_take_what_a_head_waiting_for_nodes_needs() -> None:
    w = _partly_grown(GROWS)
    p = w.step()
    assert w.status("head").reason == Reason.WAITING_FOR_SCALE_UP
    assert w.status("filler").reason == Reason.WAITING_BEHIND_RESERVATION
    assert "kept for head" in (w.status("filler").message or "")
    assert not started(p)
    # On a fixed cluster of that size, backfill's usual rule: it ends before the head's
    # reserved start (low's end), so it runs.
    fixed = _partly_grown(None)
    assert started(fixed.step()) == ["filler"]


def test_backfill_may_use_what_the_waiting_head_does_not_need() -> None:
    w = plan_world(head=task(5, cpu=1, resources={"gpu": 1}), filler=task(1, cpu=2))
    w.step()
    assert w.status("head").reason == Reason.WAITING_FOR_SCALE_UP
    assert w.phase("filler") is Phase.STARTING  # 4 CPU free, the head needs 1 of them
    strict = plan_world(head=task(5, cpu=1, resources={"gpu": 1}), filler=task(1, cpu=2))
    strict.options = PlanOptions(policy="strict")
    strict.step()
    assert strict.status("filler").reason == Reason.WAITING_BEHIND_HIGHER_PRIORITY


PREEMPT = PlanOptions(policy="backfill", preemption="LowerPriority")


def _full_with(w: PlanWorld, name: str, cpu: float) -> None:
    w.specs[name] = task(0, cpu=cpu)
    assert started(w.step()) == [name]
    w.ray(name, RUNNING)


def test_a_preemptor_the_new_nodes_will_serve_waits_for_them() -> None:
    w = plan_world()
    w.options = PREEMPT
    _full_with(w, "low", 4)
    w.specs["urgent"] = task(9, cpu=4)
    p = w.step()
    assert not p.preemptions and not p.stops
    assert w.status("urgent").reason == Reason.WAITING_FOR_SCALE_UP


def test_a_preemptor_the_ceiling_cannot_serve_preempts_as_on_a_fixed_cluster() -> None:
    full = Scaling(Capacity(4, 0, 16 * GIB))  # at its ceiling already
    w = plan_world(scaling=full)
    w.options = PREEMPT
    _full_with(w, "low", 4)
    w.specs["urgent"] = task(9, cpu=4)
    p = w.step()
    assert [pre.preemptor for pre in p.preemptions] == ["urgent"]


def test_after_its_scale_up_timeout_a_preemptor_may_preempt() -> None:
    w = plan_world()
    w.options = PREEMPT
    _full_with(w, "low", 4)
    w.specs["urgent"] = task(9, cpu=4)
    w.step()
    w.now = w.now + timedelta(seconds=600)
    p = w.step()
    assert [pre.preemptor for pre in p.preemptions] == ["urgent"]


def test_a_task_may_give_its_own_bundles() -> None:
    w = plan_world(a=task(cpu=12, resources={"bundles": [{"cpu": 4}, {"cpu": 4}, {"cpu": 4}]}))
    p = w.step()
    assert p.scale_request == (Capacity(4, 0, 0),) * 3


def test_own_bundles_that_no_node_holds_are_unschedulable() -> None:
    w = plan_world(a=task(cpu=12, resources={"bundles": [{"cpu": 12}]}))
    p = w.step()
    assert w.phase("a") is Phase.UNSCHEDULABLE
    assert "resources.bundles[1] (12 CPU) fits no node type" in (w.status("a").message or "")
    assert p.scale_request == ()


def test_bundles_must_hold_the_task_resources() -> None:
    with pytest.raises(ValidationError, match="cpu 4 < 8"):
        task(cpu=8, resources={"bundles": [{"cpu": 4}]})


def test_bundles_are_no_part_of_the_spec_hash() -> None:
    assert task(cpu=8).spec_hash() == task(cpu=8, resources={"bundles": [{"cpu": 8}]}).spec_hash()


# --- shaping and merging, on their own ------------------------------------------------------


@pytest.mark.parametrize(
    ("request_", "kinds", "expected"),
    [
        (Capacity(4), (SMALL,), (Capacity(4),)),
        (Capacity(16), (SMALL,), (Capacity(8), Capacity(8))),
        (Capacity(20, 2), (SMALL, GPU), (Capacity(8, 1), Capacity(8, 1), Capacity(4, 0))),
        (Capacity(64), (), (Capacity(64),)),  # no node types known: as it is
        (Capacity(10), (SMALL, NodeType("big", Capacity(16), 1)), (Capacity(10),)),
    ],
)
def test_shape_cuts_a_request_to_the_node_types(
    request_: Capacity, kinds: tuple[NodeType, ...], expected: tuple[Capacity, ...]
) -> None:
    assert shape(request_, kinds) == expected
    assert sum(expected, Capacity()) == request_


def test_merge_lets_the_report_decide_and_a_configured_cap_only_lower_it() -> None:
    report = Scaling(Capacity(52, 2), (SMALL, GPU), "autoscaler", ("small",), ("boom",))
    assert merge(report) == report
    capped = merge(report, (), Capacity(16, 8))
    assert capped is not None and capped.ceiling == Capacity(16, 2)
    assert capped.pending == ("small",) and capped.node_types == (SMALL, GPU)
    assert merge(report, (NodeType("x", Capacity(1), 1),)) == report  # Ray's types win
    configured = merge(None, (SMALL, GPU))
    assert configured is not None and configured.ceiling == Capacity(48, 2, 256 * GIB)
    assert merge(None, (), Capacity(64)) == Scaling(Capacity(64))
    assert merge(None) is None


def test_a_budget_that_leaves_a_resource_out_does_not_cap_it() -> None:
    # `--max-capacity cpu=16` (or maxCapacity: {cpu: 16}) caps CPUs only: the GPUs and memory
    # the autoscaler or the node types can add stay in the ceiling.
    report = Scaling(Capacity(52, 2, 208 * GIB), (SMALL, GPU), "autoscaler")
    capped = merge(report, (), parse_capacity("cpu=16"))
    assert capped is not None and capped.ceiling == Capacity(16, 2, 208 * GIB)
    configured = merge(None, (SMALL, GPU), parse_capacity("cpu=16"))
    assert configured is not None and configured.ceiling == Capacity(16, 2, 256 * GIB)
    # A budget alone says only what it names can grow.
    assert merge(None, (), parse_capacity("cpu=64")) == Scaling(Capacity(64))
    config = parse_queue_config(
        "apiVersion: rayqueue/v1\nkind: QueueConfig\nspec:\n  cluster:\n"
        "    maxCapacity: {cpu: 8}\n"
        "    nodeTypes:\n      - {name: g, resources: {cpu: 4, gpu: 1}, maxCount: 4}\n"
    )
    got = from_config(None, config.spec.cluster)
    assert got is not None and got.ceiling == Capacity(8, 4, 0)


def test_from_config_reads_the_cluster_section_and_the_flag() -> None:
    config = parse_queue_config(
        "apiVersion: rayqueue/v1\nkind: QueueConfig\nspec:\n  cluster:\n"
        "    maxCapacity: {cpu: 32, gpu: 2}\n"
        "    nodeTypes:\n      - {name: small, resources: {cpu: 8}, maxCount: 8}\n"
    )
    section = config.spec.cluster
    got = from_config(None, section, Capacity(24, 4, 0))
    assert got is not None and got.ceiling == Capacity(24, 0, 0)
    assert [k.name for k in got.node_types] == ["small"]
    assert from_config(None, None, None) is None


def test_the_ceiling_is_never_below_the_cluster_of_the_moment() -> None:
    assert ceiling_of(Capacity(8, 1), Scaling(Capacity(4, 2))) == Capacity(8, 2)
    assert ceiling_of(Capacity(8, 1), None) == Capacity(8, 1)


def test_in_its_backoff_it_still_starts_once_its_resources_are_free() -> None:
    w = plan_world(a=task(cpu=8))
    w.step()
    w.now = T0 + timedelta(seconds=700)
    w.step()
    assert w.status("a").reason == Reason.SCALE_UP_TIMEOUT
    w.capacity = Capacity(12, 0, 48 * GIB)  # the nodes came late after all
    assert started(w.step()) == ["a"]


def test_other_clients_jobs_count_in_the_request_when_they_count_as_used() -> None:
    w = plan_world(a=task(cpu=8))
    w.options = PlanOptions(count_foreign_jobs=True)
    w.jobs["theirs"] = RayJob("theirs", RUNNING, entrypoint_cpus=3)
    p = w.step()
    assert p.scale_request == (Capacity(3, 0, 0), Capacity(8, 0, 0))


def test_a_victims_size_is_its_share_of_the_ceiling_as_admission_sees_it() -> None:
    # Memory is at its ceiling, CPU may grow fourfold. Of today's 16 CPU, `cpus` (12 CPU) would
    # look the bigger run (0.75 against 0.5 of the memory); of the ceiling's 64 CPU, the share
    # quotas are counted in, it is the smaller (0.19 against 0.5), so it loses least and goes.
    memory_full = Scaling(Capacity(64, 0, 32 * GIB))
    w = PlanWorld(specs={}, capacity=Capacity(16, 0, 32 * GIB), scaling=memory_full)
    w.options = PREEMPT
    w.specs["cpus"] = task(0, cpu=12, resources={"memory": "1Gi"})
    w.specs["mem"] = task(0, cpu=1, resources={"memory": "16Gi"})
    assert sorted(started(w.step())) == ["cpus", "mem"]
    w.ray("cpus", RUNNING)
    w.ray("mem", RUNNING)
    w.step(100)
    # 16 GiB: no new node brings memory, and either victim frees enough.
    w.specs["urgent"] = task(9, cpu=1, resources={"memory": "16Gi"})
    p = w.step()
    assert [pr.victims for pr in p.preemptions] == [("cpus",)]
