"""Fair-share preemption in a tree of queues: a preemptor in a sub-queue
may stop a run of another sub-queue when, where their branches meet, its side's weighted share
with it running is at most the victim's side's after the stop (`LessThanOrEqualToFinalShare`
at that node); between the users of one team the users are compared, between users of two
teams the teams are. Pure sharing where they meet; a queue under its nominal quota is never a
victim by share."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import timedelta

from hypothesis import event, given, settings
from hypothesis import strategies as st

from reconciler.core.preemption import betweenqueues
from reconciler.core.preemption.victims import Preemptor, Rules, Running
from reconciler.core.queues.shareresult import QueueState
from specs.cluster import Capacity
from specs.queues.parse import parse_queue_config
from specs.settings.process import PlanOptions
from specs.task.models import ConditionType, Phase, Reason
from tests.support.planner_world import GIB, Cluster, running_cluster, task
from tests.unit.core.preemption.test_fair_preemption import ON, histories, play, victims

USERS = ("team-a", "team-a/x", "team-a/y", "team-b", "team-b/x", "team-b/y")


def tree(extra: dict[str, str] | None = None) -> str:
    """Two teams of two users, no nominal quotas (pure sharing), fair-share preemption on;
    `extra`: YAML lines for a queue, e.g. {'team-b/x': 'nominalQuota: {cpu: 4}'}."""
    extra = extra or {}
    queues = "".join(
        f"    - name: {q}\n" + (f"      {extra[q]}\n" if q in extra else "") for q in USERS
    )
    text = "apiVersion: rayqueue/v1\nkind: QueueConfig\nspec:\n  queues:\n" + queues
    text += ON.lstrip("\n") + "\n"
    parse_queue_config(text)  # a valid tree
    return text


def test_a_user_preempts_its_sibling_by_share_within_its_team() -> None:
    # team-a/y runs the whole 8-CPU cluster; team-a/x (nothing) waits with a 2-CPU head. They
    # meet at team-a: x's share with it running (2) is at most y's after (6).
    w = running_cluster({f"team-a/y/r{i}": task(0, 1) for i in range(8)}, tree())
    w.specs["team-a/x/head"] = task(0, 2)
    p = w.step()
    assert len(victims(p)) == 2 and all(v.startswith("team-a/y/") for v in victims(p))
    assert {d.reason for d in p.preemptions} == {Reason.IN_COHORT_FAIR_SHARING}
    w.finish_stops()
    assert [s.task for s in w.step().submits] == ["team-a/x/head"]
    w.run_all()
    for _ in range(2):  # and y does not take it back
        p = w.step()
        assert p.preemptions == [] and p.stops == []
    assert w.phase("team-a/x/head") is Phase.RUNNING


def test_users_of_two_teams_are_judged_by_their_teams_shares() -> None:
    # team-b/y runs 6 CPUs, team-a/y 2: team-a/x's 1-CPU head is judged at the top (team-a 2
    # with it 3, team-b 6 after 5), so it takes a run of team-b; the message names the teams.
    runs = {f"team-b/y/r{i}": task(0, 1) for i in range(6)}
    runs |= {f"team-a/y/r{i}": task(1, 1) for i in range(2)}  # higher priority: taken last
    w = running_cluster(runs, tree())
    w.specs["team-a/x/head"] = task(0, 1)
    p = w.step()
    assert len(victims(p)) == 1 and victims(p)[0].startswith("team-b/y/")
    (cond,) = w.status(victims(p)[0]).conditions
    assert cond.type == ConditionType.PREEMPTED
    assert "by fair share between team-a and team-b" in cond.message


def test_a_team_level_with_the_other_is_not_preempted_for_one_of_its_users() -> None:
    # team-a/y 4, team-b/x 4: team-a/x (nothing) is below team-b/x as a queue, but its team
    # is level with team-b, so it may take only from its sibling team-a/y (flat, comparing the
    # sub-queues alone, it would take from team-b).
    runs = {f"team-b/x/r{i}": task(0, 1) for i in range(4)}
    runs |= {f"team-a/y/r{i}": task(1, 1) for i in range(4)}  # taken after team-b's, if ever
    w = running_cluster(runs, tree())
    w.specs["team-a/x/head"] = task(0, 1)
    p = w.step()
    assert len(victims(p)) == 1 and victims(p)[0].startswith("team-a/y/")


def _state(name: str, parent: str | None = None, nominal: float = 0) -> QueueState:
    zero = Capacity()
    return QueueState(
        name,
        Capacity(nominal, 0, 0),
        zero,
        zero,
        zero,
        0.0,
        (),
        parent=parent,
        lend=Capacity(16, 0, 0),
    )


def test_a_user_under_its_nominal_quota_is_not_a_victim() -> None:
    # team-b (no nominal quota) holds 8, all of it team-b/x's, whose own nominal quota is 8:
    # team-a/x (nothing) is below team-b at the top, but no run of team-b/x may be taken by
    # share below its nominal quota; with a nominal quota of 6 two may go.
    for nominal, taken in ((8.0, 0), (6.0, 1)):
        states = {
            "team-a": _state("team-a"),
            "team-a/x": _state("team-a/x", "team-a"),
            "team-b": _state("team-b"),
            "team-b/x": _state("team-b/x", "team-b", nominal),
        }
        usage = dict.fromkeys(states, Capacity())
        usage["team-b"] = usage["team-b/x"] = Capacity(8, 0, 0)
        pool = [("team-b/x", Running(f"r{i}", 0, Capacity(1, 0, 0), float(i))) for i in range(8)]
        chosen = betweenqueues.choose(
            Preemptor("p", 0, Capacity(1, 0, 0)),
            "team-a/x",
            pool,
            dict.fromkeys(states, Rules()),
            states,
            usage,
            lambda freed: freed.cpu >= 1,
            0.0,
        )
        assert len(chosen) == taken
        assert all(v.judged == ("team-a", "team-b") for v in chosen)


# --- the properties of test_fair_preemption.py, on trees ------------------------------------

EXAMPLES = int(os.environ.get("RAYQUEUE_PROPERTY_EXAMPLES", "100"))
LEND = 16.0  # what the queues' shares are of
CLUSTER = 8.0  # what the runs fill (free: the rest)


@st.composite
def forests(draw: st.DrawFn) -> tuple[dict[str, QueueState], list[str]]:
    """2-3 top queues, each divided into 1-3 users or not (pure sharing at the top; a user may
    have a nominal quota of its own), random weights. Returns the states and the leaves."""
    states: dict[str, QueueState] = {}
    leaves: list[str] = []
    for t in range(draw(st.integers(2, 3))):
        team = f"t{t}"
        weight = draw(st.sampled_from([1.0, 1.0, 1.0, 0.5, 3.0]))
        states[team] = replace(_state(team), weight=weight)
        users = draw(st.integers(0, 3))
        if users == 0:
            leaves.append(team)
        for u in range(users):
            name = f"{team}/u{u}"
            nominal = draw(st.sampled_from([0.0, 0.0, 0.0, 2.0]))
            user_weight = draw(st.sampled_from([1.0, 1.0, 1.0, 0.5, 3.0]))
            states[name] = replace(_state(name, team, nominal), weight=user_weight)
            leaves.append(name)
    return states, leaves


def _subtree(states: dict[str, QueueState], top: str) -> set[str]:
    return {q for q in states if top in betweenqueues.chain(states, q)}


@settings(max_examples=EXAMPLES * 3, deadline=None)
@given(
    forests(),
    st.lists(
        st.tuples(st.integers(0, 8), st.integers(1, 3), st.integers(0, 2), st.booleans()),
        min_size=4,
        max_size=14,
    ),
    st.integers(1, 4),
    st.integers(0, 8),
    st.booleans(),
)
def test_in_a_tree_every_take_keeps_the_preemptors_side_at_or_below_the_victims_and_none_comes_back(
    forest: tuple[dict[str, QueueState], list[str]],
    runs: list[tuple[int, int, int, bool]],
    need: int,
    me: int,
    idle: bool,
) -> None:
    """Over random trees and runs: the set is minimal, no run is wider than the head, none is
    its own queue's or taken below a nominal quota; where each victim's branch meets the
    preemptor's, the preemptor's side ends at or below the victim's side in weighted share;
    and replanning right after, no victim's queue takes anything back from that side."""
    states, leaves = forest
    mine = leaves[me % len(leaves)]
    pool: list[tuple[str, Running]] = []
    usage = dict.fromkeys(states, Capacity())
    for k, (q, cpus, priority, preemptible) in enumerate(runs):
        where = leaves[q % len(leaves)]
        if idle and where == mine:  # the preemptor's queue holds nothing: takes are likelier
            where = leaves[(q + 1) % len(leaves)]
        run = Running(f"r{k}", priority, Capacity(cpus, 0, 0), float(k), preemptible)
        pool.append((where, run))
        for owner in betweenqueues.chain(states, where):
            usage[owner] = usage[owner] + run.request
    held = sum((usage[q].cpu for q in states if states[q].parent is None), 0.0)
    free = Capacity(max(CLUSTER - held, 0.0), 0, 0)
    preemptor = Preemptor("p", 0, Capacity(float(need), 0, 0))
    rules = dict.fromkeys(states, Rules())

    def fits(freed: Capacity) -> bool:
        return preemptor.request.fits_in(free + freed)

    chosen = betweenqueues.choose(preemptor, mine, pool, rules, states, usage, fits, 100.0)
    if not chosen:
        return
    event("a take")
    if any(v.judged is not None for v in chosen):
        event("judged above the leaves")
    freed = sum((v.run.request for v in chosen), Capacity())
    assert fits(freed)
    after = dict(usage)
    for owner in betweenqueues.chain(states, mine):
        after[owner] = after[owner] + preemptor.request
    for victim in chosen:
        assert not fits(freed - victim.run.request)  # minimal
        assert victim.run.preemptible and victim.queue != mine
        assert victim.run.request.fits_in(preemptor.request)  # never wider than the head
        for owner in betweenqueues.chain(states, victim.queue):
            after[owner] = after[owner] - victim.run.request
    judged: list[tuple[str, str]] = []
    for victim in chosen:
        met = betweenqueues.sides(states, betweenqueues.chain(states, mine), victim.queue)
        assert met is not None
        own, side = met
        assert victim.judged == (None if met == (mine, victim.queue) else met)
        share = betweenqueues.share_of
        assert share(states[own], after[own]) <= share(states[side], after[side]) + 1e-9
        path = betweenqueues.chain(states, victim.queue)
        for q in path[: path.index(side) + 1]:  # never taken below a nominal quota
            assert after[q].cpu >= states[q].nominal.cpu - 1e-9
        judged.append(met)
    # Replan: the preemptor runs, its victims are gone; no head of a victim's queue, whatever
    # its size, takes anything of the side it lost to.
    gone = {v.run.name for v in chosen}
    pool2 = [(q, r) for q, r in pool if r.name not in gone]
    pool2.append((mine, Running("p", 0, preemptor.request, 1e6)))
    held2 = sum((after[q].cpu for q in states if states[q].parent is None), 0.0)
    free2 = Capacity(max(CLUSTER - held2, 0.0), 0, 0)
    for victim, (own, _) in zip(chosen, judged, strict=True):
        lost_to = _subtree(states, own)
        for width in range(1, int(LEND) + 1):
            back = Preemptor("back", 9, Capacity(float(width), 0, 0))
            again = betweenqueues.choose(
                back,
                victim.queue,
                pool2,
                rules,
                states,
                after,
                lambda freed, back=back: back.request.fits_in(free2 + freed),
                2e6,
            )
            assert not any(v.queue in lost_to for v in again), (victim, own, again)


