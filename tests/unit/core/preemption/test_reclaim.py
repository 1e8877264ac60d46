"""Preemption with team queues, table-driven: each queue's `preemption:` block, within-queue
preemption under quotas, and reclaimWithinCohort (lent quota taken back from borrowers)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.core.planner import STOP_WAIT_ENV, Plan
from reconciler.core.task.jobs import RUN_ENV
from specs.cluster import SUCCEEDED, Capacity
from specs.queues.parse import parse_queue_config
from specs.settings.process import PlanOptions
from specs.task.models import ConditionType, Phase, Reason
from specs.task.records import Task
from tests.support.planner_world import GIB, T0, Cluster, task


def config(a: str = "", b: str = "", default: str = "") -> str:
    """Two teams of 4 CPUs each on an 8-CPU cluster; `a`, `b`: their preemption blocks."""

    def block(text: str, indent: str) -> str:
        return f"\n{indent}preemption: {{{text}}}" if text else ""

    return (
        "apiVersion: rayqueue/v1\nkind: QueueConfig\nspec:\n  queues:\n"
        f"    - name: team-a\n      nominalQuota: {{cpu: 4}}{block(a, '      ')}\n"
        f"    - name: team-b\n      nominalQuota: {{cpu: 4}}{block(b, '      ')}\n"
        f"  default: {{{('preemption: {' + default + '}') if default else ''}}}\n"
    )


def started(p: Plan) -> list[str]:
    return sorted(s.task for s in p.submits)


def borrowed_world(
    a: str = "reclaimWithinCohort: Any",
    b: str = "",
    *,
    runs: dict[str, Task] | None = None,
    age: float = 600,
    options: PlanOptions | None = None,
    cpus: float = 8,
) -> Cluster:
    """team-b's runs (default: eight 1-CPU priority-0 ones) fill the idle cluster, borrowing
    all of team-a's quota; they have run `age` seconds."""
    runs = runs if runs is not None else {f"team-b/b{i}": task(0, 1) for i in range(8)}
    w = Cluster(
        dict(runs),
        capacity=Capacity(cpus, 0, 64 * GIB),
        options=options or PlanOptions(policy="backfill"),
        queues=parse_queue_config(config(a, b)),
    )
    w.step()
    w.run_all()
    assert all(w.phase(n) is Phase.RUNNING for n in runs)
    w.now += timedelta(seconds=age)
    return w


def victims(p: Plan) -> list[str]:
    return sorted(v for d in p.preemptions for v in d.victims)


def test_reclaim_takes_back_lent_quota_and_names_the_preemptor() -> None:
    w = borrowed_world()
    w.specs["team-a/x"] = task(0, 2)
    p = w.step()
    (decision,) = p.preemptions
    assert decision.preemptor == "team-a/x" and decision.reason is Reason.RECLAIM
    assert decision.victims == ("team-b/b0", "team-b/b1")  # equal: by name
    assert decision.reasons == (Reason.RECLAIM, Reason.RECLAIM)
    assert decision.queue == "team-a"
    for victim in decision.victims:
        body = w.status(victim)
        assert body.phase is Phase.QUEUED and body.reason == Reason.PREEMPTED
        assert body.preemptions == 1 and body.preempted_by == "team-a/x"
        (cond,) = body.conditions
        assert (cond.type, cond.reason) == (ConditionType.PREEMPTED, Reason.RECLAIM)
        assert "team-a/x" in cond.message and "team-b borrowed" in cond.message
    assert w.status("team-a/x").reason == Reason.PREEMPTING
    assert sorted(s.task or "" for s in p.stops) == ["team-b/b0", "team-b/b1"]


@pytest.mark.parametrize(
    ("mode", "preemptor", "victim", "expected"),
    [
        ("Never", 9, 0, []),
        ("LowerPriority", 5, 0, ["team-b/b0", "team-b/b1"]),
        ("LowerPriority", 0, 0, []),  # equal priority: not lower
        ("LowerPriority", 0, 5, []),
        ("Any", 0, 5, ["team-b/b0", "team-b/b1"]),  # Any: whatever the borrower's priority
    ],
)
def test_reclaim_modes(mode: str, preemptor: int, victim: int, expected: list[str]) -> None:
    runs = {f"team-b/b{i}": task(victim, 1) for i in range(8)}
    w = borrowed_world(f"reclaimWithinCohort: {mode}", runs=runs)
    w.specs["team-a/x"] = task(preemptor, 2)
    p = w.step()
    assert victims(p) == expected
    if not expected:
        assert p.stops == [] and w.status("team-a/x").reason == Reason.WAITING_FOR_RESOURCES


