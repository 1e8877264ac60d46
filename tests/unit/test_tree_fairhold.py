"""The eighth pass's rule (issue 30, docs/scheduling.md "Eighth pass") on nested queues: a
tree of 2 teams x 2 users, pure sharing (no nominal quotas; the default queue lends the
cluster), backfill. (1) the least-served queue whose head cannot start starts its own smaller
task past it, and (2) the others pass the room held for that head only with what fits beside
it: at each level (between teams, and between the users of a team), and across teams."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from reconciler.core import fairshare
from reconciler.core.fairshare import NO_LIMIT, QueueDemand, QueueQuota, admit
from reconciler.core.policies import POLICIES, Candidate, Claim
from specs.cluster import Capacity

CLUSTER = Capacity(16, 0, 0)


def cpu(n: float) -> Capacity:
    return Capacity(n, 0, 0)


def task(name: str, size: float, timeout: float = 0) -> Candidate:
    return Candidate(name, cpu(size), timeout)


def tree(users: dict[str, tuple[float, Sequence[Candidate]]]) -> list[QueueDemand]:
    """team-a, team-b (weights 1), each divided into x and y; `users`: by sub-queue name, what
    it holds and its waiting tasks. A team's usage is its users' (the tree sums them)."""
    demands = []
    for team in ("team-a", "team-b"):
        quota = QueueQuota(team, Capacity(), NO_LIMIT, NO_LIMIT, 1.0)
        demands.append(QueueDemand(quota, Capacity(), [], POLICIES["backfill"]))
        for user in ("x", "y"):
            name = f"{team}/{user}"
            held, tasks = users.get(name, (0.0, ()))
            quota = QueueQuota(name, Capacity(), NO_LIMIT, NO_LIMIT, 1.0, parent=team)
            demands.append(QueueDemand(quota, cpu(held), list(tasks), POLICIES["backfill"]))
    lender = QueueQuota("default", CLUSTER)
    demands.append(QueueDemand(lender, Capacity(), [], POLICIES["strict"]))
    return demands


def run(demands: list[QueueDemand], running: list[Claim]) -> fairshare.FairAdmission:
    used = Capacity()
    for claim in running:
        used = used + claim.request
    return admit(CLUSTER, CLUSTER - used, demands, running, 0.0, 10, fairshare.BACKFILL_RESERVATION)


@pytest.mark.parametrize("least_served", [True, False])
def test_the_least_served_users_own_smaller_task_starts_past_its_blocked_head(
    least_served: bool,
) -> None:
    # team-b's user runs 10 CPUs: 4 end by t=100 (then team-a/x/wide, 8, fits), 6 never.
    # team-a/x/small (3 CPUs, 1000 s) fits the 6 free now but would delay the wide head: its
    # own backfill keeps it back. team-a is the least-served team and x its least-served user
    # with work: (1) at both levels starts it; team-b's task may not take the held room.
    running = [Claim(cpu(4), 100.0), Claim(cpu(6), None)]
    b_task = task("team-b/x/more", 3) if least_served else task("team-b/x/wide", 8)
    demands = tree(
        {
            "team-a/x": (0, [task("team-a/x/wide", 8), task("team-a/x/small", 3, 1000)]),
            "team-b/x": (10, [b_task]),
        }
    )
    if not least_served:  # team-a has used the whole cluster in the past: team-b is behind
        a = demands[0]
        demands[0] = QueueDemand(a.quota, a.usage, a.candidates, a.policy, past=cpu(16))
    result = run(demands, running)
    assert "team-a/x/wide" not in result.start
    if least_served:
        assert result.start == ["team-a/x/small"]
        waiting = result.waiting["team-b/x/more"]
        assert waiting.reason == "WaitingBehindReservation"
        assert "kept for team-a/x/wide" in waiting.message
    else:
        # team-a is ahead: its user's own reservation within its queue stands, as before
        assert result.start == []


@pytest.mark.parametrize(("extra", "y_starts"), [(0, False), (1, True)])
def test_a_sibling_passes_the_room_held_for_its_less_served_siblings_head_only_beside_it(
    extra: int, y_starts: bool
) -> None:
    # (2) between the users of one team: team-a (2 CPUs) is behind team-b (8). Within it,
    # team-a/x (nothing held) is behind team-a/y (2 held); x's wide head needs the 2 CPUs
    # team-b frees at t=100, and x has nothing smaller. team-a/y/long (1 CPU, 1000 s) would
    # take part of that room: it passes only if it fits beside the head at its start.
    running = [Claim(cpu(2), 100.0), Claim(cpu(6), None), Claim(cpu(2), None)]
    demands = tree(
        {
            "team-a/x": (0, [task("team-a/x/wide", 8 - extra)]),
            "team-a/y": (2, [task("team-a/y/long", 1, 1000)]),
            "team-b/x": (8, [task("team-b/x/more", 1, 1000)]),
        }
    )
    result = run(demands, running)
    assert "team-a/x/wide" not in result.start
    assert ("team-a/y/long" in result.start) is y_starts
    if not y_starts:
        waiting = result.waiting["team-a/y/long"]
        assert waiting.reason == "WaitingBehindReservation"
        assert "kept for team-a/x/wide" in waiting.message
        # and the team's hold is the top level's too: team-b may not take the room either
        assert result.waiting["team-b/x/more"].reason == "WaitingBehindReservation"
        assert result.held is not None and result.held.head == "team-a/x/wide"


@pytest.mark.parametrize(("extra", "b_starts"), [(0, False), (1, True)])
def test_a_user_of_another_team_passes_the_held_room_only_beside_the_head(
    extra: int, b_starts: bool
) -> None:
    # (2) across parents: team-a/x's wide head is held; team-b/y (its team's least served)
    # has a short task that ends, by its timeout, before the reserved start: that no longer
    # lets it past (eighth pass); it passes only if it fits beside the head at its start.
    running = [Claim(cpu(2), 100.0), Claim(cpu(8), None)]
    demands = tree(
        {
            "team-a/x": (0, [task("team-a/x/wide", 8 - extra)]),
            "team-b/x": (10, []),
            "team-b/y": (0, [task("team-b/y/short", 1, 50)]),
        }
    )
    result = run(demands, running)
    assert result.start == (["team-b/y/short"] if b_starts else [])
    if not b_starts:
        waiting = result.waiting["team-b/y/short"]
        assert waiting.reason == "WaitingBehindReservation"
        assert "kept for team-a/x/wide" in waiting.message
