"""Fair-share preemption in a tree of queues (issue 30, session 9): a preemptor in a sub-queue
may stop a run of another sub-queue when, where their branches meet, its side's weighted share
with it running is at most the victim's side's after the stop (`LessThanOrEqualToFinalShare`
at that node); between the users of one team the users are compared, between users of two
teams the teams are. Pure sharing where they meet; a queue under its nominal quota is never a
victim by share."""

from __future__ import annotations

from reconciler.core import fairpreempt
from reconciler.core.fairhold import QueueState
from reconciler.core.victims import Preemptor, Rules, Running
from specs.cluster import Capacity
from specs.models import ConditionType, Phase, Reason
from specs.parse import parse_queue_config
from tests.support.planner_world import task
from tests.unit.test_planner_fairpreempt import ON, victims, world

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
    w = world({f"team-a/y/r{i}": task(0, 1) for i in range(8)}, tree())
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
    w = world(runs, tree())
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
    w = world(runs, tree())
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
        chosen = fairpreempt.choose(
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