@pytest.mark.parametrize(
    ("block", "flag", "preemptor", "expected"),
    [
        ("minPreemptorPriority: 7", 0, 6, []),
        ("minPreemptorPriority: 7", 0, 7, ["team-b/b0", "team-b/b1"]),  # at the threshold
        ("minPreemptorPriority: 9", 0, 8, []),
        # With a queue file the block is the one place: the setting does not fill in for it.
        ("", 7, 6, ["team-b/b0", "team-b/b1"]),
        ("minPreemptorPriority: 0", 7, 3, ["team-b/b0", "team-b/b1"]),
    ],
)
def test_reclaim_honours_min_preemptor_priority(
    block: str, flag: int, preemptor: int, expected: list[str]
) -> None:
    # Any: priorities of the victims do not matter, only the reclaimer's own.
    options = PlanOptions(policy="backfill", preemption_min_preemptor_priority=flag)
    a = "reclaimWithinCohort: Any" + (f", {block}" if block else "")
    w = borrowed_world(a, options=options)
    w.specs["team-a/x"] = task(preemptor, 2)
    p = w.step()
    assert victims(p) == expected
    if not expected:
        # It waits as without preemption: the cluster, not its quota, holds it back.
        assert p.stops == [] and w.status("team-a/x").reason == Reason.WAITING_FOR_RESOURCES
        plain = borrowed_world("")
        plain.specs["team-a/x"] = task(preemptor, 2)
        plain.step()
        assert w.status("team-a/x").message == plain.status("team-a/x").message


def test_min_preemptor_priority_is_the_preemptor_queue_s() -> None:
    # team-b's threshold of 9 guards nothing of team-b's: it says who in team-b may preempt.
    w = borrowed_world(b="minPreemptorPriority: 9, withinQueue: LowerPriority")
    w.specs["team-a/x"] = task(1, 2)
    assert victims(w.step()) == ["team-b/b0", "team-b/b1"]
    # Within team-a: a head below team-a's threshold stops none of its own queue's runs.
    runs = {f"team-a/a{i}": task(0, 1) for i in range(4)}
    runs |= {f"team-b/b{i}": task(0, 1) for i in range(4)}
    within = "withinQueue: LowerPriority, minPreemptorPriority: 5"
    w2 = borrowed_world(within, runs=runs)
    w2.specs["team-a/x"] = task(4, 1)
    assert w2.step().preemptions == []
    w2.specs["team-a/y"] = task(5, 1)
    assert victims(w2.step()) == ["team-a/a0"]


def test_reclaim_victims_are_minimal() -> None:
    # Greedy takes the cheapest (priority 0, 1 CPU) first, then the 2-CPU priority-1 run; the
    # 1-CPU one is then not needed and is spared.
    runs = {"team-b/small": task(0, 1), "team-b/big": task(1, 2)}
    runs |= {f"team-b/p5-{i}": task(5, 1) for i in range(5)}
    w = borrowed_world("reclaimWithinCohort: LowerPriority", runs=runs)
    w.specs["team-a/x"] = task(9, 2)
    assert victims(w.step()) == ["team-b/big"]


def _three_to_take() -> dict[str, Task]:
    """team-b: four non-preemptible runs within its nominal quota (they may not borrow), and
    four it borrows, of which only the three of priority 0 are below a priority-5 reclaimer."""
    runs = {f"team-b/b{i}": task(9, 1, preemptible=i == 4) for i in range(5)}
    return runs | {f"team-b/p{i}": task(0, 1) for i in range(3)}


def test_nothing_is_reclaimed_when_it_would_not_suffice() -> None:
    w = borrowed_world("reclaimWithinCohort: LowerPriority", runs=_three_to_take())
    w.specs["team-a/x"] = task(5, 4)  # only three CPUs may be taken back
    p = w.step()
    assert p.preemptions == [] and p.stops == []


