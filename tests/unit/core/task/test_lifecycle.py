"""The task state machine: every (state, trigger) pair is either a transition in the table, or
raises IllegalTransition."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from reconciler.core.task import lifecycle
from reconciler.core.task.lifecycle import TRANSITIONS, IllegalTransition, State, Trigger
from specs.cluster import FAILED, PENDING, RUNNING, STOPPED, SUCCEEDED, RayJob
from specs.task.models import Phase, Reason
from specs.task.status import TaskStatusBody

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NOW = T0 + timedelta(minutes=5)
SID = "rq-a-1234abcd-1"


def job(status: str) -> RayJob:
    end = NOW.timestamp() if status in (SUCCEEDED, FAILED, STOPPED) else None
    return RayJob(SID, status, "python job.py", start_time=T0.timestamp(), end_time=end)


Fire = Callable[[TaskStatusBody], TaskStatusBody]

# One way to fire each trigger, with plausible arguments.
FIRE: dict[Trigger, Fire] = {
    Trigger.INVALIDATE: lambda b: lifecycle.invalidate(b, "a.yaml:1:1: broken"),
    Trigger.SPEC_CHANGED: lambda b: lifecycle.restart(b, "new-hash", NOW),
    Trigger.SUSPEND: lambda b: lifecycle.suspend(b, "new-hash", NOW),
    Trigger.RESUME: lambda b: lifecycle.resume(b, "new-hash", NOW),
    Trigger.QUEUE: lambda b: lifecycle.queue(b, 3, Reason.WAITING_FOR_RESOURCES, "needs 1", None),
    Trigger.HOLD: lambda b: lifecycle.hold(b, Reason.WAITING_FOR_DEPENDENCY, "waits for prep"),
    Trigger.WAIT_FOR_VICTIMS: lambda b: lifecycle.wait_for_victims(b, 1, "preempted low", None),
    Trigger.UNSCHEDULABLE: lambda b: lifecycle.unschedulable(b, "asks for 64 CPU"),
    Trigger.ADMIT: lambda b: lifecycle.start_run(b, "1234abcd", "rq-a-1234abcd-2", NOW),
    Trigger.SUBMIT_REFUSED: lambda b: lifecycle.refuse_submit(b, "bad runtime_env", NOW),
    Trigger.RAY_PENDING: lambda b: lifecycle.observe_pending(b, job(PENDING)),
    Trigger.RAY_RUNNING: lambda b: lifecycle.observe_running(b, job(RUNNING), NOW),
    Trigger.RAY_SUCCEEDED: lambda b: lifecycle.end_run(b, job(SUCCEEDED)),
    Trigger.RAY_FAILED: lambda b: lifecycle.end_run(b, job(FAILED)),
    Trigger.RAY_STOPPED: lambda b: lifecycle.end_run(b, job(STOPPED)),
    Trigger.ID_CONFLICT: lambda b: lifecycle.conflict(b, NOW),
    Trigger.JOB_MISSING: lambda b: lifecycle.note_missing(b, 60, NOW),
    Trigger.JOB_MISSING_AFTER_OUTAGE: lambda b: lifecycle.note_missing(
        b, 60, NOW, after_outage=True
    ),
    Trigger.REQUEUE_LOST: lambda b: lifecycle.requeue(b, "old-hash", 1),
    Trigger.LOSE: lambda b: lifecycle.lose(b, NOW),
    Trigger.TIME_OUT: lambda b: lifecycle.time_out(b, 30, NOW),
    Trigger.START_TIMEOUT: lambda b: lifecycle.start_timed_out(b, 600, NOW),
    Trigger.RETRY: lambda b: lifecycle.retry(b, "old-hash", 1, NOW, "retry 1 of 3 in 10s"),
    Trigger.GIVE_UP: lambda b: lifecycle.give_up(b, Reason.BACKOFF_LIMIT_EXCEEDED, "3 runs", NOW),
    Trigger.DEPENDENCY_CYCLE: lambda b: lifecycle.dependency_cycle(b, "a -> b -> a"),
    Trigger.CYCLE_RESOLVED: lambda b: lifecycle.cycle_resolved(b),
    Trigger.PREEMPT: lambda b: lifecycle.preempt(b, "urgent", "preempted by urgent"),
}


# What tells a sub-state from its phase, as a status file shows it.
SUB_STATE: dict[State, dict[str, object]] = {
    State.PREEMPTING: {"reason": Reason.PREEMPTING},
    State.MISSING: {"reason": Reason.JOB_MISSING, "missing_since": T0},
    State.MISSING_AFTER_OUTAGE: {"reason": Reason.JOB_MISSING_AFTER_OUTAGE, "missing_since": T0},
    State.IN_CYCLE: {"reason": Reason.DEPENDENCY_CYCLE},
}


def body_in(where: Phase | State) -> TaskStatusBody:
    """A status as it could be found in `where` (a phase: its plain state), from a previous
    run."""
    state = State[where.name] if isinstance(where, Phase) else where
    phase = state.phase
    body = TaskStatusBody(
        phase=phase,
        reason="Whatever",
        message="before",
        queue_position=2 if phase is Phase.QUEUED else None,
        uid="1234abcd",
        run=1,
        submission_id=SID,
        spec_hash="old-hash",
        ray_status=RUNNING if phase.active else None,
        queued_at=T0,
        submitted_at=T0,
        started_at=T0 if phase is Phase.RUNNING else None,
        finished_at=T0 if phase.finished else None,
    )
    body = body.model_copy(update=SUB_STATE.get(state, {}))
    assert lifecycle.state_of(body) is state
    return body


def test_every_trigger_can_be_fired() -> None:
    assert set(FIRE) == set(Trigger)


@pytest.mark.parametrize("trigger", list(Trigger), ids=lambda t: t.name)
@pytest.mark.parametrize("state", list(State), ids=lambda s: s.name)
def test_every_pair_is_a_transition_or_raises(state: State, trigger: Trigger) -> None:
    before = body_in(state)
    target = TRANSITIONS.get((state, trigger))
    if target is None:
        with pytest.raises(IllegalTransition):
            FIRE[trigger](before)
    else:
        after = FIRE[trigger](before)
        assert after.phase is target
        assert after is not before  # every transition writes its reason at least
        assert after.reason != "Whatever" and isinstance(after.reason, Reason)


def test_every_state_has_its_phase() -> None:
    assert {state.phase for state in State} == set(Phase)


def test_an_unchanged_transition_keeps_the_same_object() -> None:
    once = lifecycle.observe_running(body_in(Phase.STARTING), job(RUNNING), NOW)
    assert lifecycle.observe_running(once, job(RUNNING), NOW + timedelta(seconds=1)) is once


@pytest.mark.parametrize("phase", [Phase.QUEUED, Phase.UNSCHEDULABLE, Phase.RUNNING])
def test_suspend_is_written_one_way(phase: Phase) -> None:
    body = body_in(phase).model_copy(update={"estimated_start_at": NOW})
    suspended = lifecycle.suspend(body, "h", NOW)
    assert suspended.phase is Phase.SUSPENDED and suspended.reason == Reason.SUSPENDED
    assert suspended.queue_position is None and suspended.estimated_start_at is None
    # Only a run that was active ends now.
    assert suspended.finished_at == (NOW if phase.active else body.finished_at)


def test_missing_job_timer_has_its_own_field_and_ends_with_the_state() -> None:
    running = lifecycle.observe_running(body_in(Phase.STARTING), job(RUNNING), T0)
    missing = lifecycle.note_missing(running, 60, NOW)
    assert missing.phase is Phase.RUNNING and missing.reason == Reason.JOB_MISSING
    assert missing.missing_since == NOW and missing.finished_at is None
    assert lifecycle.missing_since(missing) == NOW
    seen_again = lifecycle.observe_running(missing, job(RUNNING), NOW)
    assert seen_again.missing_since is None and lifecycle.missing_since(seen_again) is None


def test_old_sidecar_keeps_its_missing_timer_in_finished_at() -> None:
    # Written before missingSince existed: the timer was kept in finishedAt.
    old = TaskStatusBody.model_validate(
        {"phase": "Running", "reason": "JobMissing", "finishedAt": "2026-01-01T00:00:00.000Z"}
    )
    assert lifecycle.missing_since(old) == T0
    finished = TaskStatusBody(phase=Phase.SUCCEEDED, reason=Reason.SUCCEEDED, finished_at=T0)
    assert lifecycle.missing_since(finished) is None


def test_requeue_keeps_the_queue_place_and_counts_the_restart() -> None:
    missing = lifecycle.note_missing(body_in(Phase.RUNNING), 60, NOW)
    again = lifecycle.requeue(missing, "old-hash", 1)
    assert again.phase is Phase.QUEUED and again.queued_at == T0
    assert again.retries == 1 and again.submission_id is None
    assert again.missing_since is None and again.next_retry_at is None
    assert again.reason == Reason.REQUEUED


def test_retry_keeps_the_queue_place_and_the_exit_code_and_sets_the_backoff() -> None:
    failed = body_in(Phase.FAILED).model_copy(update={"exit_code": 1, "retries": 1})
    again = lifecycle.retry(failed, "old-hash", 2, NOW, "retry 2 of 3 in 20s")
    assert (again.phase, again.reason) == (Phase.QUEUED, Reason.RETRY_BACKOFF)
    assert again.queued_at == T0 and again.next_retry_at == NOW and again.retries == 2
    assert again.exit_code == 1 and again.submission_id is None and again.run == 1
    started = lifecycle.start_run(again, "1234abcd", "rq-a-1234abcd-2", NOW)
    assert started.exit_code is None and started.next_retry_at is None and started.retries == 2
    # A run the user asks for starts a fresh series.
    assert lifecycle.restart(failed, "new-hash", NOW).retries == 0


def test_a_new_task_can_start_out_invalid() -> None:
    body = lifecycle.invalidate(None, "broken")
    assert body.phase is Phase.INVALID and body.reason == Reason.INVALID_SPEC


def test_restored_outcome_keeps_its_record() -> None:
    # A spec fixed back to a run that ended while the file was broken: no new start time.
    invalid = body_in(Phase.INVALID)
    restored = lifecycle.end_run(invalid, job(SUCCEEDED))
    assert restored.phase is Phase.SUCCEEDED and restored.started_at is None
    seen = lifecycle.end_run(body_in(Phase.STARTING), job(SUCCEEDED))
    assert seen.started_at == T0


def test_preemption_queues_a_new_run_in_the_old_place_and_is_no_failure() -> None:
    running = body_in(Phase.RUNNING).model_copy(update={"retries": 1})
    preempted = lifecycle.preempt(running, "urgent", "preempted by urgent")
    assert preempted.phase is Phase.QUEUED and preempted.reason == Reason.PREEMPTED
    assert preempted.queued_at == T0 and preempted.run == 1  # its place; the next run is 2
    assert (preempted.preemptions, preempted.preempted_by) == (1, "urgent")
    assert preempted.submission_id is None and preempted.started_at is None
    assert preempted.retries == 1  # untouched: not a failure, not a retry
    again = lifecycle.start_run(preempted, "1234abcd", "rq-a-1234abcd-2", NOW)
    assert again.preempted_by is None and again.preemptions == 1


@pytest.mark.parametrize("phase", list(Phase))
def test_the_state_read_back_for_every_phase_and_reason(phase: Phase) -> None:
    """`state_of` decides a Queued status by identity and `in_cycle` reads its two fields
    directly (both are asked several times per task per full pass):
    the same answers as the rule, for every reason, as a member or as the file's word."""
    reasons: list[str | None] = [None, *Reason, *(r.value for r in Reason)]
    for reason in reasons:
        for missing in (None, datetime(2026, 1, 1, tzinfo=UTC)):
            body = TaskStatusBody(phase, reason=reason, missing_since=missing)
            state = lifecycle.state_of(body)
            assert state.phase is phase
            assert lifecycle.in_cycle(body) is (state is State.IN_CYCLE)
            assert (state is State.IN_CYCLE) is (
                phase is Phase.INVALID and reason == Reason.DEPENDENCY_CYCLE
            )
            if phase is Phase.QUEUED:
                assert state is (State.PREEMPTING if reason == "Preempting" else State.QUEUED)
            elif phase is Phase.RUNNING and missing is not None:
                assert state in (State.MISSING, State.MISSING_AFTER_OUTAGE)
            elif state is not State.IN_CYCLE:
                assert state is State[phase.name]
