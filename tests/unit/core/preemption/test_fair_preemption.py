"""Fair-share preemption between sibling queues (`fairSharing.preemptionStrategies:
[LessThanOrEqualToFinalShare]`): in pure sharing, a queue whose head cannot start and whose
weighted share is below a sibling's stops that sibling's runs, only as many as needed, and
only if afterwards its share is at most the victim queue's (no preempting back)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from reconciler.core.planner import Plan
from reconciler.core.preemption import betweenqueues
from reconciler.core.preemption.victims import Preemptor, Rules, Running
from reconciler.core.queues.shareresult import QueueState
from specs.cluster import SUCCEEDED, Capacity
from specs.queues.parse import parse_queue_config
from specs.settings.process import PlanOptions
from specs.task.models import ConditionType, Phase, Reason
from tests.support.planner_world import GIB, Cluster, running_cluster, task

ON = "\n  fairSharing: {mode: CurrentUsage, preemptionStrategies: [LessThanOrEqualToFinalShare]}"
OFF = "\n  fairSharing: {mode: CurrentUsage}"


def config(strategy: str = ON, weights: tuple[float, ...] = (1, 1), extra: str = "") -> str:
    """Teams with no nominal quota (pure sharing): the cluster is the default queue's, lent."""
    queues = "".join(
        f"    - name: team-{'abc'[i]}\n      weight: {w}\n{extra}" for i, w in enumerate(weights)
    )
    return f"apiVersion: rayqueue/v1\nkind: QueueConfig\nspec:\n  queues:\n{queues}{strategy}\n"


def b_fills(text: str | None = None, **spec: object) -> Cluster:
    """team-b's eight 1-CPU runs fill the 8-CPU cluster, started one second apart."""
    w = Cluster(
        {},
        capacity=Capacity(8, 0, 64 * GIB),
        options=PlanOptions(policy="backfill"),
        queues=parse_queue_config(text if text is not None else config()),
    )
    for i in range(8):
        w.specs[f"team-b/b{i}"] = task(i % 2, 1, **spec)
        w.step()
        w.run_all()
    w.now += timedelta(seconds=600)
    return w


def victims(p: Plan) -> list[str]:
    return sorted(v for d in p.preemptions for v in d.victims)


def test_a_queue_below_takes_the_newest_lowest_priority_runs_and_says_why() -> None:
    w = b_fills()
    w.specs["team-a/x"] = task(0, 2)
    p = w.step()
    (decision,) = p.preemptions
    assert decision.preemptor == "team-a/x" and decision.queue == "team-a"
    assert decision.reason is Reason.IN_COHORT_FAIR_SHARING
    # priority 0 first (b0, b2, b4, b6), the newest of them first
    assert sorted(decision.victims) == ["team-b/b4", "team-b/b6"]
    for victim in decision.victims:
        body = w.status(victim)
        assert body.phase is Phase.QUEUED and body.preempted_by == "team-a/x"
        (cond,) = body.conditions
        assert (cond.type, cond.reason) == (
            ConditionType.PREEMPTED,
            Reason.IN_COHORT_FAIR_SHARING,
        )
        assert "team-a/x" in cond.message and "fair share" in cond.message
        assert "team-b's" in cond.message
    assert w.status("team-a/x").reason == Reason.PREEMPTING


def test_off_unless_the_queue_file_turns_it_on() -> None:
    w = b_fills(config(OFF))
    w.specs["team-a/x"] = task(0, 2)
    p = w.step()
    assert p.preemptions == [] and p.stops == []
    assert w.status("team-a/x").reason != Reason.PREEMPTING