def test_only_borrowing_queues_lose_runs_and_only_while_they_borrow() -> None:
    # team-b holds 5 (borrows 1), default holds 3 (borrows 3, nominal 0), nothing is free.
    runs = {f"team-b/b{i}": task(0, 1) for i in range(5)}
    runs |= {f"loose{i}": task(1, 1) for i in range(3)}
    w = borrowed_world(runs=runs)
    w.specs["team-a/x"] = task(0, 3)
    p = w.step()
    # team-b's priority-0 runs come first, but after one of them team-b is back at its
    # nominal 4: the rest come from the default queue.
    assert victims(p) == ["loose0", "loose1", "team-b/b0"]
    assert sum(w.phase(f"team-b/b{i}") is Phase.RUNNING for i in range(5)) == 4


def test_a_queue_at_its_nominal_is_never_reclaimed_from() -> None:
    runs = {f"team-b/b{i}": task(0, 1) for i in range(4)} | {"loose": task(5, 4)}
    w = borrowed_world("reclaimWithinCohort: LowerPriority", runs=runs)
    w.specs["team-a/x"] = task(9, 1)
    p = w.step()
    assert victims(p) == ["loose"]  # team-b's cheaper runs are within its nominal quota


def test_reservation_is_held_while_reclaim_victims_stop() -> None:
    w = borrowed_world()
    w.specs["team-a/x"] = task(0, 2)
    w.step()
    # Meanwhile team-b and the default queue want more: none of it may take the room.
    w.specs["team-b/late"] = task(9, 1)
    w.specs["loose"] = task(9, 1)
    for _ in range(3):
        p = w.step()
        assert started(p) == [] and p.preemptions == []
        assert w.status("team-a/x").reason == Reason.PREEMPTING
    w.finish_stops()
    p = w.step()
    assert started(p) == ["team-a/x"]
    assert p.preemptions == []


def test_a_ready_preemptor_goes_before_other_queues_picks() -> None:
    # 10 CPUs: default's nominal is the 2 no team holds. team-b borrows 4 of team-a's; 2 are
    # free. team-a/x needs 4: two victims. `loose`, within default's nominal and (by name)
    # ahead of team-a at equal share, arrives meanwhile; once the victims are gone the room
    # they left is team-a/x's, or it would find it taken and preempt again.
    w = borrowed_world(cpus=10)
    w.specs["team-a/x"] = task(0, 4)
    assert victims(w.step()) == ["team-b/b0", "team-b/b1"]
    w.specs["loose"] = task(0, 2)
    assert started(w.step()) == []  # the reservation: 2 free CPUs are team-a/x's
    w.finish_stops()
    p = w.step()
    assert started(p) == ["team-a/x"] and p.preemptions == []
    assert w.status("loose").reason == Reason.WAITING_FOR_RESOURCES


def test_no_ping_pong_between_queues() -> None:
    w = borrowed_world(b="reclaimWithinCohort: Any")
    w.specs["team-a/x"] = task(0, 4)
    w.step()
    w.finish_stops()
    assert started(w.step()) == ["team-a/x"]
    w.run_all()
    # team-b is back at its nominal with its victims waiting; team-a does not borrow, so
    # team-b, though it may reclaim Any, takes nothing back.
    for _ in range(3):
        p = w.step()
        assert p.preemptions == [] and p.stops == []
    assert w.phase("team-a/x") is Phase.RUNNING
    assert w.status("team-b/b0").reason != Reason.PREEMPTING


def test_runs_still_stopping_for_a_started_preemptor_are_not_borrowed_usage() -> None:
    # Found by the property below. team-a holds 5 + a 3-CPU run stopping for team-b/first,
    # which already started on room that freed meanwhile. team-a borrows 1, not 4: team-b's
    # next head may take back at most that one CPU, which would not seat it.
    runs = {"team-a/wide": task(0, 2), "team-a/old": task(0, 2)}
    runs |= {f"team-a/one{i}": task(0, 1) for i in range(3)}
    w = borrowed_world(runs=runs, cpus=10, b="reclaimWithinCohort: Any")
    w.specs["team-a/three"] = task(0, 3)
    w.step()
    w.run_all()
    w.specs["team-b/first"] = task(0, 1)
    assert victims(w.step()) == ["team-a/three"]
    w.ray("team-a/old", SUCCEEDED)  # frees 2 CPUs: team-b/first starts, `three` still stops
    assert started(w.step()) == ["team-b/first"]
    w.run_all()
    w.specs["team-b/second"] = task(0, 3)
    p = w.step()
    assert p.preemptions == [] and w.status("team-b/second").reason != Reason.PREEMPTING
    w.finish_stops()
    assert started(w.step()) == ["team-b/second"]


