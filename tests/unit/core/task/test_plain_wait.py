"""The planner's cold-start path: a waiting task's reconcile in one go
(`reconcile.plain_wait`) and its place written in one go (`lifecycle.queue` from a Queued
state) give exactly what the step-by-step path gives: the one task's result wherever
`plain_wait` answers, and the whole plan (every status field, submits, stops, events, the
deadline) of random folders of tasks, statuses, Ray jobs and queues."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

from reconciler.core import planner
from reconciler.core.planner import Observation, TaskInput
from reconciler.core.task import lifecycle, reconcile
from reconciler.core.task.states import Trigger, fire
from specs.cluster import (
    FAILED,
    META_QUEUE,
    META_SPEC_HASH,
    META_TASK,
    PENDING,
    RUNNING,
    SUCCEEDED,
    Capacity,
    RayJob,
)
from specs.queues.parse import parse_queue_config
from specs.settings.process import PlanOptions
from specs.task.arrays import order_key, split
from specs.task.errors import SpecError
from specs.task.models import Phase, Reason
from specs.task.status import TaskStatus, TaskStatusBody
from tests.support.incremental_history import T0, assert_identical
from tests.support.planner_world import GIB, task

EXAMPLES = int(os.environ.get("RAYQUEUE_PROPERTY_EXAMPLES", "300"))
NAMES = ("a", "b", "c", "d", "team-a/e", "team-a/f", "team-b/g", "sweep[0]", "sweep[1]", "x]")
TEAMS = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
      nominalQuota: {cpu: 2}
      maxQueued: 1
    - name: team-b
      nominalQuota: {cpu: 1}
"""


def _queue_by_fire(
    body: TaskStatusBody,
    position: int | None,
    reason: Reason,
    message: str,
    estimated_start_at: datetime | None,
    scale_up_requested_at: datetime | None = None,
    bucket: str | None = None,
) -> TaskStatusBody:
    """`lifecycle.queue` as it was: always through the state machine."""
    update = {
        "queue_position": position,
        "queue_position_bucket": bucket,
        "reason": reason,
        "message": message,
        "estimated_start_at": estimated_start_at,
        "scale_up_requested_at": scale_up_requested_at,
    }
    return fire(body, Trigger.QUEUE, update)