def test_the_final_share_rule_stops_a_take_that_would_flip_the_order() -> None:
    # team-b holds 4 of 8; a 4-CPU head of team-a would leave team-a at 4 and team-b at 0:
    # team-b could then preempt back, so nothing is taken. A 2-CPU head: 2 against 2, allowed.
    runs = {f"team-b/b{i}": task(0, 1) for i in range(4)}
    runs |= {"default-job": task(0, 4)}
    w = running_cluster(runs, config())
    w.specs["team-a/wide"] = task(0, 4)
    assert w.step().preemptions == []
    del w.specs["team-a/wide"]
    w.step()
    w.specs["team-a/x"] = task(0, 2)
    assert victims(w.step()) == ["team-b/b0", "team-b/b1"]  # started together: by name


def test_weights_count_in_the_share() -> None:
    # team-a weight 3 holds 3, team-b weight 1 holds 5: team-a's share 3/8/3 < 5/8.
    runs = {f"team-a/a{i}": task(0, 1) for i in range(3)}
    runs |= {f"team-b/b{i}": task(0, 1) for i in range(5)}
    w = running_cluster(runs, config(weights=(3, 1)))
    w.specs["team-a/x"] = task(0, 1)
    assert victims(w.step()) == ["team-b/b0"]
    # equal weights: 3 against 5 still lets team-a take one (4 <= 4) ...
    w = running_cluster(runs, config())
    w.specs["team-a/x"] = task(0, 1)
    assert victims(w.step()) == ["team-b/b0"]
    # ... but not two (5 > 3)
    w = running_cluster(runs, config())
    w.specs["team-a/x"] = task(0, 2)
    assert w.step().preemptions == []


def test_a_queue_at_or_above_the_other_s_share_takes_nothing() -> None:
    runs = {f"team-a/a{i}": task(0, 1) for i in range(4)}
    runs |= {f"team-b/b{i}": task(0, 1) for i in range(4)}
    w = running_cluster(runs, config())
    w.specs["team-a/x"] = task(0, 1)
    assert w.step().preemptions == []


def test_preemptible_false_is_never_a_victim() -> None:
    w = b_fills(preemptible=False)
    w.specs["team-a/x"] = task(0, 2)
    assert w.step().preemptions == []


def test_a_head_with_preemptible_false_never_preempts_by_share() -> None:
    # In pure sharing all a queue holds is borrowed, and a preemptible: false task never
    # borrows: it can never start on what it frees. It must not stop team-b's runs in every
    # pass its last victims are gone, and never start.
    w = b_fills()
    w.specs["team-a/x"] = task(0, 2, preemptible=False)
    for _ in range(3):
        p = w.step()
        assert p.preemptions == [] and p.stops == []
        w.finish_stops()
    assert w.status("team-a/x").reason == Reason.QUOTA_EXCEEDED


def test_min_runtime_of_the_victim_queue_protects_young_runs() -> None:
    text = config(extra="      preemption: {minRuntimeSeconds: 3600}\n")
    w = b_fills(text)
    w.specs["team-a/x"] = task(0, 2)
    assert w.step().preemptions == []
    w.now += timedelta(seconds=3600)
    assert len(victims(w.step())) == 2


def test_not_with_a_nominal_quota() -> None:
    text = (
        "apiVersion: rayqueue/v1\nkind: QueueConfig\nspec:\n  queues:\n"
        "    - name: team-a\n      nominalQuota: {cpu: 1}\n    - name: team-b\n" + ON + "\n"
    )
    w = b_fills(text)
    w.specs["team-a/x"] = task(0, 4)
    assert w.step().preemptions == []


def test_the_preemptor_starts_once_its_victims_stop_and_nobody_preempts_back() -> None:
    w = b_fills()
    w.specs["team-a/x"] = task(0, 2)
    chosen = victims(w.step())
    assert len(chosen) == 2
    w.finish_stops()
    p = w.step()
    assert [s.task for s in p.submits] == ["team-a/x"]
    w.run_all()
    for _ in range(3):
        p = w.step()
        assert p.preemptions == [] and p.stops == []
    assert w.phase("team-a/x") is Phase.RUNNING