def test_min_runtime_of_a_queue_protects_its_runs_within_it_not_from_reclaim() -> None:
    # Work above nominal is always reclaimable, however young (see
    # tests/unit/core/test_planner_guarantees.py); minRuntimeSeconds still guards against the
    # own queue.
    w = borrowed_world("", b="minRuntimeSeconds: 3600, withinQueue: LowerPriority", age=600)
    w.specs["team-b/urgent"] = task(9, 1)
    assert w.step().preemptions == []
    w.now += timedelta(seconds=3000)
    assert victims(w.step()) == ["team-b/b0"]


def test_preemptible_false_is_never_reclaimed() -> None:
    runs = {f"team-b/b{i}": task(0, 1, preemptible=i != 0) for i in range(8)}
    w = borrowed_world(runs=runs)
    w.specs["team-a/x"] = task(0, 1)
    assert victims(w.step()) == ["team-b/b1"]


def test_a_head_beyond_its_nominal_quota_does_not_reclaim() -> None:
    w = borrowed_world()
    w.specs["team-a/x"] = task(0, 5)  # more than team-a's 4: it would borrow, not reclaim
    p = w.step()
    assert p.preemptions == []


def test_only_the_queues_head_reclaims() -> None:
    w = borrowed_world("reclaimWithinCohort: LowerPriority", runs=_three_to_take())
    # team-a's head needs 4 CPUs and only 3 of team-b's runs may go; the small task behind
    # it could be seated by one victim, but it is not the head.
    w.specs["team-a/head"] = task(5, 4)
    w.specs["team-a/behind"] = task(1, 1)
    p = w.step()
    assert p.preemptions == [] and p.stops == []


def test_within_queue_preemption_under_a_full_quota() -> None:
    text = config(a="withinQueue: LowerPriority").replace(
        "nominalQuota: {cpu: 4}", "nominalQuota: {cpu: 4}\n      borrowingLimit: {cpu: 0}", 1
    )
    w = Cluster(
        {f"team-a/low{i}": task(0, 1) for i in range(6)},
        capacity=Capacity(8, 0, 64 * GIB),
        options=PlanOptions(policy="backfill"),
        queues=parse_queue_config(text),
    )
    w.step()
    w.run_all()  # team-a holds its 4; two wait on its quota, 4 CPUs are free in the cluster
    w.now += timedelta(seconds=600)
    w.specs["team-a/urgent"] = task(9, 2)
    p = w.step()
    (decision,) = p.preemptions
    assert decision.reason is Reason.WITHIN_QUEUE and decision.victims == (
        "team-a/low0",
        "team-a/low1",
    )
    assert w.status("team-a/low0").conditions[0].reason == Reason.WITHIN_QUEUE
    w.finish_stops()
    assert started(w.step()) == ["team-a/urgent"]


def test_withinqueue_only_takes_from_its_own_queue() -> None:
    w = borrowed_world("withinQueue: LowerPriority")
    w.specs["team-a/x"] = task(9, 1)
    assert w.step().preemptions == []  # team-b's runs are not team-a's to preempt


def test_with_a_queue_file_only_its_blocks_set_preemption() -> None:
    # No merge rules: --preemption LowerPriority does not reach a queue whose block is silent
    # (the CLI refuses the flag beside a queue file); each block says it for its own queue.
    runs = {f"team-b/b{i}": task(0, 1) for i in range(4)}
    runs |= {f"team-a/a{i}": task(0, 1) for i in range(4)}
    flags = PlanOptions(policy="backfill", preemption="LowerPriority")
    w = borrowed_world("", runs=runs, options=flags)
    w.specs["team-a/x"] = task(9, 1)
    w.specs["team-b/y"] = task(9, 1)
    assert victims(w.step()) == []
    on = "withinQueue: LowerPriority"
    w2 = borrowed_world(on, on, runs=runs)
    w2.specs["team-a/x"] = task(9, 1)
    w2.specs["team-b/y"] = task(9, 1)
    assert victims(w2.step()) == ["team-a/a0", "team-b/b0"]
    w3 = borrowed_world("withinQueue: Never", on, runs=runs)
    w3.specs["team-a/x"] = task(9, 1)
    w3.specs["team-b/y"] = task(9, 1)
    assert victims(w3.step()) == ["team-b/b0"]