@contextmanager
def steps_only() -> Iterator[None]:
    """The planner without the cold-start path: every task through every step."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reconcile, "plain_wait", lambda *args: None)
        patch.setattr(lifecycle, "queue", _queue_by_fire)
        yield


@st.composite
def specs_of(draw: st.DrawFn) -> dict[str, TaskInput]:
    out: dict[str, TaskInput] = {}
    for name in draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=10, unique=True)):
        if draw(st.integers(0, 9)) == 0:
            out[name] = TaskInput(name, None, SpecError.unplaced("bad yaml"), None)
            continue
        fields: dict[str, Any] = {
            "priority": draw(st.integers(0, 3)),
            "cpu": draw(st.sampled_from([1, 1, 1, 2, 8])),
        }
        if draw(st.integers(0, 5)) == 0:
            fields["suspend"] = True
        if draw(st.integers(0, 5)) == 0:
            fields["dependsOn"] = [{"name": draw(st.sampled_from([n for n in NAMES if n != name]))}]
        if draw(st.booleans()):
            fields["timeoutSeconds"] = 50
        if draw(st.integers(0, 3)) == 0:  # never borrows: above nominal it can never start
            fields["preemptible"] = False
        t = task(**fields)
        out[name] = TaskInput(name, t, None, t, t.spec_hash() if draw(st.booleans()) else None)
    return out


@st.composite
def mutated(draw: st.DrawFn, status: TaskStatus) -> TaskStatus:
    """The status as the last pass gave it, or with fields a reconcile reads changed."""
    if draw(st.integers(0, 2)) > 0:
        return status
    update: dict[str, Any] = {}
    if draw(st.booleans()):
        update["phase"] = draw(st.sampled_from(list(Phase)))
    if draw(st.booleans()):
        update["reason"] = draw(
            st.sampled_from([Reason.PREEMPTING.value, Reason.DEPENDENCY_CYCLE.value, "Queued"])
        )
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
        update["missing_since"] = datetime.fromtimestamp(T0 - 5, UTC)
    if draw(st.booleans()):
        update["preempted_by"] = "a"
    if not update:
        return status
    return status.model_copy(update={"status": status.status.model_copy(update=update)})


@st.composite
def folders(draw: st.DrawFn) -> dict[str, Any]:
    """Tasks, the statuses earlier passes wrote (some edited), Ray's jobs, queues, options."""
    specs = draw(specs_of())
    options = PlanOptions(
        queue_id="q",
        policy=draw(st.sampled_from(["strict", "backfill", "besteffort"])),
        exact_queue_positions=draw(st.integers(1, 3)),
    )
    queues = parse_queue_config(TEAMS) if draw(st.booleans()) else None
    capacity = Capacity(draw(st.sampled_from([0, 1, 2, 4])), 0, 16 * GIB)
    jobs: dict[str, RayJob] = {}
    statuses: dict[str, TaskStatus] = {}
    now = T0
    for _ in range(draw(st.integers(0, 2))):  # earlier passes, applied as the loop would
        at = datetime.fromtimestamp(now, UTC)
        result = planner.plan(specs, statuses, Observation(jobs, capacity), at, options)
        statuses = dict(result.statuses)
        for submit in result.submits:
            sid = submit.request.submission_id
            state = draw(st.sampled_from([PENDING, RUNNING, SUCCEEDED, FAILED]))
            jobs[sid] = RayJob(sid, state, start_time=now, metadata=dict(submit.request.metadata))
        now += draw(st.sampled_from([0.0, 1.0, 60.0]))
    statuses = {n: draw(mutated(s), label=f"status of {n}") for n, s in statuses.items()}
    for name in list(statuses):  # a few sidecars lost: first sight again, maybe with a job
        if draw(st.integers(0, 4)) == 0:
            del statuses[name]
    for name, spec in specs.items():  # a stray job of the task, live or not, to adopt or not
        if spec.task is not None and draw(st.integers(0, 5)) == 0:
            hash_ = spec.task.spec_hash() if draw(st.booleans()) else "other"
            meta = {META_QUEUE: "q", META_TASK: name, META_SPEC_HASH: hash_}
            state = draw(st.sampled_from([PENDING, RUNNING, SUCCEEDED]))
            jobs[f"stray-{name}"] = RayJob(f"stray-{name}", state, start_time=now, metadata=meta)
    available = draw(st.integers(0, 5)) > 0
    observed = Observation(jobs, capacity) if available else Observation(None, None, "refused")
    now += draw(st.sampled_from([0.0, 0.5, 3600.0]))
    return {
        "specs": specs,
        "statuses": statuses,
        "observed": observed,
        "now": now,
        "options": options,
        "queues": queues,
    }


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(folder=folders())
def test_the_cold_start_path_plans_what_the_steps_plan(folder: dict[str, Any]) -> None:
    specs, statuses = folder["specs"], folder["statuses"]
    observed, now, options = folder["observed"], folder["now"], folder["options"]
    queues = folder["queues"]
    at = datetime.fromtimestamp(now, UTC)
    env = planner.task_env(observed, options, queues)
    answered = 0
    for name, spec in specs.items():
        prev = statuses.get(name)
        plain = reconcile.plain_wait(env, spec, prev, now)
        if plain is not None:
            answered += 1
            assert plain == reconcile.reconcile_steps(env, spec, prev, now), name
            assert plain.body is prev.status if prev is not None else True
    event(f"plain_wait answered for {min(answered, 3)}+ tasks")
    new = planner.plan(specs, statuses, observed, at, options, queues=queues)
    with steps_only():
        old = planner.plan(specs, statuses, observed, at, options, queues=queues)
    note(f"statuses: {statuses}")
    assert_identical(old, new, statuses)


