"""The fair-sharing hold (docs/scheduling.md, "Team queues and fair sharing") on nested
queues: a tree of 2 teams x 2 users, pure sharing (no nominal quotas; the default queue lends the
cluster), backfill. (1) the least-served queue whose head cannot start starts its own smaller
task past it, and (2) the others pass the room held for that head only with what fits beside
it: at each level (between teams, and between the users of a team), and across teams."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.core.admission.policies import POLICIES, Candidate, Claim
from reconciler.core.queues import fairshare
from reconciler.core.queues.fairshare import NO_LIMIT, QueueDemand, QueueQuota, admit
from reconciler.core.queues.quotas import dominant_share
from specs.cluster import Capacity
from specs.task.models import Reason

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


@pytest.mark.parametrize(
    ("timeout", "starts"),
    [(50, True), (1000, False)],  # ends before the wide head's start at t=100, or after it
)
@pytest.mark.parametrize("least_served", [True, False])
def test_the_least_served_users_own_smaller_task_backfills_past_its_blocked_head(
    least_served: bool, timeout: float, starts: bool
) -> None:
    # team-b's user runs 10 CPUs: 4 end by t=100 (then team-a/x/wide, 8, fits), 6 never.
    # team-a/x/small (3 CPUs) fits the 6 free now; its own backfill, within its quota view,
    # keeps it back. team-a is the least-served team and x its least-served user with work:
    # (1) at both levels starts it if it ends before the wide head's start (EASY backfill
    # against the room held across queues), not if it would push that start back; team-b's
    # task may not take the held room either way.
    running = [Claim(cpu(4), 100.0), Claim(cpu(6), None)]
    b_task = task("team-b/x/more", 3) if least_served else task("team-b/x/wide", 8)
    small = task("team-a/x/small", 3, timeout)
    demands = tree(
        {
            "team-a/x": (0, [task("team-a/x/wide", 8), small]),
            "team-b/x": (10, [b_task]),
        }
    )
    if not least_served:  # team-a has used the whole cluster in the past: team-b is behind
        a = demands[0]
        demands[0] = QueueDemand(a.quota, a.usage, a.candidates, a.policy, past=cpu(16))
    result = run(demands, running)
    assert "team-a/x/wide" not in result.start
    if least_served:
        assert result.start == (["team-a/x/small"] if starts else [])
        waiting = result.waiting["team-b/x/more"]
        assert waiting.reason == "WaitingBehindReservation"
        assert "kept for team-a/x/wide" in waiting.message
    else:
        # team-a is ahead: its user's own reservation within its queue stands
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
        assert result.held is not None and result.held.front == "team-a/x/wide"


@pytest.mark.parametrize(("extra", "b_starts"), [(0, False), (1, True)])
def test_a_user_of_another_team_passes_the_held_room_only_beside_the_head(
    extra: int, b_starts: bool
) -> None:
    # (2) across parents: team-a/x's wide head is held; team-b/y (its team's least served)
    # has a short task that ends, by its timeout, before the reserved start: that does not
    # let it past; it passes only if it fits beside the head at its start.
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


def test_fair_preemption_never_takes_the_room_held_for_a_less_served_users_head() -> None:
    # The flat case (test_fair_preemption.py) with team-a divided into users x and y:
    # team-b holds 6 of 8 CPUs, team-c 2 (runs of an hour), team-a nothing; team-a/x's 8-CPU
    # head waits for the room they free (it is held for it, at both levels). team-c's 1-CPU
    # head, below team-b in share, would preempt one of team-b's runs for room that drains for
    # team-a/x; its run (2 h) would not fit beside that head at its start: it takes nothing.
    from specs.queues.parse import parse_queue_config
    from tests.support.planner_world import running_cluster
    from tests.support.planner_world import task as spec
    from tests.unit.core.preemption.test_fair_preemption import ON

    text = (
        "apiVersion: rayqueue/v1\nkind: QueueConfig\nspec:\n  queues:\n"
        + "".join(f"    - name: {q}\n" for q in ("team-a", "team-a/x", "team-a/y"))
        + "".join(f"    - name: {q}\n" for q in ("team-b", "team-c"))
        + ON.lstrip("\n")
        + "\n"
    )
    parse_queue_config(text)  # a valid tree
    hour = {"timeoutSeconds": 3600}
    runs = {f"team-b/b{i}": spec(0, 1, **hour) for i in range(6)}
    runs |= {f"team-c/c{i}": spec(0, 1, **hour) for i in range(2)}
    w = running_cluster(runs, text)
    w.specs["team-a/x/wide"] = spec(0, 8)
    assert w.step().preemptions == []
    w.specs["team-c/x"] = spec(0, 1, timeoutSeconds=7200)
    p = w.step()
    assert p.preemptions == [] and p.stops == []
    assert w.status("team-c/x").reason is not Reason.PREEMPTING


# The property of test_usage_decay.py (the next start goes to the lowest weighted decayed
# share among the queues that can start one) on a tree of 2-3 teams of 1-3 users: at each
# level, among the queues that can start one, the chosen one has the lowest share before its
# pick (its decayed past use counted; a team's is its users' summed).

WEEK = 168 * 3600.0


@st.composite
def forests(draw: st.DrawFn) -> tuple[list[QueueDemand], Capacity, dict[str, int]]:
    demands: list[QueueDemand] = []
    names: list[str] = []
    for t in range(draw(st.integers(2, 3))):
        team = f"t{t}"
        users = []
        team_past = Capacity()
        for u in range(draw(st.integers(1, 3))):
            name = f"{team}/u{u}"
            sizes = draw(st.lists(st.integers(1, 8), max_size=3))
            tasks = [Candidate(f"{name}/{i}", cpu(s), 0) for i, s in enumerate(sizes)]
            names += [c.name for c in tasks]
            held = cpu(draw(st.integers(0, 8)))
            past = cpu(draw(st.sampled_from([0.0, 2.0]) | st.floats(0, 32, allow_nan=False)))
            team_past = team_past + past
            weight = draw(st.sampled_from([0.5, 1.0, 3.0]))
            quota = QueueQuota(name, Capacity(), NO_LIMIT, NO_LIMIT, weight, parent=team)
            users.append(QueueDemand(quota, held, tasks, POLICIES["besteffort"], (), past))
        weight = draw(st.sampled_from([0.5, 1.0, 3.0]))
        quota = QueueQuota(team, Capacity(), NO_LIMIT, NO_LIMIT, weight)
        demands.append(QueueDemand(quota, Capacity(), [], POLICIES["besteffort"], (), team_past))
        demands += users
    demands.append(QueueDemand(QueueQuota("default", cpu(64)), Capacity(), [], POLICIES["strict"]))
    free = cpu(draw(st.integers(0, 16)))
    places = draw(st.permutations(names))
    return demands, free, {name: place for place, name in enumerate(places)}


@settings(max_examples=300, deadline=None)
@given(forests())
def test_at_each_level_of_a_tree_the_start_goes_to_the_lowest_weighted_decayed_share(
    case: tuple[list[QueueDemand], Capacity, dict[str, int]],
) -> None:
    demands, free, order = case
    result = admit(cpu(64), free, demands, [], 0.0, 1, "none", order=order)
    lend = cpu(64)  # pure sharing: what the default queue lends, at both levels

    def share(q: QueueDemand, usage: Capacity) -> float:
        return dominant_share(usage, q.quota.nominal, lend, q.quota.weight, q.past).weighted

    users = [q for q in demands if q.quota.parent is not None]
    can = {q.quota.name for q in users if any(c.request.fits_in(free) for c in q.candidates)}
    if not can:
        assert result.start == []
        return
    assert len(result.start) == 1
    user = result.start[0].rsplit("/", 1)[0]
    team = user.split("/")[0]
    held: dict[str, Capacity] = {}
    for q in users:
        held[q.quota.parent or ""] = held.get(q.quota.parent or "", Capacity()) + q.usage
    teams = {q.quota.name: q for q in demands if q.quota.name in held}
    team_shares = {
        name: share(q, held[name])
        for name, q in teams.items()
        if any(u.quota.parent == name and u.quota.name in can for u in users)
    }
    assert team_shares[team] == pytest.approx(min(team_shares.values()))
    user_shares = {q.quota.name: share(q, q.usage) for q in users if q.quota.parent == team}
    mine = [name for name in user_shares if name in can]
    assert user in mine
    assert user_shares[user] == pytest.approx(min(user_shares[name] for name in mine))
