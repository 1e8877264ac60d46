"""Preemption in the planner, table-driven, plus a hypothesis property over random passes.

The World here lets stopped jobs linger in Ray, as they do during the grace period between
SIGTERM and SIGKILL, until the test lets them go (`finish_stops`).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.core.planner import STOP_WAIT_ENV, request_of
from reconciler.core.task.jobs import RUN_ENV
from specs.cluster import RUNNING, SUCCEEDED, Capacity
from specs.settings.process import PlanOptions
from specs.task.models import ConditionType, Phase, Reason
from specs.task.records import Task
from tests.support.planner_world import GIB, Cluster, PlanWorld, task
from tests.unit.core.test_planner import started

ON = PlanOptions(policy="backfill", preemption="LowerPriority")


def filled(seconds_running: float = 600, **extra: Task) -> Cluster:
    """Four 1-CPU priority-0 sleepers fill the 4-CPU cluster, started a while ago."""
    w = Cluster({f"low{i}": task(0, 1) for i in range(4)}, options=ON)
    w.step()
    w.run_all()
    w.now += timedelta(seconds=seconds_running)
    w.specs.update(extra)
    return w


def test_urgent_task_preempts_the_minimal_set_and_records_it_first() -> None:
    w = filled(urgent=task(9, 2))
    p = w.step()
    assert len(p.preemptions) == 1
    decision = p.preemptions[0]
    assert decision.preemptor == "urgent" and decision.reason is Reason.WITHIN_QUEUE
    assert decision.victims == ("low0", "low1")  # equal age and priority: by name
    assert started(p) == []
    assert sorted(s.task or "" for s in p.stops) == ["low0", "low1"]
    for victim in decision.victims:
        body = w.status(victim)
        assert body.phase is Phase.QUEUED and body.reason == Reason.PREEMPTED
        assert body.preemptions == 1 and body.preempted_by == "urgent"
        assert body.queued_at == w.statuses["low2"].status.queued_at  # its old place
        assert body.run == 1 and body.submission_id is None  # a new run is next
        (cond,) = body.conditions
        assert (cond.type, cond.reason) == (ConditionType.PREEMPTED, Reason.WITHIN_QUEUE)
        assert "urgent" in cond.message
    assert w.status("urgent").reason == Reason.PREEMPTING
    assert w.phase("low2") is Phase.RUNNING and w.phase("low3") is Phase.RUNNING


def test_reservation_is_held_while_victims_stop_and_nobody_preempts_again() -> None:
    w = filled(urgent=task(9, 2))
    w.step()
    # While the victims stop, a small task arrives that would fit once they are gone, and
    # another low one: neither may take the room; the preemptor preempts no more.
    w.specs["small"] = task(5, 1)
    for _ in range(3):
        p = w.step()
        assert started(p) == [] and p.preemptions == []
        assert w.phase("low2") is Phase.RUNNING and w.phase("low3") is Phase.RUNNING
        assert w.status("urgent").reason == Reason.PREEMPTING
        assert w.status("low0").reason == Reason.PREEMPTED  # never two runs at once
    w.finish_stops()
    p = w.step()
    assert started(p) == ["urgent"]
    assert w.status("urgent").preempted_by is None


def test_reservation_keeps_only_what_the_victims_do_not_free() -> None:
    # 1 CPU free, urgent needs 2: one 1-CPU victim. The free CPU is urgent's, not small's.
    w = Cluster({f"low{i}": task(0, 1) for i in range(3)}, options=ON)
    w.step()
    w.run_all()
    w.now += timedelta(seconds=600)
    w.specs["urgent"] = task(9, 2)
    p = w.step()
    assert p.preemptions[0].victims == ("low0",)
    w.specs["small"] = task(5, 1)
    p = w.step()
    assert started(p) == []
    w.finish_stops()
    assert started(w.step()) == ["urgent"]


def test_victim_runs_again_as_run_two_and_succeeds() -> None:
    w = filled(urgent=task(9, 4))
    w.step()
    w.finish_stops()
    w.step()  # urgent starts
    w.run_all()
    w.ray("urgent", SUCCEEDED)
    p = w.step()
    assert sorted(started(p)) == ["low0", "low1", "low2", "low3"]
    body = w.status("low0")
    assert body.run == 2 and body.preempted_by is None and body.conditions == []
    assert body.preemptions == 1  # the count stays
    assert str(body.submission_id).endswith("-2")


def test_nothing_is_preempted_when_it_would_not_suffice() -> None:
    w = filled(urgent=task(9, 4))
    w.specs["low0"] = task(0, 1, preemptible=False)
    p = w.step()
    assert p.preemptions == [] and p.stops == []
    assert w.status("urgent").reason == Reason.WAITING_FOR_RESOURCES


def test_preemptible_false_and_min_runtime_are_respected() -> None:
    w = filled(seconds_running=30, urgent=task(9, 1))
    w.specs["low0"] = task(0, 1, preemptible=False)
    w.options = replace(ON, preemption_min_runtime_seconds=60)
    assert w.step().preemptions == []  # everyone else is younger than 60 s
    w.now += timedelta(seconds=60)
    assert w.step().preemptions[0].victims == ("low1",)


def test_no_ping_pong_between_equal_priorities() -> None:
    w = filled(urgent=task(0, 2))
    assert w.step().preemptions == []


def test_only_the_head_may_preempt() -> None:
    # `wide` (priority 9) heads the queue and could not fit even with every victim; `mid`
    # behind it could, but may not preempt: only the task the policy would start next does.
    w = filled(wide=task(9, 4), mid=task(5, 1))
    w.specs["low0"] = task(0, 1, preemptible=False)
    p = w.step()
    assert p.preemptions == []


@pytest.mark.parametrize(
    ("threshold", "priority", "preempts"),
    [
        (0, 5, True),  # the default: any higher priority
        (7, 6, False),
        (7, 7, True),  # at the threshold
        (7, 9, True),
        (9, 8, False),
        (9, 9, True),
        (1, 0, False),  # equal priorities never preempt anyway
    ],
)
def test_min_preemptor_priority_decides_who_may_preempt(
    threshold: int, priority: int, preempts: bool
) -> None:
    w = filled(urgent=task(priority, 2))
    w.options = replace(ON, preemption_min_preemptor_priority=threshold)
    p = w.step()
    if preempts:
        assert p.preemptions[0].victims == ("low0", "low1")
        assert w.status("urgent").reason == Reason.PREEMPTING
        return
    assert p.preemptions == [] and p.stops == []
    # It waits exactly as it would without preemption: same reason, same message.
    off = filled(urgent=task(priority, 2))
    off.options = PlanOptions(policy="backfill")
    off.step()
    below, plain = w.status("urgent"), off.status("urgent")
    assert below.reason == Reason.WAITING_FOR_RESOURCES
    assert (below.reason, below.message) == (plain.reason, plain.message)
    assert all(w.phase(f"low{i}") is Phase.RUNNING for i in range(4))


def test_a_head_below_the_threshold_blocks_nobody_into_preempting() -> None:
    # `mid` (priority 6, below 7) heads the queue and may not preempt; `top` is behind no one
    # once it arrives, and preempts as the new head.
    w = filled(mid=task(6, 2), low=task(5, 1))
    w.options = replace(ON, preemption_min_preemptor_priority=7)
    assert w.step().preemptions == []
    assert w.status("mid").reason == Reason.WAITING_FOR_RESOURCES
    w.specs["top"] = task(7, 1)
    p = w.step()
    assert [(d.preemptor, d.victims) for d in p.preemptions] == [("top", ("low0",))]


def test_never_is_the_default_and_changes_nothing() -> None:
    w = filled(urgent=task(9, 2))
    w.options = PlanOptions()
    assert w.options.preemption == "Never"
    p = w.step()
    assert p.preemptions == [] and p.stops == []


def test_grace_period_goes_to_ray_in_the_runtime_env() -> None:
    w = Cluster(
        {"a": task(0, 1, runtimeEnv={"env_vars": {"X": "1"}}), "b": task(0, 1)},
        options=replace(ON, preemption_grace_seconds=12.5),
    )
    p = w.step()
    envs = {s.task: s.request.runtime_env for s in p.submits}
    run = {RUN_ENV: "1"}  # every run is told its number
    assert envs["a"] == {"env_vars": {"X": "1", **run, STOP_WAIT_ENV: "13"}}  # whole seconds
    assert envs["b"] == {"env_vars": {**run, STOP_WAIT_ENV: "13"}}
    off = PlanWorld({"a": task(0, 1)}).step()
    assert off.submits[0].request.runtime_env == {"env_vars": run}  # preemption off: no grace


@pytest.mark.parametrize(
    ("asked", "sent"),
    [("999999999", "30"), (999999999, "30"), ("5", "5"), (0, "0"), ("30", "30"), ("soon", "30")],
)
def test_the_queue_grace_caps_the_one_a_spec_asks_for(asked: object, sent: str) -> None:
    # A team may shorten its grace, never stretch it past its queue's: the preemptor waits.
    w = Cluster(
        {"a": task(0, 1, runtimeEnv={"env_vars": {STOP_WAIT_ENV: asked, "X": "1"}})},
        options=replace(ON, preemption_grace_seconds=30),
    )
    (submit,) = w.step().submits
    assert submit.request.runtime_env == {"env_vars": {STOP_WAIT_ENV: sent, "X": "1", RUN_ENV: "1"}}


def test_restart_after_crash_between_stops_and_submit_preempts_no_more() -> None:
    # The planner is level-triggered: a restart is a pass over the same sidecars and Ray.
    w = filled(urgent=task(9, 2))
    first = w.step()
    # crash: the stops were never sent (the jobs still run); the sidecars say what was decided
    w.jobs.update({sid: replace(job, status=RUNNING) for sid, job in w.jobs.items()})
    w.stopping.clear()
    again = w.step()
    assert again.preemptions == []
    assert sorted(s.task or "" for s in again.stops) == list(first.preemptions[0].victims)
    w.finish_stops()
    assert started(w.step()) == ["urgent"]
    assert w.submitted.count(str(w.status("urgent").submission_id)) == 1


# -- the property -----------------------------------------------------------------------------

arrive = st.tuples(st.just("arrive"), st.integers(0, 9), st.integers(1, 5))
step = st.one_of(
    arrive,
    arrive,  # twice as likely as the rest, so the 6-CPU cluster is contended
    st.tuples(st.just("pass"), st.integers(0, 120)),
    st.tuples(st.just("finish"), st.integers(0, 20)),
    st.tuples(st.just("stopped")),
)


# Half the examples with no threshold (every higher priority may preempt), half with one.
threshold = st.one_of(st.just(0), st.integers(1, 9))


@settings(max_examples=100, deadline=None)
@given(threshold, st.lists(step, min_size=10, max_size=50))
def test_preemption_only_downward_and_never_more_than_needed(
    min_preemptor: int, steps: list[tuple[object, ...]]
) -> None:
    options = replace(ON, preemption_min_preemptor_priority=min_preemptor)
    w = Cluster({}, capacity=Capacity(6, 0, 64 * GIB), options=options)
    waiting_on: dict[str, set[str]] = {}  # preemptor -> its victims still stopping
    for index, action in enumerate(steps):
        if action[0] == "arrive":
            _, priority, cpus = action
            w.specs[f"t{index:02d}"] = task(int(str(priority)), float(str(cpus)))
            continue
        if action[0] == "finish":
            running = sorted(n for n in w.statuses if w.phase(n) is Phase.RUNNING)
            if running:
                w.ray(running[int(str(action[1])) % len(running)], SUCCEEDED)
            continue
        if action[0] == "stopped":
            w.finish_stops()
            continue
        w.now += timedelta(seconds=int(str(action[1])))
        priorities = {n: t.spec.priority for n, t in w.specs.items() if t is not None}
        p = w.step()
        w.run_all()
        still = {
            name
            for name in w.statuses
            if any(w.jobs[s].metadata.get("rayqueue.task") == name for s in w.stopping)
        }
        waiting_on = {by: victims & still for by, victims in waiting_on.items()}
        for decision in p.preemptions:
            victims = decision.victims
            assert not waiting_on.get(decision.preemptor), "preempted again while victims stop"
            assert priorities[decision.preemptor] >= min_preemptor, "below the threshold"
            for victim in victims:
                assert priorities[victim] < priorities[decision.preemptor]
            need = request_of(w.specs[decision.preemptor] or task())
            freed = sum((request_of(w.specs[v] or task()) for v in victims), Capacity())
            assert need.fits_in(decision.free + freed)
            for victim in victims:
                alone = request_of(w.specs[victim] or task())
                assert not need.fits_in(decision.free + freed - alone), "more than needed"
            # The free room the planner counted on is really free in Ray.
            held = sum(
                (
                    request_of(w.specs[str(j.metadata["rayqueue.task"])] or task())
                    for j in w.jobs.values()
                    if not j.terminal
                ),
                Capacity(),
            )
            assert decision.free.fits_in(w.capacity - held + freed) if w.capacity else True
            waiting_on[decision.preemptor] = set(victims)
