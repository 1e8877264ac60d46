"""Table-driven planner tests of retries (spec.retry) and dependencies (spec.dependsOn)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from reconciler.core.planner import PlanOptions
from specs.cluster import FAILED, RUNNING, STOPPED, SUCCEEDED, Capacity
from specs.task.models import Phase, Reason
from specs.task.records import Task
from tests.support.planner_world import GIB, PlanWorld, task
from tests.unit.core.test_planner import started


def end(w: PlanWorld, name: str, status: str, code: int | None = None) -> None:
    """The task's current job ends in Ray, with the driver's exit code."""
    w.ray(name, status)
    sid = w.status(name).submission_id
    w.jobs[sid] = replace(w.jobs[sid], exit_code=code)


def run_to_end(w: PlanWorld, name: str, status: str = FAILED, code: int | None = 1) -> None:
    """Step until `name` has a job, let it run and end; one more pass records the end."""
    for _ in range(200):
        if name in w.statuses and w.phase(name) in (Phase.STARTING, Phase.RUNNING):
            break
        w.step()
    w.ray(name, RUNNING)
    w.step()
    end(w, name, status, code)
    w.step(0)


def retrying(limit: int = 3, **retry: Any) -> Task:
    return task(retry={"limit": limit, **retry})


# -- retries ----------------------------------------------------------------------------------


def test_backoff_schedule_10_20_40_then_backoff_limit_exceeded() -> None:
    w = PlanWorld({"a": retrying(3)})
    delays = []
    for _ in range(3):
        run_to_end(w, "a")
        body = w.status("a")
        assert (body.phase, body.reason) == (Phase.QUEUED, Reason.RETRY_BACKOFF)
        assert body.exit_code == 1 and body.queue_position is None
        delays.append((body.next_retry_at - w.now).total_seconds())
        # Not a second early: one pass just before the time, nothing is submitted.
        w.now = body.next_retry_at - timedelta(seconds=0.5)
        assert started(w.step(0)) == []
    assert delays == [10, 20, 40]
    run_to_end(w, "a")
    body = w.status("a")
    assert (body.phase, body.reason, body.run, body.retries) == (
        Phase.FAILED, Reason.BACKOFF_LIMIT_EXCEEDED, 4, 3)  # fmt: skip
    assert "4 runs" in body.message and "exit code 1" in body.message
    assert len(w.submitted) == 4 and len(set(w.submitted)) == 4
    assert w.submitted[1].endswith("-2") and w.submitted[3].endswith("-4")


def test_a_retry_keeps_its_place_by_the_original_queued_at() -> None:
    w = PlanWorld({"a": retrying(1, backoffSeconds=5), "hog": task(cpu=4)},
              capacity=Capacity(4, 0, 16 * GIB))  # fmt: skip
    w.step()
    first_queued = w.status("a").queued_at
    run_to_end(w, "a")
    assert w.status("a").queued_at == first_queued
    w.specs["late"] = task(cpu=4)  # dropped in after a, same priority
    w.now += timedelta(seconds=10)
    for _ in range(5):
        w.step()
    assert w.status("a").queued_at == first_queued


@pytest.mark.parametrize(
    ("codes", "exit_code", "phase", "reason", "runs"),
    [
        ([2], 2, Phase.FAILED, Reason.NON_RETRYABLE_EXIT_CODE, 1),
        ([2], 3, Phase.QUEUED, Reason.RETRY_BACKOFF, 1),
        ([2, 137], 137, Phase.FAILED, Reason.NON_RETRYABLE_EXIT_CODE, 1),
        ([2], None, Phase.QUEUED, Reason.RETRY_BACKOFF, 1),  # Ray could not start the driver
    ],
)
def test_non_retryable_exit_codes(
    codes: list[int], exit_code: int | None, phase: Phase, reason: Reason, runs: int
) -> None:
    w = PlanWorld({"a": retrying(3, nonRetryableExitCodes=codes)})
    run_to_end(w, "a", FAILED, exit_code)
    body = w.status("a")
    assert (body.phase, body.reason, body.run, body.exit_code) == (phase, reason, runs, exit_code)


def test_limit_0_is_no_retry_and_the_failure_stands() -> None:
    w = PlanWorld({"a": retrying(0), "b": task()})
    run_to_end(w, "a", FAILED, 1)
    run_to_end(w, "b", SUCCEEDED, 0)
    assert (w.phase("a"), w.status("a").reason, w.status("a").exit_code) == (
        Phase.FAILED, Reason.JOB_FAILED, 1)  # fmt: skip
    assert (w.phase("b"), w.status("b").exit_code) == (Phase.SUCCEEDED, 0)
    for _ in range(3):
        w.step(60)
    assert len(w.submitted) == 2


def test_timed_out_is_retried_only_when_on_says_so() -> None:
    w = PlanWorld({
        "t": task(timeoutSeconds=5, retry={"limit": 1, "on": ["TimedOut"]}),
        "f": task(timeoutSeconds=5, retry={"limit": 1, "on": ["Failed"]}),
    })  # fmt: skip
    w.step()
    for name in ("t", "f"):
        w.ray(name, RUNNING)
    w.step()
    w.now += timedelta(seconds=10)
    w.step()
    assert (w.phase("t"), w.status("t").reason) == (Phase.QUEUED, Reason.RETRY_BACKOFF)
    assert (w.phase("f"), w.status("f").reason) == (Phase.TIMED_OUT, Reason.TIMEOUT_EXCEEDED)


def test_what_counts_against_the_limit() -> None:
    w = PlanWorld({"a": retrying(2, backoffSeconds=1)})
    run_to_end(w, "a")
    assert w.status("a").retries == 1
    # A stop the user asked for (suspend, then resume) is a fresh start: nothing counted.
    w.specs["a"] = task(retry={"limit": 2, "backoffSeconds": 1}, suspend=True)
    w.step()
    assert w.phase("a") is Phase.SUSPENDED
    w.specs["a"] = retrying(2, backoffSeconds=1)
    w.step()
    assert w.status("a").retries == 0
    # A spec change too.
    run_to_end(w, "a")
    assert w.status("a").retries == 1
    w.specs["a"] = task(entrypoint="python fixed.py", retry={"limit": 2, "backoffSeconds": 1})
    w.step()
    assert w.status("a").retries == 0
    # Stopped in Ray by someone else: not an accident, not retried.
    run_to_end(w, "a", STOPPED, None)
    assert (w.phase("a"), w.status("a").reason) == (Phase.STOPPED, Reason.STOPPED_IN_RAY)


@pytest.mark.parametrize(
    ("outage", "retries_after", "reason"),
    [(True, 0, Reason.JOB_MISSING_AFTER_OUTAGE), (False, 1, Reason.JOB_MISSING)],
)
def test_a_run_lost_in_an_outage_is_retried_for_free(
    outage: bool, retries_after: int, reason: Reason
) -> None:
    w = PlanWorld({"a": retrying(1, backoffSeconds=0)}, options=PlanOptions(lost_grace_seconds=30))
    w.step()
    w.ray("a", RUNNING)
    w.step()
    del w.jobs[w.status("a").submission_id]  # the head restarted
    if outage:
        w.available = False
        w.step()
        w.available = True
    w.step()
    assert w.status("a").reason == reason
    w.now += timedelta(seconds=31)
    p = w.step()
    assert w.status("a").retries == retries_after and started(p) == ["a"]


# -- dependencies -----------------------------------------------------------------------------


def dep_task(*deps: str | tuple[str, str], **spec: Any) -> Task:
    items = [{"name": d} if isinstance(d, str) else {"name": d[0], "condition": d[1]}
             for d in deps]  # fmt: skip
    return task(dependsOn=items, **spec)


@pytest.mark.parametrize(
    ("condition", "outcome", "runs"),
    [
        ("Succeeded", SUCCEEDED, True),
        ("Succeeded", FAILED, False),
        ("Failed", FAILED, True),
        ("Failed", SUCCEEDED, False),
        ("Finished", FAILED, True),
        ("Finished", SUCCEEDED, True),
    ],
)
def test_conditions_against_the_dependency(condition: str, outcome: str, runs: bool) -> None:
    w = PlanWorld({"prep": task(), "train": dep_task(("prep", condition))})
    w.step()
    assert w.status("train").reason == Reason.WAITING_FOR_DEPENDENCY
    assert w.status("train").message == "waits for prep (Queued)"  # as it was before admission
    run_to_end(w, "prep", outcome, 0 if outcome == SUCCEEDED else 1)
    w.step()
    if runs:
        assert w.phase("train") in (Phase.STARTING, Phase.RUNNING)
    else:
        body = w.status("train")
        assert (body.phase, body.reason) == (Phase.QUEUED, Reason.DEPENDENCY_FAILED)
        assert "rayqueue rerun prep" in body.message


def test_a_failed_dependency_rerun_then_succeeding_lets_the_dependent_go() -> None:
    w = PlanWorld({"prep": task(), "train": dep_task("prep")})
    run_to_end(w, "prep", FAILED, 1)
    w.step()
    assert w.status("train").reason == Reason.DEPENDENCY_FAILED
    w.specs["prep"] = task(annotations={"rayqueue/restartedAt": "1"})  # rayqueue rerun prep
    w.step()
    assert w.status("train").reason == Reason.WAITING_FOR_DEPENDENCY
    run_to_end(w, "prep", SUCCEEDED, 0)  # its last pass sees prep succeed, and starts train
    assert w.phase("train") is Phase.STARTING
    assert w.status("train").submitted_at >= w.status("prep").finished_at


def test_a_retrying_dependency_is_not_yet_failed() -> None:
    w = PlanWorld({"prep": retrying(1, backoffSeconds=5), "after": dep_task(("prep", "Failed"))})
    run_to_end(w, "prep", FAILED, 1)
    w.step()
    assert w.status("after").reason == Reason.WAITING_FOR_DEPENDENCY  # prep is retried
    w.now += timedelta(seconds=6)
    run_to_end(w, "prep", FAILED, 1)
    assert w.status("prep").reason == Reason.BACKOFF_LIMIT_EXCEEDED
    assert w.phase("after") is Phase.STARTING


def test_fifo_age_of_a_dependent_starts_when_its_last_dependency_is_met() -> None:
    # One CPU: one task at a time. `late` is dropped in after `train`, but before `prep` ends,
    # so it was waiting for resources longer than train was waiting for resources.
    w = PlanWorld({"prep": task(), "train": dep_task("prep")}, capacity=Capacity(1, 0, GIB))
    w.step()
    w.ray("prep", RUNNING)
    w.now += timedelta(seconds=5)
    w.step()
    w.specs["late"] = task()
    w.step()
    w.now += timedelta(seconds=5)
    end(w, "prep", SUCCEEDED, 0)
    w.step()
    assert w.status("train").queued_at == w.status("prep").finished_at
    assert w.phase("late") is Phase.STARTING and w.phase("train") is Phase.QUEUED
    assert w.status("train").queued_at > w.status("late").queued_at


def test_a_cycle_is_invalid_and_stays_put_until_fixed() -> None:
    w = PlanWorld({"a": dep_task("b"), "b": dep_task("c"), "c": dep_task("a"), "x": dep_task("a")})
    w.step()
    for name in "abc":
        body = w.status(name)
        assert (body.phase, body.reason) == (Phase.INVALID, Reason.DEPENDENCY_CYCLE)
        assert body.message == "dependency cycle: a -> b -> c -> a"
    assert w.status("x").reason == Reason.WAITING_FOR_DEPENDENCY
    before = dict(w.statuses)
    p = w.step()
    assert all(p.statuses[n] is before[n] for n in "abcx")  # nothing to write
    w.specs["c"] = task()  # the cycle is broken
    for _ in range(3):
        w.step()
    assert w.phase("c") is Phase.STARTING
    assert w.status("a").reason == Reason.WAITING_FOR_DEPENDENCY


def test_a_task_in_a_cycle_that_could_never_fit_stays_in_the_cycle() -> None:
    # The state machine has no edge from a cycle to Unschedulable: the cycle is told first.
    w = PlanWorld({"a": dep_task("b"), "b": dep_task("a", cpu=2)})
    w.step()
    assert (w.phase("b"), w.status("b").reason) == (Phase.INVALID, Reason.DEPENDENCY_CYCLE)
    before = w.statuses["b"]
    w.capacity = Capacity(1, 0, 16 * GIB)  # the cluster shrank below what b asks for
    assert w.step().statuses["b"] is before


def test_a_missing_dependency_waits_until_it_is_dropped_in() -> None:
    w = PlanWorld({"train": dep_task("team-a/prep")})
    w.step()
    body = w.status("train")
    assert (body.phase, body.reason) == (Phase.QUEUED, Reason.DEPENDENCY_MISSING)
    assert "team-a/prep" in body.message
    w.specs["team-a/prep"] = task()
    run_to_end(w, "team-a/prep", SUCCEEDED, 0)
    assert w.phase("train") is Phase.STARTING


def test_a_dependency_rerun_holds_waiting_dependents_but_never_stops_started_ones() -> None:
    w = PlanWorld({"prep": task(), "running": dep_task("prep"),
               "waiting": dep_task("prep", cpu=8)}, capacity=Capacity(8, 0, GIB))  # fmt: skip
    run_to_end(w, "prep", SUCCEEDED, 0)
    w.step()
    assert w.phase("running") is Phase.STARTING
    assert w.phase("waiting") is Phase.QUEUED  # met, but no room yet
    assert w.status("waiting").reason != Reason.WAITING_FOR_DEPENDENCY
    w.specs["prep"] = task(entrypoint="python prep_v2.py")  # a new run of prep
    p = w.step()
    assert w.phase("running") in (Phase.STARTING, Phase.RUNNING) and p.stops == []
    assert w.status("waiting").reason == Reason.WAITING_FOR_DEPENDENCY


def test_cycles_are_invalid_and_the_other_dependents_are_judged_in_the_same_pass() -> None:
    w = PlanWorld({
        "a": dep_task("b"), "b": dep_task("a"), "c": dep_task("a"),
        "d": dep_task(("e", "Finished")), "e": task(),
    })  # fmt: skip
    w.step()
    for name in "ab":
        body = w.status(name)
        assert (body.phase, body.reason) == (Phase.INVALID, Reason.DEPENDENCY_CYCLE)
        assert body.message == "dependency cycle: a -> b -> a"
    assert w.status("c").reason == Reason.WAITING_FOR_DEPENDENCY
    assert "a (Invalid)" in w.status("c").message
    assert w.status("d").reason == Reason.WAITING_FOR_DEPENDENCY
    assert w.phase("e") is Phase.STARTING  # no dependencies: never held
    run_to_end(w, "e", FAILED, 1)  # Finished is met by a failure too
    assert w.phase("d") in (Phase.STARTING, Phase.RUNNING)
    assert w.status("d").queued_at == w.status("e").finished_at  # met when e ended
