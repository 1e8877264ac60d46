"""Table-driven tests of the pure planner, with a fake clock and fake observations."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from reconciler.core.planner import (
    Plan,
    PlanOptions,
    TimeOut,
    plan,
)
from specs.cluster import (
    FAILED,
    META_QUEUE,
    META_TASK,
    RUNNING,
    STOPPED,
    SUCCEEDED,
    Capacity,
    RayJob,
)
from specs.task.models import ConditionType, Phase, Reason
from tests.support.planner_world import GIB, PlanWorld, task


def started(p: Plan) -> list[str]:
    return [s.task for s in p.submits]


# -- order, fit, blocking ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tasks", "capacity", "policy", "expected"),
    [
        # priority high to low
        ({"low": (1, 1), "high": (9, 1), "mid": (5, 1)}, 2, "strict", ["high", "mid"]),
        # all fit
        ({"a": (0, 1), "b": (0, 1)}, 4, "strict", ["a", "b"]),
        # strict: the head that does not fit blocks smaller tasks behind it
        ({"big": (9, 3), "run": (9, 2), "small": (1, 1)}, 4, "strict", ["big"]),
        # a head bigger than the whole cluster is Unschedulable and blocks nobody
        ({"big": (9, 8), "small": (1, 1), "first": (9, 2)}, 4, "strict", ["first", "small"]),
        # besteffort lets later tasks that fit overtake the blocked one
        ({"big": (9, 3), "first": (9, 2), "small": (1, 1)}, 4, "besteffort", ["big", "small"]),
        # equal priority and equal arrival: name breaks the tie
        ({"b": (3, 3), "a": (3, 3)}, 4, "strict", ["a"]),
    ],
)
def test_admission_order_and_fit(
    tasks: dict[str, tuple[int, float]], capacity: float, policy: str, expected: list[str]
) -> None:
    w = PlanWorld(
        {n: task(p, c) for n, (p, c) in tasks.items()},
        capacity=Capacity(capacity, 0, 64 * GIB),
        options=PlanOptions(policy=policy),
    )
    p = w.step()
    assert started(p) == expected


def test_strict_head_blocks_and_reports_position() -> None:
    w = PlanWorld(
        {"head": task(9, 3), "a": task(5, 1), "b": task(1, 1)},
        options=PlanOptions(policy="strict"),
    )
    w.specs["running"] = task(9, 2)
    w.specs.pop("head")
    w.step()  # running takes 2 CPUs
    w.specs["head"] = task(9, 3)
    p = w.step()
    assert started(p) == []
    assert w.phase("head") is Phase.QUEUED
    assert w.status("head").reason == "WaitingForResources"
    assert "needs 3 CPU" in w.status("head").message
    # a and b were admitted in pass one already (they fit); position counts only waiting tasks
    assert w.status("head").queue_position == 1


def test_fifo_within_priority_uses_first_seen_time() -> None:
    w = PlanWorld({"z-first": task(5, 4)})
    w.step()
    w.specs["a-later"] = task(5, 4)
    w.step()
    w.ray("z-first", SUCCEEDED)
    p = w.step()
    assert started(p) == ["a-later"]


def test_unschedulable_does_not_block_and_is_rechecked() -> None:
    w = PlanWorld({"huge": task(9, 64), "small": task(1, 1)})
    p = w.step()
    assert started(p) == ["small"]
    assert w.phase("huge") is Phase.UNSCHEDULABLE
    assert "64 CPU" in w.status("huge").message and "4" in w.status("huge").message
    w.capacity = Capacity(128, 0, 64 * GIB)
    p = w.step()
    assert started(p) == ["huge"]


def test_unschedulable_names_gpu_and_memory() -> None:
    w = PlanWorld(
        {"g": task(0, 1, resources={"gpu": 2}), "m": task(0, 1, resources={"memory": "1Ti"})}
    )
    w.step()
    assert "GPU" in w.status("g").message
    assert "memory" in w.status("m").message


def test_inflight_limit_caps_starting_jobs() -> None:
    w = PlanWorld({f"t{i}": task(0, 0.1) for i in range(5)}, options=PlanOptions(max_inflight=2))
    p = w.step()
    assert len(started(p)) == 2
    waiting = [n for n in w.specs if w.phase(n) is Phase.QUEUED]
    assert {w.status(n).reason for n in waiting} <= {"InflightLimit", "WaitingBehindHigherPriority"}
    p = w.step()
    assert started(p) == []  # still two Starting
    for name in started_names(w):
        w.ray(name, RUNNING)
    p = w.step()
    assert len(started(p)) == 2


def started_names(w: PlanWorld) -> list[str]:
    return [n for n in w.specs if w.phase(n) is Phase.STARTING]


# -- lifecycle ------------------------------------------------------------------------------


def test_run_to_success_and_never_again() -> None:
    w = PlanWorld({"a": task()})
    w.step()
    assert w.phase("a") is Phase.STARTING
    w.ray("a", RUNNING)
    w.step()
    assert w.phase("a") is Phase.RUNNING and w.status("a").started_at is not None
    w.ray("a", SUCCEEDED)
    w.step()
    assert w.phase("a") is Phase.SUCCEEDED
    for _ in range(3):
        assert w.step().submits == []
    assert len(w.submitted) == 1


def test_failed_job_asks_for_log_tail() -> None:
    w = PlanWorld({"a": task()})
    w.step()
    sid = w.status("a").submission_id
    w.ray("a", FAILED)
    p = w.step()
    assert w.phase("a") is Phase.FAILED
    assert sid and p.fetch_logs == {"a": sid}  # the failed run's id
    assert w.step().fetch_logs == {}


def test_timeout_stops_running_job() -> None:
    w = PlanWorld({"a": task(timeoutSeconds=10)})
    w.step()
    w.ray("a", RUNNING)
    w.step(seconds=5)  # observed running at t=1
    p = w.step(seconds=6)
    assert p.stops == [] and w.phase("a") is Phase.RUNNING
    p = w.step()
    assert [s.submission_id for s in p.stops] == [w.status("a").submission_id]
    assert w.phase("a") is Phase.TIMED_OUT
    w.step()
    assert w.phase("a") is Phase.TIMED_OUT and w.status("a").ray_status == STOPPED


def test_stop_is_repeated_until_ray_reports_terminal() -> None:
    w = PlanWorld({"a": task(timeoutSeconds=1)})
    w.step()
    w.ray("a", RUNNING)
    w.step(seconds=5)
    sid = w.status("a").submission_id
    p = plan(w.inputs(), w.statuses, w.observe(), w.now, w.options)  # not applied
    assert [s.submission_id for s in p.stops] == [sid]
    w.statuses.update(p.statuses)  # status written, then a crash before stop_job
    p = plan(w.inputs(), w.statuses, w.observe(), w.now, w.options)
    assert [s.submission_id for s in p.stops] == [sid]


def test_deleting_spec_stops_job_then_removes_sidecar() -> None:
    w = PlanWorld({"a": task()})
    w.step()
    w.ray("a", RUNNING)
    w.step()
    w.specs.pop("a")
    sid = w.status("a").submission_id
    p = w.step()
    assert [s.submission_id for s in p.stops] == [sid]
    assert p.delete_statuses == []  # keep the id until Ray confirms the end
    p = w.step()
    assert p.delete_statuses == ["a"] and "a" not in w.statuses


def test_suspend_running_then_resume_is_a_new_run() -> None:
    w = PlanWorld({"a": task()})
    w.step()
    w.ray("a", RUNNING)
    w.step()
    first = w.status("a").submission_id
    w.specs["a"] = task(suspend=True)
    p = w.step()
    assert w.phase("a") is Phase.SUSPENDED
    assert [s.submission_id for s in p.stops] == [first]
    w.specs["a"] = task()
    p = w.step()
    assert started(p) == ["a"] and w.status("a").submission_id != first


def test_suspended_while_queued_never_runs() -> None:
    w = PlanWorld({"a": task(suspend=True)})
    for _ in range(3):
        assert w.step().submits == []
    assert w.phase("a") is Phase.SUSPENDED


@pytest.mark.parametrize("phase", ["Queued", "Starting", "Running", "Succeeded", "Failed"])
def test_run_defining_change_in_each_phase(phase: str) -> None:
    w = PlanWorld({"blocker": task(9, 4), "a": task(0, 1)})
    if phase == "Queued":
        w.step()
        assert w.phase("a") is Phase.QUEUED
        w.specs["a"] = task(0, 1, entrypoint="python other.py")
        p = w.step()
        assert w.phase("a") is Phase.QUEUED and p.stops == []
        assert w.submitted == [w.status("blocker").submission_id]
        return
    w.specs.pop("blocker")
    w.step()
    if phase != "Starting":
        w.ray("a", {"Running": RUNNING, "Succeeded": SUCCEEDED, "Failed": FAILED}[phase])
        w.step()
    assert w.phase("a").value == phase
    old = w.status("a").submission_id
    w.specs["a"] = task(0, 1, entrypoint="python fixed.py")
    p = w.step()
    if phase in ("Starting", "Running"):
        assert old in [s.submission_id for s in p.stops]
    # the new run needs the CPU the old job holds in strict accounting only while it is live
    w.step()
    assert w.status("a").submission_id not in (None, old)
    assert w.jobs[w.status("a").submission_id].entrypoint == "python fixed.py"


def test_priority_and_timeout_apply_in_place() -> None:
    w = PlanWorld({"a": task(1)})
    w.step()
    w.ray("a", RUNNING)
    w.step()
    sid = w.status("a").submission_id
    w.specs["a"] = task(9, timeoutSeconds=3600)
    p = w.step()
    assert p.stops == [] and p.submits == [] and w.status("a").submission_id == sid


def test_restarted_at_annotation_reruns_finished_task() -> None:
    w = PlanWorld({"a": task()})
    w.step()
    w.ray("a", SUCCEEDED)
    w.step()
    w.specs["a"] = task(annotations={"rayqueue/restartedAt": "2026-01-02T00:00:00Z"})
    assert started(w.step()) == ["a"]
    assert len(w.submitted) == 2


# -- crash safety and ids -------------------------------------------------------------------


def test_crash_between_status_write_and_submit_resubmits_same_id() -> None:
    w = PlanWorld({"a": task()})
    p = plan(w.inputs(), {}, w.observe(), w.now, w.options)
    w.statuses.update(p.statuses)  # status written ... crash before submit_job
    sid = w.status("a").submission_id
    p = w.step()
    assert [s.request.submission_id for s in p.submits] == [sid]
    w.step()
    assert w.submitted == [sid]  # exactly once


def test_crash_after_submit_adopts_without_second_submission() -> None:
    w = PlanWorld({"a": task()})
    w.step()  # status written and submitted
    for _ in range(3):
        assert w.step().submits == []
    assert len(w.submitted) == 1


def test_lost_sidecar_adopts_live_job() -> None:
    w = PlanWorld({"a": task()})
    w.step()
    w.ray("a", RUNNING)
    sid = w.status("a").submission_id
    w.statuses.clear()
    p = w.step()
    assert p.submits == [] and w.status("a").submission_id == sid
    assert w.phase("a") is Phase.RUNNING


def test_ids_unique_across_runs_and_recreation() -> None:
    w = PlanWorld({"a": task()})
    w.step()
    w.ray("a", SUCCEEDED)
    w.step()
    w.specs["a"] = task(entrypoint="python v2.py")
    w.step()
    w.ray("a", SUCCEEDED)
    w.step()
    w.specs.pop("a")
    w.step()
    w.specs["a"] = task(entrypoint="python v2.py")
    w.step()
    assert len(w.submitted) == 3 and len(set(w.submitted)) == 3


def test_explicit_submission_id_is_first_run_id() -> None:
    w = PlanWorld({"a": task(submissionId="mlumina-a-1234")})
    w.step()
    assert w.submitted == ["mlumina-a-1234"]
    w.ray("a", SUCCEEDED)
    w.step()
    w.specs["a"] = task(submissionId="mlumina-a-1234", entrypoint="python v2.py")
    w.step()
    assert w.submitted == ["mlumina-a-1234", "mlumina-a-1234-2"]


def test_foreign_jobs_are_never_stopped_or_adopted() -> None:
    w = PlanWorld({"a": task()})
    w.jobs["foreign"] = RayJob("foreign", RUNNING, metadata={})
    w.jobs["other-queue"] = RayJob(
        "other-queue", RUNNING, metadata={META_QUEUE: "elsewhere", META_TASK: "a"}
    )
    for _ in range(3):
        p = w.step()
        assert all(s.submission_id not in ("foreign", "other-queue") for s in p.stops)
    assert w.status("a").submission_id not in ("foreign", "other-queue")


def test_plan_is_pure() -> None:
    w = PlanWorld({"a": task(9), "b": task(1, 3), "c": task(5, resources={"gpu": 1})})
    w.step()
    args = (w.inputs(), dict(w.statuses), w.observe(), w.now, w.options)
    assert plan(*args) == plan(*args)


# -- failures of the world -------------------------------------------------------------------


def test_ray_unavailable_changes_nothing_and_says_so() -> None:
    w = PlanWorld({"a": task(), "b": task()})
    w.step()
    w.ray("a", RUNNING)
    w.step()
    before = {n: w.phase(n) for n in w.specs}
    w.available = False
    w.specs.pop("b")
    w.specs["c"] = task()
    p = w.step()
    assert p.submits == [] and p.stops == [] and p.delete_statuses == []
    assert {n: w.phase(n) for n in ("a",)} == {"a": before["a"]}
    conds = [c.type for c in w.status("a").conditions]
    assert conds == [ConditionType.CLUSTER_UNAVAILABLE]
    w.available = True
    w.step()
    assert w.status("a").conditions == []


def test_invalid_spec_is_invalid_and_does_not_affect_others() -> None:
    w = PlanWorld(
        {"bad": None, "good": task()}, errors={"bad": "bad.yaml:3:5: spec.priorty: unknown"}
    )
    p = w.step()
    assert w.phase("bad") is Phase.INVALID and "priorty" in w.status("bad").message
    assert started(p) == ["good"]


def test_spec_turning_invalid_keeps_running_job() -> None:
    w = PlanWorld({"a": task(timeoutSeconds=100)})
    w.step()
    w.ray("a", RUNNING)
    w.step()
    w.specs["a"] = None
    w.errors["a"] = "a.yaml:1:1: truncated"
    for _ in range(3):
        p = w.step()
        assert p.stops == [] and p.submits == []
    assert w.phase("a") is Phase.RUNNING
    assert [c.type for c in w.status("a").conditions] == [ConditionType.SPEC_INVALID]
    w.now += timedelta(seconds=200)  # the last valid spec's timeout still applies
    p = w.step()
    assert w.phase("a") is Phase.TIMED_OUT and len(p.stops) == 1


def test_invalid_then_fixed_to_same_spec_keeps_outcome() -> None:
    w = PlanWorld({"a": task()})
    w.step()
    w.ray("a", SUCCEEDED)
    w.step()
    w.specs["a"] = None
    w.errors["a"] = "broken"
    w.step()
    assert w.phase("a") is Phase.INVALID
    w.specs["a"] = task()
    w.errors.clear()
    assert w.step().submits == []
    assert w.phase("a") is Phase.SUCCEEDED


def test_mass_deletion_is_held() -> None:
    w = PlanWorld(
        {f"t{i}": task(0, 0.1) for i in range(12)}, options=PlanOptions(max_stops_per_pass=10)
    )
    w.step()
    w.specs.clear()
    p = w.step()
    assert p.stops == [] and p.refused_deletions is not None and p.refused_deletions.count == 12
    assert p.delete_statuses == []
    w.options = PlanOptions(max_stops_per_pass=10, allow_mass_delete=True)
    p = w.step()
    assert len(p.stops) == 12


def test_vanished_job_becomes_lost_after_grace_and_requeues_once() -> None:
    w = PlanWorld({"a": task()}, options=PlanOptions(lost_grace_seconds=30))
    w.step()
    w.ray("a", RUNNING)
    w.step()
    first = w.status("a").submission_id
    del w.jobs[first]  # head restarted without fault tolerance
    w.step()
    assert w.phase("a") is Phase.RUNNING and w.status("a").reason == "JobMissing"
    w.now += timedelta(seconds=31)
    p = w.step()
    assert w.status("a").retries == 1  # maxLostRestarts (default 1): a counted retry
    assert started(p) == ["a"] and w.status("a").submission_id != first
    second = w.status("a").submission_id
    w.ray("a", RUNNING)
    w.step()
    del w.jobs[second]
    w.step()
    w.now += timedelta(seconds=31)
    w.step()
    assert w.phase("a") is Phase.LOST and w.status("a").reason == "JobLost"


def test_stuck_pending_job_hits_start_timeout() -> None:
    w = PlanWorld({"a": task()}, options=PlanOptions(start_timeout_seconds=60))
    w.step()
    w.step()
    w.now += timedelta(seconds=61)
    p = w.step()
    assert w.phase("a") is Phase.FAILED and w.status("a").reason == "StartTimeout"
    assert len(p.stops) == 1


def test_no_status_churn_when_nothing_changes() -> None:
    w = PlanWorld({"a": task(9, 4), "b": task()})
    w.step()
    w.ray("a", RUNNING)
    w.step()
    first = dict(w.statuses)
    w.step(seconds=30)
    assert w.step().statuses == first


def test_history_retention_deletes_only_recorded_old_jobs() -> None:
    w = PlanWorld({"a": task(), "b": task()}, options=PlanOptions(ray_history_retention_seconds=60))
    w.step()
    w.ray("a", SUCCEEDED)
    w.ray("b", RUNNING)
    w.step()
    assert w.phase("a") is Phase.SUCCEEDED
    w.jobs["foreign"] = RayJob("foreign", SUCCEEDED, end_time=0.0, metadata={})
    assert w.step().deletes == []  # too recent
    w.now += timedelta(seconds=120)
    p = w.step()
    assert p.deletes == [w.status("a").submission_id]  # not b (live), not the foreign job


def test_history_retention_waits_for_the_sidecar() -> None:
    w = PlanWorld({"a": task()}, options=PlanOptions(ray_history_retention_seconds=0))
    w.step()
    w.ray("a", SUCCEEDED)
    w.now += timedelta(seconds=5)
    # The sidecar on disk still says Starting: the outcome is not recorded yet.
    p = plan(w.inputs(), w.statuses, w.observe(), w.now, w.options)
    assert p.deletes == []
    w.statuses.update(p.statuses)
    p = plan(w.inputs(), w.statuses, w.observe(), w.now, w.options)
    assert p.deletes == [w.status("a").submission_id]


# -- typed output -----------------------------------------------------------------------------


def test_events_are_typed_and_refusals_are_warnings() -> None:
    w = PlanWorld(
        {f"t{i}": task(0, 0.1) for i in range(12)}, options=PlanOptions(max_stops_per_pass=10)
    )
    p = w.step()
    assert [e.reason for e in p.events] == [Reason.SUBMITTED] * 12
    assert all(e.level == logging.INFO for e in p.events)
    w.specs.clear()
    p = w.step()
    held = p.refused_deletions
    assert held is not None and held.reason == Reason.TOO_MANY_DELETIONS
    assert [(e.level, e.reason, e.message) for e in p.events] == [
        (logging.WARNING, held.reason, held.message)
    ]


def test_timeouts_are_actions_of_the_plan() -> None:
    w = PlanWorld({"a": task(timeoutSeconds=10), "b": task()})
    w.step()
    w.ray("a", RUNNING)
    w.step()
    sid = w.status("a").submission_id
    w.now += timedelta(seconds=20)
    p = w.step()
    assert p.timeouts == [TimeOut("a", sid, Reason.TIMEOUT_EXCEEDED, w.status("a").message)]
    assert [s.submission_id for s in p.stops] == [sid]
    assert w.step().timeouts == []  # reported once, when it happens


def test_missing_job_timer_is_its_own_field() -> None:
    w = PlanWorld({"a": task()}, options=PlanOptions(lost_grace_seconds=30))
    w.step()
    w.ray("a", RUNNING)
    w.step()
    del w.jobs[w.status("a").submission_id]
    w.step()
    assert w.status("a").missing_since is not None and w.status("a").finished_at is None


def test_old_sidecar_with_missing_timer_in_finished_at_still_counts() -> None:
    w = PlanWorld({"a": task()}, options=PlanOptions(lost_grace_seconds=30))
    w.step()
    w.ray("a", RUNNING)
    w.step()
    del w.jobs[w.status("a").submission_id]
    # As written before missingSince existed: the timer in finishedAt, 31 s ago.
    old = w.status("a").model_copy(
        update={
            "reason": "JobMissing",
            "finished_at": w.now - timedelta(seconds=31),
            "missing_since": None,
        }
    )
    w.statuses["a"] = w.statuses["a"].model_copy(update={"status": old})
    p = w.step()
    assert w.status("a").retries == 1 and started(p) == ["a"]


def test_a_refused_transition_keeps_that_task_and_the_pass_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An illegal transition is a bug: it must not stop the pass for every other task. The
    task keeps its status, its job and its resources, and every pass logs an error."""
    from reconciler.core.task import lifecycle, reconcile

    w = PlanWorld({"a": task(5, 1), "b": task(5, 1), "c": task(0, 1)}, capacity=Capacity(2, 0, 0))
    w.step()
    w.ray("a", RUNNING)
    w.ray("b", RUNNING)
    w.step()
    assert {w.phase("a"), w.phase("b")} == {Phase.RUNNING}
    real = reconcile.observe_run

    def refuse_for_a(step, name, *args, **kwargs):  # type: ignore[no-untyped-def]
        if name == "a":
            state = lifecycle.state_of(w.statuses["a"].status)
            raise lifecycle.IllegalTransition(state, lifecycle.Trigger.RAY_SUCCEEDED)
        return real(step, name, *args, **kwargs)

    monkeypatch.setattr(reconcile, "observe_run", refuse_for_a)
    before = w.statuses["a"]
    w.ray("b", SUCCEEDED)
    p = plan(w.inputs(), dict(w.statuses), w.observe(), w.now, w.options)  # not w.step(): it
    # asserts that no pass refuses a transition
    assert p.statuses["a"] is before  # untouched
    assert p.statuses["b"].status.phase is Phase.SUCCEEDED  # the others are planned as ever
    assert [s.task for s in p.submits] == ["c"]  # b's CPU went to c; a keeps its own
    assert not p.stops
    errors = [e for e in p.events if e.reason is Reason.ILLEGAL_TRANSITION]
    assert len(errors) == 1 and errors[0].level == logging.ERROR and "a:" in errors[0].message


def test_a_still_plan_ends_where_a_reserved_start_begins_to_move() -> None:
    """A reserved start is max(the claims' end, now): past that end it follows the clock, so a
    plan that changes nothing may promise so only up to the end (a hypothesis history found the
    plan claiming 10 s where the estimate moved after 5)."""
    w = PlanWorld(
        {"a": task(5, 2, timeoutSeconds=5), "b": task(1, 2)},
        capacity=Capacity(3, 0, 16 * GIB),
        options=PlanOptions(policy="backfill"),
    )
    for _ in range(3):
        p = w.step(0)
    assert p.still and "starts by 2026-01-01T00:00:05Z" in w.status("b").message
    t0 = w.now.timestamp()
    assert p.deadline == t0 + 5
    inputs, statuses, observed = w.inputs(), dict(w.statuses), w.observe()
    at_deadline = plan(inputs, statuses, observed, w.now + timedelta(seconds=5), w.options)
    assert at_deadline.statuses == statuses  # up to the deadline: the same plan
    later = plan(inputs, statuses, observed, w.now + timedelta(seconds=6), w.options)
    assert "starts by 2026-01-01T00:00:06Z" in later.statuses["b"].status.message
