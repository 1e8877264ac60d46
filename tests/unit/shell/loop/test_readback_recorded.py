"""The pass that sees a job RUNNING records the run's start at its own `now`: that pins its plan
to its instant (the same inputs a moment later would record another time), but not the pass
that reads the start back, which reads no clock for it (TaskStep.recorded,
Plan.read_back_deadline). The loop skips that read-back as it skips the PENDING pass's
(reconciler/core/incremental/standing.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from reconciler.core.incremental.standing import read_back as as_read_back
from reconciler.core.planner import Observation, Plan, TaskInput, plan
from specs.cluster import PENDING, RUNNING, Capacity, RayJob
from specs.settings.process import PlanOptions
from tests.support.incremental_history import T0
from tests.support.planner_world import GIB, task
from tests.unit.shell.loop.test_readback_skipped import loop_with_plans, step  # noqa: F401 (a fixture)
from tests.unit.shell.loop.test_skipped_passes import assert_changes_nothing, full_plan

_OPTIONS = PlanOptions(queue_id="q")


def _at(specs: Any, statuses: Any, observed: Observation, at: float) -> Plan:
    return plan(specs, statuses, observed, datetime.fromtimestamp(at, UTC), _OPTIONS)


def _running_pass(timeout: float) -> tuple[float, Plan, Any]:
    """A task whose job Ray lists RUNNING for the first time: (now, plan, its inputs)."""
    t = task(timeoutSeconds=timeout) if timeout else task()
    specs = {"a": TaskInput("a", t, None, t, t.spec_hash())}
    cap = Capacity(4, 0, 64 * GIB)
    first = plan(specs, {}, Observation({}, cap), datetime.fromtimestamp(T0, UTC), _OPTIONS)
    (submit,) = first.submits
    sid = submit.request.submission_id
    meta = dict(submit.request.metadata)
    now = T0 + 5
    jobs = {sid: RayJob(sid, RUNNING, start_time=T0, metadata=meta, entrypoint_cpus=1)}
    statuses = dict(first.statuses)
    pending = {sid: RayJob(sid, PENDING, start_time=T0, metadata=meta, entrypoint_cpus=1)}
    statuses.update(_at(specs, statuses, Observation(pending, cap), T0 + 1).statuses)
    running = _at(specs, statuses, Observation(jobs, cap), now)
    return now, running, (specs, jobs, cap, statuses)


def test_the_start_recorded_pins_the_plan_but_not_its_read_back() -> None:
    now, running, (specs, jobs, cap, given) = _running_pass(0)
    assert running.statuses["a"].status.started_at == datetime.fromtimestamp(now, UTC)
    assert running.deadline == now  # the same inputs later would record another start
    assert running.read_back_deadline is None  # nothing else reads the clock
    assert as_read_back(running, Observation(jobs, cap), now, True, specs, given) is not None
    again = _at(specs, dict(running.statuses), Observation(jobs, cap), now + 60)
    assert again.still  # the read-back, a minute later: nothing to do


def test_a_timeout_still_bounds_the_read_back() -> None:
    now, running, _ = _running_pass(30)
    assert running.deadline == now
    # The run times out 30 s after the start recorded: its read-back holds until then only.
    assert running.read_back_deadline is not None
    assert now < running.read_back_deadline <= now + 30


def test_the_running_pass_read_back_is_skipped_in_the_loop(loop_with_plans) -> None:  # noqa: F811
    rec, ray, clock, plans = loop_with_plans
    assert step(rec, clock, plans) is not None  # the jobs listed PENDING
    assert step(rec, clock, plans) is None  # its read-back: skipped
    for sid in sorted(ray.jobs):
        ray.set_status(sid, RUNNING)
    running = step(rec, clock, plans)
    assert running is not None and running.write_classes
    assert running.deadline is not None and running.deadline <= clock() + 1e-3  # (microseconds)
    skipped = rec.skipped
    assert step(rec, clock, plans) is None  # before: planned (the plan's deadline was now)
    assert rec.skipped == skipped + 1
    assert_changes_nothing(full_plan(rec, ray, clock), rec)
    assert step(rec, clock, plans) is None  # and still after it