def test_a_bad_strategy_is_refused_with_its_place() -> None:
    text = config(strategy="\n  fairSharing: {preemptionStrategies: [LessThanInitialShare]}")
    try:
        parse_queue_config(text)
    except ValueError as error:
        assert "spec.fairSharing.preemptionStrategies[0]" in str(error)
    else:
        raise AssertionError("accepted")


# --- the property ------------------------------------------------------------------------------


def _state(name: str, weight: float, lend: float, past: float | None = None) -> QueueState:
    zero = Capacity()
    mean = None if past is None else Capacity(past, 0, 0)
    return QueueState(
        name, zero, zero, zero, zero, 0.0, (), weight=weight, past=mean, lend=Capacity(lend, 0, 0)
    )


def test_never_from_a_queue_the_order_counts_as_less_served() -> None:
    # a: a past mean of 4 CPUs, 2 held now; b: no past, 12 held; the cluster is full. With
    # today's use in full (the rule's share) b is above a even after the take (10/16 against
    # 8/16), but the order, counting today's use at a twentieth, serves b first (0.6/16
    # against 4.1/16): a takes nothing of b's.
    pool = [("a", Running("a1", 0, Capacity(2, 0, 0), 0.0))]
    pool += [("b", Running(f"b{k}", 0, Capacity(2, 0, 0), float(k))) for k in range(6)]
    usage = {"a": Capacity(2, 0, 0), "b": Capacity(12, 0, 0)}
    head = Preemptor("p", 0, Capacity(2, 0, 0))
    rules = dict.fromkeys(usage, Rules())

    def fits(freed: Capacity) -> bool:
        return head.request.fits_in(freed)  # the cluster is full

    with_past = {"a": _state("a", 1, 16, past=4), "b": _state("b", 1, 16, past=0)}
    assert betweenqueues.choose(head, "a", pool, rules, with_past, usage, fits, 100.0) == ()
    # the same holdings with no past: both shares agree that b is above, and a takes one run
    now_only = {"a": _state("a", 1, 16), "b": _state("b", 1, 16)}
    taken = betweenqueues.choose(head, "a", pool, rules, now_only, usage, fits, 100.0)
    assert [v.run.name for v in taken] == ["b5"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([0.5, 1, 2, 3]), min_size=2, max_size=4),
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(1, 4), st.integers(0, 2), st.booleans()),
        max_size=12,
    ),
    st.integers(1, 8),
    st.integers(0, 3),
    st.none() | st.lists(st.sampled_from([0.0, 1.0, 2.5, 4.0, 8.0]), min_size=4, max_size=4),
)
def test_every_take_keeps_the_preemptor_at_or_below_the_victim_and_none_comes_back(
    weights: list[float],
    runs: list[tuple[int, int, int, bool]],
    need: int,
    me: int,
    pasts: list[float] | None,
) -> None:
    """Over random queue states, with or without decayed past use: each victim's queue ends
    at or above the preemptor's share, was above it in the order's share before, and
    replanning right after (the victims gone, the preemptor running) lets no victim queue
    take anything back from the preemptor's."""
    total = 16.0
    names = [f"q{i}" for i in range(len(weights))]
    me %= len(names)
    states = {
        n: _state(n, w, total, None if pasts is None else pasts[i])
        for i, (n, w) in enumerate(zip(names, weights, strict=True))
    }
    pool: list[tuple[str, Running]] = []
    usage = dict.fromkeys(names, Capacity())
    for k, (q, cpus, priority, preemptible) in enumerate(runs):
        where = names[q % len(names)]
        run = Running(f"r{k}", priority, Capacity(cpus, 0, 0), float(k), preemptible)
        pool.append((where, run))
        usage[where] = usage[where] + run.request
    held = sum((u.cpu for u in usage.values()), 0.0)
    free = Capacity(max(total - held, 0.0), 0, 0)
    mine = names[me]
    preemptor = Preemptor("p", 0, Capacity(float(need), 0, 0))
    rules = dict.fromkeys(names, Rules())

    def fits(freed: Capacity) -> bool:
        return preemptor.request.fits_in(free + freed)

    # now = 100: every run has started (at k), so none is too young to be a victim
    chosen = betweenqueues.choose(preemptor, mine, pool, rules, states, usage, fits, 100.0)
    if not chosen:
        return
    freed = sum((v.run.request for v in chosen), Capacity())
    assert fits(freed)
    for victim in chosen:  # minimal
        assert not fits(freed - victim.run.request)
        assert victim.run.preemptible and victim.queue != mine
        assert victim.run.request.fits_in(preemptor.request)  # never wider than the head
    after = dict(usage)
    after[mine] = after[mine] + preemptor.request
    for victim in chosen:
        after[victim.queue] = after[victim.queue] - victim.run.request
    mine_share = betweenqueues.share_of(states[mine], after[mine])
    mine_order = betweenqueues.order_share_of(states[mine], usage[mine])
    for victim in chosen:
        assert betweenqueues.order_share_of(states[victim.queue], usage[victim.queue]) > mine_order
        assert victim.shares is not None
        assert mine_share <= betweenqueues.share_of(states[victim.queue], after[victim.queue])
    # Replan: the preemptor runs, its victims are gone; each victim queue's head, whatever
    # its size, takes nothing of the preemptor's queue.
    gone = {v.run.name for v in chosen}
    pool2 = [(q, r) for q, r in pool if r.name not in gone]
    pool2.append((mine, Running("p", 0, preemptor.request, 1e6)))
    held2 = sum((u.cpu for u in after.values()), 0.0)
    free2 = Capacity(max(total - held2, 0.0), 0, 0)
    for queue in {v.queue for v in chosen}:
        for width in range(1, int(total) + 1):
            back = Preemptor("back", 9, Capacity(float(width), 0, 0))
            again = betweenqueues.choose(
                back,
                queue,
                pool2,
                rules,
                states,
                after,
                lambda freed, back=back: back.request.fits_in(free2 + freed),
                2e6,
            )
            assert all(v.queue != mine for v in again)


