"""A waiting task's result carried over to the status the loop wrote
(reconciler.core.incremental.ownwrites): wherever `carried` answers, its answer is `reconcile_task`
of that status; and the incremental planner uses it, so a pass after the loop wrote the last plan's
statuses (a cold start's first sidecars) reconciles none of the tasks that only wait."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from reconciler.core import planner
from reconciler.core.incremental import ownwrites
from reconciler.core.planner import Observation, TaskInput
from specs.cluster import PENDING, Capacity, RayJob
from specs.settings.process import PlanOptions
from specs.task.models import Phase, Reason
from specs.task.records import Task
from specs.task.status import TaskStatus
from tests.support.incremental_history import T0, History
from tests.support.planner_world import GIB, task

OPTIONS = PlanOptions(queue_id="q", exact_queue_positions=2)
NAMES = ("a", "b", "c", "d", "e", "f")


@st.composite
def specs_of(draw: st.DrawFn) -> dict[str, TaskInput]:
    """A few tasks: priorities, sizes that may not fit, suspended, dependencies, time limits."""
    out: dict[str, TaskInput] = {}
    for name in draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=6, unique=True)):
        fields: dict[str, Any] = {
            "priority": draw(st.integers(0, 3)),
            "cpu": draw(st.sampled_from([1, 1, 1, 2, 8])),
        }
        if draw(st.integers(0, 4)) == 0:
            fields["suspend"] = draw(st.booleans())
        if draw(st.integers(0, 4)) == 0:
            fields["dependsOn"] = [{"name": draw(st.sampled_from([n for n in NAMES if n != name]))}]
        if draw(st.booleans()):
            fields["timeoutSeconds"] = 50
        t: Task = task(**fields)
        out[name] = TaskInput(name, t, None, t, t.spec_hash())
    return out


@st.composite
def mutated(draw: st.DrawFn, status: TaskStatus) -> TaskStatus:
    """The status as written, or with some of the fields a reconcile may read changed."""
    update: dict[str, Any] = {}
    if draw(st.integers(0, 2)) > 0:
        return status
    if draw(st.booleans()):
        update["phase"] = draw(st.sampled_from(list(Phase)))
    if draw(st.booleans()):
        update["queue_position"] = draw(st.none() | st.integers(1, 5))
        update["reason"] = draw(st.sampled_from([None, Reason.WAITING_FOR_RESOURCES.value]))
    if draw(st.booleans()):
        update["spec_hash"] = draw(st.sampled_from([None, "other"]))
    if draw(st.booleans()):
        update["queued_at"] = draw(
            st.sampled_from(
                [None, datetime.fromtimestamp(0, UTC), datetime.fromtimestamp(T0 - 60, UTC)]
            )
        )
    if draw(st.booleans()):
        update["next_retry_at"] = datetime.fromtimestamp(T0 + draw(st.sampled_from([-5, 5])), UTC)
    if draw(st.booleans()):
        update["submission_id"] = draw(st.sampled_from([None, "rq-x-1"]))
    if not update:
        return status
    return status.model_copy(update={"status": status.status.model_copy(update=update)})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=specs_of(), data=st.data())
def test_a_carried_result_is_the_reconcile_of_the_written_status(
    specs: dict[str, TaskInput], data: st.DataObject
) -> None:
    cpus = data.draw(st.sampled_from([0, 1, 1, 2, 4]), label="capacity")
    available = data.draw(st.sampled_from([True, True, True, False]), label="available")
    jobs = {"rq-x-1": RayJob("rq-x-1", PENDING, start_time=T0, metadata={})}
    observed = (
        Observation(jobs, Capacity(cpus, 0, 16 * GIB))
        if available
        else Observation(None, None, "connection refused")
    )
    env = planner.task_env(observed, OPTIONS)
    # The first pass, from no sidecars or from a previous pass's statuses.
    at = datetime.fromtimestamp(T0, UTC)
    statuses: dict[str, TaskStatus] = {}
    if data.draw(st.booleans(), label="second pass"):
        statuses = dict(planner.plan(specs, {}, observed, at, OPTIONS).statuses)
    written = planner.plan(specs, statuses, observed, at, OPTIONS).statuses
    later = T0 + data.draw(st.sampled_from([0.0, 0.5, 3600.0]), label="later")
    for name, spec in specs.items():
        result = planner.reconcile_task(env, spec, statuses.get(name), T0)
        status = data.draw(mutated(written[name]), label=f"status of {name}")
        again = ownwrites.after_write(result, spec, status)
        event("carried" if again is not None else "reconciled")
        if again is not None:
            assert again == planner.reconcile_task(env, spec, status, later)


def test_a_first_sight_result_is_carried_to_the_status_it_wrote() -> None:
    """The cold start's case: no sidecar, then the Queued status the first plan gave."""
    t, head = task(priority=1), task(priority=2)
    spec = TaskInput("a", t, None, t, t.spec_hash())
    specs = {"a": spec, "b": TaskInput("b", head, None, head, head.spec_hash())}
    observed = Observation({}, Capacity(1, 0, 16 * GIB))  # b starts, a waits
    at = datetime.fromtimestamp(T0, UTC)
    status = planner.plan(specs, {}, observed, at, OPTIONS).statuses["a"]
    assert status.status.phase is Phase.QUEUED
    env = planner.task_env(observed, OPTIONS)
    first = planner.reconcile_task(env, spec, None, T0)
    assert first.valid_until == T0  # its first queuedAt read the clock: good for now only
    again = ownwrites.after_write(first, spec, status)
    assert again is not None
    assert again == planner.reconcile_task(env, spec, status, T0 + 60)
    assert again.valid_until == float("inf")
    # Its place is the one it was enqueued with: the very waiter is handed on (a cold start
    # carries one per waiting task); a moved queuedAt builds a new one.
    assert again.waiter is first.waiter
    moved = status.model_copy(
        update={"status": status.status.model_copy(update={"queued_at": at.replace(year=2000)})}
    )
    again = ownwrites.after_write(first, spec, moved)
    assert again is not None and again.waiter is not first.waiter
    assert again == planner.reconcile_task(env, spec, moved, T0 + 60)
    # Edited (a new parse): not the task that was enqueued, so reconciled anew.
    edited = task(priority=1)
    assert ownwrites.after_write(first, TaskInput("a", edited, None, edited, None), status) is None