def test_grace_per_queue_reaches_ray() -> None:
    w = Cluster(
        {"team-a/x": task(0, 1), "team-b/y": task(0, 1), "loose": task(0, 1)},
        capacity=Capacity(8, 0, 64 * GIB),
        queues=parse_queue_config(
            config("withinQueue: LowerPriority, gracePeriodSeconds: 7", "gracePeriodSeconds: 90")
        ),
    )
    envs = {s.task: s.request.runtime_env for s in w.step().submits}
    run = {RUN_ENV: "1"}  # every run is told its number
    assert envs["team-a/x"] == {"env_vars": {**run, STOP_WAIT_ENV: "7"}}
    assert envs["team-b/y"] == {"env_vars": run}  # nothing can preempt team-b: Ray's default
    assert envs["loose"] == {"env_vars": run}
    w.queues = parse_queue_config(config("reclaimWithinCohort: Any", "gracePeriodSeconds: 90"))
    w.specs["team-b/z"] = task(0, 1)
    w.specs["loose2"] = task(0, 1)
    envs = {s.task: s.request.runtime_env for s in w.step().submits}
    assert envs["team-b/z"] == {"env_vars": {**run, STOP_WAIT_ENV: "90"}}  # team-a may reclaim
    assert envs["loose2"] == {"env_vars": {**run, STOP_WAIT_ENV: "30"}}  # the flag's default


def test_reclaim_victim_runs_again_and_its_count_stays() -> None:
    w = borrowed_world()
    w.specs["team-a/x"] = task(0, 4)
    w.step()
    w.finish_stops()
    w.step()
    w.run_all()
    w.ray("team-a/x", SUCCEEDED)
    p = w.step()
    assert sorted(started(p)) == [f"team-b/b{i}" for i in range(4)]
    body = w.status("team-b/b0")
    assert body.run == 2 and body.preemptions == 1 and body.preempted_by is None
    assert body.conditions == []


# -- the property, over several queues -------------------------------------------------------

QUEUES = ("team-a/", "team-b/", "")  # the last: the default queue (nominal 2 of 10 CPUs)
NOMINAL = {"team-a": 4.0, "team-b": 4.0, "default": 2.0}

# A burst of 1-4 tasks into one queue, so that queues borrow while others are idle.
arrive = st.tuples(
    st.just("arrive"), st.integers(0, 2), st.integers(0, 9), st.integers(1, 3), st.integers(1, 4)
)
step = st.one_of(
    arrive,
    arrive,  # twice as likely as the rest, so the cluster is contended
    st.tuples(st.just("pass"), st.integers(0, 120)),
    st.tuples(st.just("finish"), st.integers(0, 30)),
    st.tuples(st.just("stopped")),
)


def _queue_of(name: str) -> str:
    return name.split("/", 1)[0] if "/" in name else "default"


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(["LowerPriority", "Any"]),
    st.sampled_from(["Never", "LowerPriority"]),
    st.one_of(st.just(0), st.integers(1, 9)),  # half without a threshold, half with one
    st.lists(step, min_size=10, max_size=45),
)
def test_preemption_across_queues_is_downward_reclaims_borrowers_and_is_minimal(
    reclaim: str, within: str, min_preemptor: int, steps: list[tuple[object, ...]]
) -> None:
    block = f"withinQueue: {within}, reclaimWithinCohort: {reclaim}"
    if min_preemptor:
        block += f", minPreemptorPriority: {min_preemptor}"
    w = Cluster(
        {},
        capacity=Capacity(10, 0, 64 * GIB),
        options=PlanOptions(policy="backfill"),
        queues=parse_queue_config(config(block, block, block)),
    )
    for index, action in enumerate(steps):
        if action[0] == "arrive":
            _, where, priority, cpus, count = action
            for k in range(int(str(count))):
                name = f"{QUEUES[int(str(where))]}t{index:02d}-{k}"
                w.specs[name] = task(max(int(str(priority)) - k % 2, 0), float(str(cpus)))
            # one pass per burst: idle queues get borrowed
            _check_pass(w, within, reclaim, min_preemptor)
        elif action[0] == "finish":
            running = sorted(n for n in w.statuses if w.phase(n) is Phase.RUNNING)
            if running:
                w.ray(running[int(str(action[1])) % len(running)], SUCCEEDED)
        elif action[0] == "stopped":
            w.finish_stops()
        else:
            w.now += timedelta(seconds=int(str(action[1])))
            _check_pass(w, within, reclaim, min_preemptor)