_LEAVES = ("team-a/x/", "team-a/y/", "team-b/x/", "team-b/y/", "team-c/")


def _tree_with_weights() -> str:
    """team-a and team-b divided into users x and y (weights 1 and 3), team-c flat; the teams'
    weights 1, 1, 3; decayed usage."""
    lines = {
        "team-a": "weight: 1",
        "team-a/x": "weight: 1",
        "team-a/y": "weight: 3",
        "team-b": "weight: 1",
        "team-b/x": "weight: 1",
        "team-b/y": "weight: 3",
        "team-c": "weight: 3",
    }
    queues = "".join(f"    - name: {q}\n      {line}\n" for q, line in lines.items())
    return (
        "apiVersion: rayqueue/v1\nkind: QueueConfig\nspec:\n  queues:\n"
        + queues
        + "  fairSharing: {preemptionStrategies: [LessThanOrEqualToFinalShare]}\n"
    )


@settings(max_examples=EXAMPLES, deadline=None)
@given(histories(len(_LEAVES)))
def test_in_a_tree_the_planner_never_preempts_back_right_after(
    steps: list[tuple[int | str | bool, ...]],
) -> None:
    """test_fair_preemption.py's planner property on a 2-level tree: random arrivals (some
    `preemptible: false`) into four users of two teams and a flat team; after each fair-share
    preemption the preemptor starts in the pass its victims are gone, and the pass after, no
    victim's queue takes anything of the side it lost to (where their branches meet)."""
    text = _tree_with_weights()
    config = parse_queue_config(text)
    w = Cluster(
        {},
        capacity=Capacity(8, 0, 64 * GIB),
        options=PlanOptions(policy="backfill"),
        queues=config,
    )

    def leaf(name: str) -> str:
        return name.rsplit("/", 1)[0]

    def meet(a: str, b: str) -> tuple[str, str]:
        """The two queues, one on each path, right below where `a`'s and `b`'s branches meet."""
        pa, pb = leaf(a).split("/"), leaf(b).split("/")
        depth = 0
        while depth < min(len(pa), len(pb)) and pa[depth] == pb[depth]:
            depth += 1
        return "/".join(pa[: depth + 1]), "/".join(pb[: depth + 1])

    for index, action in enumerate(steps):
        p = play(w, action, index, _LEAVES)
        if p is None:
            continue
        fair = [d for d in p.preemptions if d.reason is Reason.IN_COHORT_FAIR_SHARING]
        if not fair:
            continue
        event("a fair-share preemption")
        # (the victim's side, the preemptor's side) of every take
        lost = {meet(v, d.preemptor) for d in fair for v in d.victims}
        event(
            "between users of one team" if any("/" in side for side, _ in lost) else "between teams"
        )
        w.finish_stops()
        started = {s.task for s in w.step().submits}
        # The room its victims freed is the preemptor's: it starts in the pass they are gone.
        assert {d.preemptor for d in fair} <= started, (fair, started)
        w.run_all()
        again = w.step()
        for d in again.preemptions:
            for v in d.victims:
                assert meet(d.preemptor, v) not in lost, (d, lost)


