"""Queue positions without rewriting every sidecar: exact for the first
`exact_queue_positions` of a queue, a bucket beyond, so a start at the head leaves the far
sidecars as they are."""

from __future__ import annotations

from reconciler.core.admit import position_bucket
from specs.cluster import SUCCEEDED, Capacity
from specs.settings.process import PlanOptions
from specs.task.models import Phase
from tests.support.planner_world import GIB, PlanWorld, task


def _world(waiting: int, exact: int) -> PlanWorld:
    specs = {f"t{i:03d}": task(cpu=1) for i in range(waiting + 1)}
    options = PlanOptions(queue_id="q", policy="strict", exact_queue_positions=exact)
    return PlanWorld(specs, capacity=Capacity(1, 0, 16 * GIB), options=options)


def test_buckets_grow_tenfold_past_the_exact_places() -> None:
    assert [position_bucket(p, 100) for p in (101, 1000, 1001, 10000, 10001)] == [
        ">100",
        ">100",
        ">1000",
        ">1000",
        ">10000",
    ]
    assert position_bucket(4, 3) == ">3"
    assert position_bucket(31, 3) == ">30"


def test_exact_places_then_a_bucket_without_the_moving_parts() -> None:
    world = _world(waiting=40, exact=3)
    world.step()
    first = world.status("t001")
    assert (first.queue_position, first.queue_position_bucket) == (1, None)
    third = world.status("t003")
    assert (third.queue_position, third.queue_position_bucket) == (3, None)
    fourth = world.status("t004")
    assert (fourth.queue_position, fourth.queue_position_bucket) == (None, ">3")
    assert fourth.estimated_start_at is None
    assert fourth.message == "WaitingBehindHigherPriority; at least 3 tasks ahead"
    far = world.status("t040")
    assert (far.queue_position, far.queue_position_bucket) == (None, ">30")


def test_a_start_at_the_head_rewrites_only_the_near_and_the_bucket_edges() -> None:
    world = _world(waiting=40, exact=3)
    world.step()
    world.ray("t000", SUCCEEDED)
    before = dict(world.statuses)
    plan = world.step()
    assert world.phase("t001") is Phase.STARTING
    changed = {name for name, s in plan.statuses.items() if before.get(name) is not s}
    # t000 ends, t001 starts, t002..t004 move up into the exact places, t031 (place 31 ->
    # 30) moves from >30 to >3; every other far sidecar is the very object handed in.
    assert changed == {"t000", "t001", "t002", "t003", "t004", "t031"}
    assert world.status("t004").queue_position == 3
    assert world.status("t031").queue_position_bucket == ">3"


def test_leaving_the_queue_clears_the_bucket() -> None:
    world = _world(waiting=5, exact=1)
    world.step()
    assert world.status("t003").queue_position_bucket == ">1"
    world.specs["t003"] = task(cpu=1, suspend=True)
    world.step()
    assert world.status("t003").queue_position_bucket is None