def _check_pass(w: Cluster, within: str, reclaim: str, min_preemptor: int) -> None:
    priority = {n: t.spec.priority for n, t in w.specs.items() if t is not None}
    cpus = {n: t.spec.resources.cpu for n, t in w.specs.items() if t is not None}
    live = {str(w.jobs[s].metadata["rayqueue.task"]) for s in w.stopping}
    waiting_for_victims = {w.status(n).preempted_by for n in live} - {None}
    p = w.step()
    # What each queue held when the preemptors chose: this pass's active runs plus the
    # runs it just preempted (stopping victims of earlier passes are left out).
    usage = dict.fromkeys(NOMINAL, 0.0)
    all_victims = [v for d in p.preemptions for v in d.victims]
    for name, status in w.statuses.items():
        if status.status.phase.active or name in all_victims:
            usage[_queue_of(name)] += cpus[name]
    start = dict(usage)
    # A preemptor still waiting for its victims has its room promised in its queue.
    for name in waiting_for_victims:
        if name is not None and w.phase(name) is Phase.QUEUED:
            start[_queue_of(name)] += cpus[name]

    def key(name: str) -> tuple[int, float, str]:
        return (-priority[name], (w.status(name).queued_at or T0).timestamp(), name)

    def handed(me: str) -> float:
        """What preemptors of its queue that it overtakes had been promised: now its own."""
        return sum(
            cpus[n]
            for n in waiting_for_victims
            if n is not None
            and w.phase(n) is Phase.QUEUED
            and _queue_of(n) == _queue_of(me)
            and key(n) > key(me)
        )

    # What earlier decisions of this pass took from each queue: the ledger has already lowered
    # that queue's usage when a later preemptor of it decides (a queue reclaimed from, then
    # reclaiming within its nominal, is not over it).
    taken = dict.fromkeys(NOMINAL, 0.0)
    for decision in p.preemptions:
        me, need = decision.preemptor, cpus[decision.preemptor]
        assert priority[me] >= min_preemptor, "a preemptor below the threshold"
        mine = _queue_of(me)
        freed = sum(cpus[v] for v in decision.victims)
        assert need <= decision.free.cpu + freed + 1e-9
        freed_own = sum(cpus[v] for v in decision.victims if _queue_of(v) == mine)
        for victim, reason in zip(decision.victims, decision.reasons, strict=True):
            theirs = _queue_of(victim)
            if reason is Reason.WITHIN_QUEUE:
                assert theirs == mine and within == "LowerPriority"
                assert priority[victim] < priority[me], "within a queue: only downward"
                # needed for the cluster, or for the quota
                assert need > decision.free.cpu + freed - cpus[victim] + 1e-9 or (
                    start[mine] - freed_own + cpus[victim] + need > NOMINAL[mine] + 1e-9
                ), "more than needed"
            else:
                assert reason is Reason.RECLAIM and theirs != mine
                if reclaim == "LowerPriority":
                    assert priority[victim] < priority[me]
                assert usage[theirs] > NOMINAL[theirs] + 1e-9, "reclaimed from a lender"
                # the reclaimer stays within its nominal quota, counting its own victims
                # and the room promised to preemptors of its queue it overtakes:
                # no reclaim back
                held = start[mine] - taken[mine] - freed_own - handed(me)
                assert held + need <= NOMINAL[mine] + 1e-9
                assert need > decision.free.cpu + freed - cpus[victim] + 1e-9, "more than needed"
            usage[theirs] -= cpus[victim]
        for victim in decision.victims:
            taken[_queue_of(victim)] += cpus[victim]
    w.run_all()
