"""Nested queues: a queue divided into sub-queues by its folders. Sub-queues borrow
from their siblings first, then through their parent; none ever exceeds what its parent may take."""

from __future__ import annotations

from collections.abc import Mapping

from reconciler.core.admission.policies import POLICIES, Candidate
from reconciler.core.admission.waits import QueueFull, RunningLimit
from reconciler.core.preemption.preempt import _loads
from reconciler.core.preemption.victims import QueueLoad
from reconciler.core.queues import dispatch
from reconciler.core.queues.fairshare import QueueState
from specs.cluster import Capacity
from specs.queues.config import QueueConfig
from specs.queues.parse import parse_queue_config

CLUSTER = Capacity(16, 0, 0)


def config(body: str) -> QueueConfig:
    return parse_queue_config("apiVersion: rayqueue/v1\nkind: QueueConfig\nspec:\n" + body)


def flood(prefix: str, n: int, size: float = 1) -> list[Candidate]:
    return [Candidate(f"{prefix}/t{i:02}", Capacity(size, 0, 0), 0) for i in range(n)]


def admit(
    cfg: QueueConfig,
    waiting: list[Candidate],
    in_use: Mapping[str, Capacity] | None = None,
) -> tuple[dispatch.QueueAdmission, dict[str, int]]:
    held = dict(in_use or {})
    used = Capacity()
    for request in held.values():
        used = used + request
    result = dispatch.admit_by_queue(
        cfg, CLUSTER, CLUSTER - used, waiting, held, [], 0.0, 1000, POLICIES["strict"]
    )
    counts: dict[str, int] = {}
    for name in result.start:
        owner = result.queue_of[name]
        counts[owner] = counts.get(owner, 0) + 1
    return result, counts


TWO_TEAMS = """\
  queues:
    - name: team-a
      nominalQuota: {cpu: 8}
      borrowingLimit: {cpu: BORROW}
    - name: team-a/x
      nominalQuota: {cpu: 4}
    - name: team-a/y
      nominalQuota: {cpu: 4}
    - name: team-b
      nominalQuota: {cpu: 8}
"""


def test_the_tree_comes_from_the_folders() -> None:
    cfg = config(TWO_TEAMS.replace("BORROW", "0"))
    assert cfg.parent_of("team-a/x") == "team-a"
    assert cfg.parent_of("team-a") is None
    assert cfg.depth_of("team-a/y") == 2
    assert cfg.queue_of("team-a/x/job") == "team-a/x"


def test_a_sub_queue_borrows_its_siblings_idle_quota_first() -> None:
    # team-a may not borrow from team-b at all, yet x borrows y's idle 4 CPU: within its
    # parent's nominal quota, lending between siblings is free.
    result, counts = admit(config(TWO_TEAMS.replace("BORROW", "0")), flood("team-a/x", 20))
    assert counts == {"team-a/x": 8}
    assert result.states["team-a"].borrowed == Capacity()
    assert result.states["team-a/x"].borrowed == Capacity(4, 0, 0)
    assert result.states["team-a/x"].parent == "team-a"


def test_a_sub_queue_never_exceeds_its_parents_nominal_plus_what_the_parent_may_borrow() -> None:
    # team-b is idle (8 CPU to lend), x has no limit of its own: team-a's borrowingLimit of 2
    # caps the whole subtree at 8 + 2.
    _, counts = admit(config(TWO_TEAMS.replace("BORROW", "2")), flood("team-a/x", 20))
    assert counts == {"team-a/x": 10}


def test_past_the_siblings_a_sub_queue_borrows_up_the_tree() -> None:
    _, counts = admit(config(TWO_TEAMS.replace("BORROW", "100")), flood("team-a/x", 20))
    assert counts == {"team-a/x": 16}


def test_a_returning_sibling_gets_its_nominal_quota_before_a_borrower() -> None:
    cfg = config(TWO_TEAMS.replace("BORROW", "0"))
    waiting = flood("team-a/x", 20) + flood("team-a/y", 4)
    _, counts = admit(cfg, waiting)
    assert counts == {"team-a/x": 4, "team-a/y": 4}


def test_siblings_share_by_weight_with_the_top_levels_formula() -> None:
    cfg = config(
        """\
  queues:
    - name: team-a
      nominalQuota: {cpu: 16}
    - name: team-a/x
      weight: 1
    - name: team-a/y
      weight: 3
"""
    )
    _, counts = admit(cfg, flood("team-a/x", 20) + flood("team-a/y", 20))
    assert counts == {"team-a/x": 4, "team-a/y": 12}


def test_a_parents_max_running_caps_its_sub_queues() -> None:
    cfg = config(
        """\
  queues:
    - name: team-a
      nominalQuota: {cpu: 16}
      maxRunning: 3
    - name: team-a/x
      nominalQuota: {cpu: 8}
    - name: team-a/y
      nominalQuota: {cpu: 8}
"""
    )
    result, counts = admit(cfg, flood("team-a/x", 5) + flood("team-a/y", 5))
    assert sum(counts.values()) == 3
    waits = [w for name, w in result.waiting.items() if name.startswith("team-a/")]
    assert waits and all(w.lacks == RunningLimit("team-a", 3) for w in waits)