def test_only_the_least_served_user_with_a_waiting_head_preempts_for_its_team() -> None:
    # besteffort (no room held): team-b/x runs 6 of 8 CPUs, team-a/y 2; team-a/x, holding
    # nothing, waits with a 4-CPU head (too wide to take by share: team-a would end above
    # team-b), team-a/y with a 1-CPU head. team-a is below team-b, but its turn is x's, the
    # less served of its users: y's head does not preempt for itself.
    runs = {f"team-b/x/r{i}": task(0, 1) for i in range(6)}
    runs |= {f"team-a/y/r{i}": task(0, 1) for i in range(2)}
    w = Cluster(
        dict(runs),
        capacity=Capacity(8, 0, 64 * GIB),
        options=PlanOptions(policy="besteffort"),
        queues=parse_queue_config(tree()),
    )
    w.step()
    w.run_all()
    w.now += timedelta(seconds=600)
    w.specs["team-a/x/wide"] = task(0, 4)
    w.specs["team-a/y/one"] = task(0, 1)
    p = w.step()
    assert p.preemptions == [] and p.stops == []
    # with x's head gone, y is its team's least served with a head waiting: it preempts
    del w.specs["team-a/x/wide"]
    p = w.step()
    assert [d.preemptor for d in p.preemptions] == ["team-a/y/one"]
    assert victims(p)[0].startswith("team-b/x/")


def test_a_team_loses_its_most_served_users_runs_first() -> None:
    # team-b/x runs 6 CPUs, team-b/y (its newest run) 1: team-a/x's 2-CPU head takes one from
    # team-b by share; within team-b it is x, the most served, that gives the run up (by age
    # alone, y's newest run would go, leaving y with nothing).
    w = running_cluster({f"team-b/x/r{i}": task(0, 1) for i in range(6)}, tree())
    w.specs["team-b/y/r0"] = task(0, 1)
    w.step()
    w.run_all()
    w.now += timedelta(seconds=600)
    w.specs["team-a/x/head"] = task(0, 2)
    p = w.step()
    assert len(victims(p)) == 1 and victims(p)[0].startswith("team-b/x/")