def test_a_first_sight_and_a_carried_wait_take_the_one_go_path() -> None:
    """The two cases it is for: no sidecar and no job, then the Queued status written."""
    options = PlanOptions(queue_id="q")
    t, head = task(priority=1), task(priority=2)
    spec = TaskInput("a", t, None, t, t.spec_hash())
    specs = {"a": spec, "b": TaskInput("b", head, None, head, head.spec_hash())}
    env = planner.task_env(Observation({}, Capacity(1, 0, 16 * GIB)), options)  # b starts
    first = reconcile.plain_wait(env, spec, None, T0)
    assert first is not None and first == reconcile.reconcile_steps(env, spec, None, T0)
    assert first.valid_from == first.valid_until == T0  # its first queuedAt read the clock
    written = planner.plan(specs, {}, env.obs, datetime.fromtimestamp(T0, UTC), options)
    status = written.statuses["a"]
    assert status.status.phase is Phase.QUEUED
    again = reconcile.plain_wait(env, spec, status, T0 + 60)
    assert again is not None and again.body is status.status
    assert again == reconcile.reconcile_steps(env, spec, status, T0 + 60)
    assert again.valid_until == float("inf")
    # Anything else goes through the steps: a job of it in Ray (adopt?), a backoff, too big.
    job = RayJob("j", RUNNING, metadata={META_QUEUE: "q", META_TASK: "a"})
    adopting = planner.task_env(Observation({"j": job}, Capacity(1, 0, 16 * GIB)), options)
    assert reconcile.plain_wait(adopting, spec, None, T0) is None
    backoff = status.status._replace(next_retry_at=datetime.fromtimestamp(T0 + 5, UTC))
    assert reconcile.plain_wait(env, spec, status._replace(status=backoff), T0) is None
    big = task(cpu=64)
    assert reconcile.plain_wait(env, TaskInput("b", big, None, big), None, T0) is None


@settings(max_examples=200, deadline=None)
@given(
    phase=st.sampled_from([Phase.QUEUED, Phase.UNSCHEDULABLE, Phase.RUNNING]),
    reason=st.sampled_from([Reason.QUEUED, Reason.PREEMPTING, Reason.WAITING_FOR_RESOURCES]),
    position=st.none() | st.integers(1, 3),
    new_position=st.none() | st.integers(1, 3),
    missing=st.booleans(),
    message=st.sampled_from(["queued", "other"]),
)
def test_queue_in_one_go_is_the_transition(
    phase: Phase,
    reason: Reason,
    position: int | None,
    new_position: int | None,
    missing: bool,
    message: str,
) -> None:
    """From a Queued state the QUEUE trigger's fields in one go: equal to `fire`'s result, the
    very object when nothing changes; elsewhere `fire` itself (which may refuse)."""
    body = TaskStatusBody(
        phase=phase,
        reason=reason,
        message="queued",
        queue_position=position,
        missing_since=datetime.fromtimestamp(T0, UTC) if missing else None,
    )
    args = (new_position, Reason.QUEUED, message, None, None, None)
    try:
        expected = _queue_by_fire(body, *args)
    except lifecycle.IllegalTransition:
        with pytest.raises(lifecycle.IllegalTransition):
            lifecycle.queue(body, *args)
        return
    got = lifecycle.queue(body, *args)
    assert got == expected
    assert (got is body) == (expected is body)


@pytest.mark.parametrize(
    ("name", "parts"),
    [("a", None), ("sweep[3]", ("sweep", 3)), ("t/x[10]", ("t/x", 10)), ("x]", None), ("", None)],
)
def test_split_without_the_regex_for_plain_names(name: str, parts: Any) -> None:
    assert split(name) == parts
    assert order_key(name) == (name if parts is None else f"{parts[0]}[{parts[1]:06d}]")