def test_tasks_directly_in_a_divided_queues_folder_get_what_its_sub_queues_leave() -> None:
    cfg = config(TWO_TEAMS.replace("BORROW", "0").replace("{cpu: 4}", "{cpu: 3}"))
    result, counts = admit(cfg, flood("team-a", 10), {"team-a/x/run": Capacity(1, 0, 0)})
    # 2 CPU are team-a's own; x's and y's idle quota (2 + 3) is lent within team-a.
    assert counts == {"team-a": 7}
    assert result.states["team-a"].usage == Capacity(8, 0, 0)


def test_sub_queues_adding_up_to_more_than_their_parent_are_reported_not_fatal() -> None:
    cfg = config(TWO_TEAMS.replace("BORROW", "0").replace("{cpu: 4}", "{cpu: 6}"))
    result, counts = admit(cfg, flood("team-a/x", 20) + flood("team-a/y", 20))
    assert result.oversubscribed is not None
    assert 'sub-queues of "team-a"' in result.oversubscribed
    assert "12 CPU > 8" in result.oversubscribed
    assert sum(counts.values()) == 8  # the parent's quota still caps them


def test_the_default_queue_gets_what_top_queues_leave_not_counting_sub_queues_twice() -> None:
    result, _ = admit(config(TWO_TEAMS.replace("BORROW", "0")), [])
    assert result.states["default"].nominal == Capacity(0, 0, 0)
    assert result.oversubscribed is None


def test_a_parents_max_queued_counts_its_sub_queues_tasks() -> None:
    cfg = config(
        """\
  queues:
    - name: team-a
      maxQueued: 3
    - name: team-a/x
    - name: team-a/y
      maxQueued: 1
"""
    )
    arrivals = [(1.0, "team-a/y/a"), (2.0, "team-a/y/b"), (3.0, "team-a/x/c"), (4.0, "team-a/x/d")]
    arrivals += [(5.0, "team-a/e")]
    full = dispatch.queue_full(cfg, arrivals)
    assert sorted(full) == ["team-a/e", "team-a/y/b"]  # y's own limit, then team-a's 3
    assert full["team-a/y/b"].lacks == QueueFull("team-a/y", 1)
    assert full["team-a/e"].lacks == QueueFull("team-a", 3)


def test_siblings_share_by_weight_when_their_parent_only_borrows() -> None:
    # Pure sharing: team-a holds no quota, so everything its users get is borrowed from the
    # default queue's idle 16 CPUs; the users' weights still divide it.
    cfg = config(
        """\
  queues:
    - name: team-a
    - name: team-a/x
      weight: 1
    - name: team-a/y
      weight: 3
"""
    )
    _, counts = admit(cfg, flood("team-a/x", 20) + flood("team-a/y", 20))
    assert counts == {"team-a/x": 4, "team-a/y": 12}


def _state(name: str, nominal: float, used: float, parent: str | None = None) -> QueueState:
    return QueueState(
        name,
        Capacity(nominal, 0, 0),
        Capacity(used, 0, 0),
        Capacity(max(0.0, used - nominal), 0, 0),
        Capacity(),
        0.0,
        (),
        parent=parent,
    )


def test_reclaim_between_nested_queues_is_judged_where_the_branches_meet() -> None:
    states = {
        "team-a": _state("team-a", 8, 8),
        "team-a/x": _state("team-a/x", 4, 0, "team-a"),
        "team-a/y": _state("team-a/y", 4, 8, "team-a"),  # borrows x's idle quota
        "team-b": _state("team-b", 8, 8),
        "team-b/z": _state("team-b/z", 2, 8, "team-b"),  # borrows within team-b only
    }
    usage = {name: s.usage for name, s in states.items()}
    loads = _loads(states, usage, dict(usage), "team-a/x", Capacity(1, 0, 0))
    # Its sibling y borrows from x: reclaimable, by y's own quota.
    assert loads["team-a/y"] == QueueLoad(Capacity(4, 0, 0), Capacity(8, 0, 0))
    # z borrows only within team-b, and team-a is not below its nominal: team-b is not a lender
    # to take back from. Judged as team-b (at nominal), never as z (above its own).
    assert "team-b/z" not in loads
    assert "team-a" not in loads  # its own parent is never a victim queue
    # With team-a below its nominal, team-b's side is judged as team-b: it borrows nothing.
    states["team-a/y"] = _state("team-a/y", 4, 2, "team-a")
    states["team-a"] = _state("team-a", 8, 2)
    usage = {name: s.usage for name, s in states.items()}
    loads = _loads(states, usage, dict(usage), "team-a/x", Capacity(1, 0, 0))
    assert loads["team-b/z"] == QueueLoad(Capacity(8, 0, 0), Capacity(8, 0, 0))