@pytest.mark.parametrize("tell_changed", [False, True])
def test_the_pass_after_the_first_sidecars_reconciles_no_waiting_task(
    monkeypatch: pytest.MonkeyPatch, tell_changed: bool
) -> None:
    """A cold start: the first pass writes every task's first status; the next pass sees a
    new version for each (the loop wrote it) and reconciles only the tasks that started (the
    fast pass), handing every waiting task's status back as it was written."""
    world = History(OPTIONS, None, capacity=Capacity(2, 0, 16 * GIB), tell_changed=tell_changed)
    for i in range(200):
        world.apply(("put", f"t{i:03d}", {"priority": i % 3}))
    world.run_pass()  # every status new; two tasks start
    calls: list[str] = []
    real = planner.reconcile_task

    def counting(env: planner.TaskEnv, spec: TaskInput, prev: Any, now: float) -> Any:
        calls.append(spec.name)
        return real(env, spec, prev, now)

    world.compare = False  # count the incremental planner's work alone
    monkeypatch.setattr(planner, "reconcile_task", counting)
    before = dict(world.statuses)
    result = world.run_pass()
    starting = sorted(n for n, s in before.items() if s.status.phase is Phase.STARTING)
    assert len(starting) == 2 and sorted(calls) == starting
    assert world.memo.fast
    waiting = [n for n, s in before.items() if s.status.phase is Phase.QUEUED]
    assert len(waiting) == 198
    assert all(result.statuses[n] is before[n] for n in waiting)
