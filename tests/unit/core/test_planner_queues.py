"""The planner with team queues (_queues.yaml): queue in status, positions per queue, reasons,
quotas across passes, and nothing changed without a config."""

from __future__ import annotations

import pytest

from reconciler.core.planner import Plan
from specs.cluster import RUNNING, SUCCEEDED, Capacity
from specs.queues.parse import parse_queue_config
from specs.settings.process import PlanOptions
from specs.task.models import Phase
from tests.support.planner_world import GIB, PlanWorld, task

CONFIG = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
      nominalQuota: {cpu: 4}
    - name: team-b
      nominalQuota: {cpu: 4}
      borrowingLimit: {cpu: 0}
"""


def started(p: Plan) -> list[str]:
    return [s.task for s in p.submits]


def plan_world(specs: dict[str, tuple[int, float]], config: str | None = CONFIG, **kw: object):
    return PlanWorld(
        specs={name: task(priority, cpu) for name, (priority, cpu) in specs.items()},
        capacity=Capacity(8, 0, 16 * GIB),
        queues=parse_queue_config(config) if config else None,
        **kw,  # type: ignore[arg-type]
    )


def test_without_a_config_statuses_are_exactly_those_of_one_queue() -> None:
    specs = {f"team-a/t{i}": (0, 2) for i in range(6)} | {"hello": (5, 1)}
    plain, configured = PlanWorld({n: task(*v) for n, v in specs.items()}), plan_world(specs, None)
    plain.capacity = configured.capacity
    for _ in range(3):
        a, b = plain.step(), configured.step()
        assert started(a) == started(b)
        assert {n: s.to_document() for n, s in a.statuses.items()} == {
            n: s.to_document() for n, s in b.statuses.items()
        }
    assert all(s.status.queue is None for s in plain.statuses.values())
    assert "queue" not in plain.statuses["hello"].to_document()["status"]


def test_status_names_the_queue_and_positions_count_within_it() -> None:
    w = plan_world(
        {
            "team-a/big": (9, 6),
            "team-a/x": (1, 1),
            "team-a/y": (0, 1),
            "team-b/z": (5, 1),
            "loose": (0, 1),
        },
        options=PlanOptions(policy="strict"),  # the message below is strict's
    )
    p = w.step()
    # team-b's task is within its nominal and goes first; then the borrowers by share (both 0,
    # then by name): default's task, and team-a's 6-CPU head, borrowing 2 of team-b's idle 3
    assert sorted(started(p)) == ["loose", "team-a/big", "team-b/z"]
    assert {n: w.status(n).queue for n in w.specs} == {
        "team-a/big": "team-a",
        "team-a/x": "team-a",
        "team-a/y": "team-a",
        "team-b/z": "team-b",
        "loose": "default",
    }
    assert (w.status("team-a/x").queue_position, w.status("team-a/y").queue_position) == (1, 2)
    # team-a borrowed all the idle quota there was (team-b's 3 less default's 1)
    assert w.status("team-a/x").reason == "QuotaExceeded"
    assert w.status("team-a/x").message == (
        "team-a uses 6/4 CPU of its quota; can borrow 0 more (no other queue has idle quota to "
        "lend); first in team-a"
    )
    assert w.status("team-a/y").reason == "WaitingBehindHigherPriority"


def test_quota_exceeded_names_queue_and_limit() -> None:
    w = plan_world({f"team-b/t{i}": (0, 2) for i in range(4)}, options=PlanOptions(policy="strict"))
    w.step()
    running = [n for n in w.specs if w.phase(n) is Phase.STARTING]
    assert len(running) == 2  # team-b: 4 CPUs of nominal, borrowingLimit 0
    waiting = w.status("team-b/t2")
    assert waiting.reason == "QuotaExceeded"
    assert waiting.message == (
        "team-b uses 4/4 CPU of its quota; can borrow 0 more (borrowingLimit 0); first in team-b"
    )
    assert waiting.queue_position == 1
    assert w.status("team-b/t3").message.endswith("1 task ahead in team-b")


def test_nominal_comes_back_when_borrowed_jobs_end() -> None:
    w = plan_world({f"team-a/t{i}": (0, 1) for i in range(8)})
    w.step()
    assert len(started(w.step(0))) == 0  # all 8 started in the first pass: team-b is idle
    assert sum(w.phase(n) is Phase.STARTING for n in w.specs) == 8
    w.specs |= {f"team-b/u{i}": task(0, 1) for i in range(4)}
    p = w.step()
    assert started(p) == []
    assert w.status("team-b/u0").reason == "WaitingForResources"
    # two borrowed team-a jobs end: both freed CPUs go to team-b, none back to team-a
    w.specs |= {"team-a/more": task(9, 1)}
    for name in ("team-a/t0", "team-a/t1"):
        w.ray(name, RUNNING)
        w.ray(name, SUCCEEDED)
    p = w.step()
    assert sorted(started(p)) == ["team-b/u0", "team-b/u1"]
    assert w.status("team-a/more").phase is Phase.QUEUED


def test_unchanged_statuses_keep_their_identity_with_queues() -> None:
    w = plan_world({"team-a/a": (0, 4), "team-a/b": (0, 8), "team-b/c": (0, 8)})
    w.step()
    for name in w.specs:
        if w.phase(name) is Phase.STARTING:
            w.ray(name, RUNNING)
    w.step()
    before = dict(w.statuses)
    p = w.step()
    for name, status in p.statuses.items():
        assert status is before[name], name


@pytest.mark.parametrize("policy", ["strict", "backfill", "besteffort"])
def test_every_policy_runs_under_queues(policy: str) -> None:
    w = plan_world({f"team-a/t{i}": (0, 1) for i in range(10)}, options=PlanOptions(policy=policy))
    w.step()
    assert sum(w.phase(n) is Phase.STARTING for n in w.specs) == 8


OVERSUBSCRIBED = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: a
      nominalQuota: {cpu: 3}
    - name: b
      nominalQuota: {cpu: 4}
"""


@pytest.mark.parametrize("policy", ["strict", "backfill"])  # besteffort holds no room
def test_a_task_behind_one_kept_for_another_queue_says_so(policy: str) -> None:
    # a/wide would borrow the 2 CPUs kept for b's head, so fair share keeps it back; a/narrow
    # fits a's quota and the cluster, and waits only because a/wide is ahead of it. It once
    # said "needs 0B memory; 16Gi free" (a shortfall measured as if a/wide had started).
    w = plan_world(
        {"a/run": (3, 2), "a/wide": (2, 2), "a/narrow": (1, 1), "b/head": (3, 3)},
        OVERSUBSCRIBED,
        options=PlanOptions(policy=policy),
    )
    w.capacity = Capacity(4, 0, 16 * GIB)
    assert started(w.step()) == ["a/run"]
    assert w.status("a/wide").reason == "WaitingBehindReservation"
    narrow = w.status("a/narrow")
    assert narrow.reason == "WaitingBehindHigherPriority"
    assert narrow.message == "waits behind a/wide; 1 task ahead in a"
    for name in w.specs:
        assert "needs 0" not in (w.status(name).message or ""), name