_QUEUES = ("team-a/", "team-b/", "team-c/")


def histories(folders: int) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    """Random histories for `play`: bursts into one of `folders` folders (some tasks
    `preemptible: false`), finishes, and time passing."""
    return st.lists(
        st.one_of(
            st.tuples(
                st.just("arrive"),
                st.integers(0, folders - 1),
                st.integers(0, 2),
                st.integers(1, 4),
                st.integers(1, 4),
                st.sampled_from([True, True, True, False]),  # preemptible
            ),
            st.tuples(st.just("finish"), st.integers(0, 30)),
            st.tuples(st.just("pass"), st.integers(0, 900)),
        ),
        min_size=10,
        max_size=30,
    )


def play(w: Cluster, action: tuple[Any, ...], index: int, folders: tuple[str, ...]) -> Plan | None:
    """One step of a random history: a burst of tasks arrives in `folders[where]`, a running task
    finishes (no pass: None), or time passes; then a pass, its stops and starts carried out."""
    if action[0] == "arrive":
        _, where, priority, cpus, count, preemptible = action
        for k in range(count):  # a burst: the cluster fills, later queues wait
            name = f"{folders[where]}t{index:02d}-{k}"
            w.specs[name] = task(priority, float(cpus), preemptible=preemptible)
    elif action[0] == "finish":
        running = sorted(n for n in w.statuses if w.phase(n) is Phase.RUNNING)
        if running:
            w.ray(running[action[1] % len(running)], SUCCEEDED)
        return None
    else:
        w.now += timedelta(seconds=action[1])
    p = w.step()
    w.run_all()
    return p


@settings(max_examples=60, deadline=None)
@given(histories(len(_QUEUES)))
def test_the_planner_never_preempts_back_right_after(
    steps: list[tuple[int | str | bool, ...]],
) -> None:
    """Random arrivals (some `preemptible: false`) into three pure-sharing queues (weights 1,
    1, 3; decayed usage): after each fair-share preemption, the preemptor starts in the pass
    its victims are gone, and the pass after takes nothing of the preemptor's queue for a
    victim's queue."""
    text = config(
        strategy="\n  fairSharing: {preemptionStrategies: [LessThanOrEqualToFinalShare]}",
        weights=(1, 1, 3),
    )
    w = Cluster(
        {},
        capacity=Capacity(8, 0, 64 * GIB),
        options=PlanOptions(policy="backfill"),
        queues=parse_queue_config(text),
    )

    def owner(name: str) -> str:
        return name.split("/", 1)[0]

    for index, action in enumerate(steps):
        p = play(w, action, index, _QUEUES)
        if p is None:
            continue
        fair = [d for d in p.preemptions if d.reason is Reason.IN_COHORT_FAIR_SHARING]
        if not fair:
            continue
        event("a fair-share preemption")
        takers = {owner(d.preemptor) for d in fair}
        losers = {owner(v) for d in fair for v in d.victims}
        assert not takers & losers
        w.finish_stops()
        started = {s.task for s in w.step().submits}
        # The room its victims freed is the preemptor's: it starts in the pass they are gone.
        assert {d.preemptor for d in fair} <= started, (fair, started)
        w.run_all()
        again = w.step()
        for d in again.preemptions:
            if owner(d.preemptor) in losers:
                assert not any(owner(v) in takers for v in d.victims), (d, takers)


def test_a_narrow_head_never_stops_a_wider_run() -> None:
    # Found by the simulator: a 1-CPU head stopped a 212-CPU run, whose rest went to others.
    runs = {"team-b/wide": task(0, 6), "team-b/one": task(0, 1), "team-b/two": task(0, 1)}
    w = running_cluster(runs, config())
    w.specs["team-a/x"] = task(0, 1)
    assert victims(w.step()) == ["team-b/one"]
    w = running_cluster({"team-b/wide": task(0, 8)}, config())
    w.specs["team-a/x"] = task(0, 1)
    assert w.step().preemptions == []


def _held_for_a_wide_head(c_timeout: float) -> Cluster:
    """team-b holds 6 of 8 CPUs and team-c 2 (their runs time out after an hour); team-a,
    holding nothing, waits with an 8-CPU head: too wide to preempt for (it would end above
    every other queue), so backfill holds the cluster's room for it as runs end. team-c's
    1-CPU head, its timeout `c_timeout`, is below team-b in share."""
    hour = {"timeoutSeconds": 3600}
    runs = {f"team-b/b{i}": task(0, 1, **hour) for i in range(6)}
    runs |= {f"team-c/c{i}": task(0, 1, **hour) for i in range(2)}
    w = running_cluster(runs, config(weights=(1, 1, 1)))
    w.specs["team-a/wide"] = task(0, 8)
    assert w.step().preemptions == []  # team-a cannot take the whole cluster for itself
    w.specs["team-c/x"] = task(0, 1, timeoutSeconds=c_timeout)
    return w


def test_fair_preemption_never_takes_the_room_held_for_a_less_served_head() -> None:
    # Found by the simulator (Lublin, 600 jobs): with fair-share preemption, team-1's
    # 256-CPU head waited 40 h with the lowest share while the others preempted each other
    # for room that was draining for it.
    w = _held_for_a_wide_head(c_timeout=7200)  # would end after team-a's reserved start
    p = w.step()
    assert p.preemptions == [] and p.stops == []
    assert w.status("team-c/x").reason != Reason.PREEMPTING


def test_fair_preemption_past_a_hold_only_where_admission_would_let_it() -> None:
    # A head that only ends before the held head's reserved start does not pass the hold in
    # admission (only what fits beside the held head does), so it does not preempt past it
    # either.
    w = _held_for_a_wide_head(c_timeout=600)
    p = w.step()
    assert p.preemptions == [] and p.stops == []
    assert w.status("team-c/x").reason != Reason.PREEMPTING
