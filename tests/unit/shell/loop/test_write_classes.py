"""The planner's write classes (`Plan.write_classes`, carried out by `writes.split`) sort every
changed status as `classify` below does, re-deriving them from the plan's actions and field
diffs: the oracle."""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.core.planner import Plan
from reconciler.shell.loop import writes
from specs.queues.parse import parse_queue_config
from specs.settings.process import PlanOptions
from specs.task.models import Phase
from specs.task.status import TaskStatus, TaskStatusBody
from tests.unit.core.incremental.test_histories import NAMES, QUEUES, History, options_of, steps

_POSITION_FIELDS = frozenset({"queue_position", "message", "estimated_start_at"})


def classify(
    plan: Plan, before: Mapping[str, TaskStatus], edited: AbstractSet[str] = frozenset()
) -> writes.WriteClasses:
    acting = {s.task for s in plan.submits}
    acting |= {s.task for s in plan.stops if s.task is not None}
    acting |= {t.task for t in plan.timeouts}
    for preemption in plan.preemptions:
        acting.add(preemption.preemptor)
        acting.update(preemption.victims)
    durable: set[str] = set()
    prompt: set[str] = set()
    deferred: set[str] = set()
    for name, status in plan.statuses.items():
        old = before.get(name)
        if old is status:
            continue
        if name in acting or records_a_run(old, status):
            durable.add(name)
        elif name not in edited and deferrable(old, status):
            deferred.add(name)
        else:
            prompt.add(name)
    return writes.WriteClasses(frozenset(durable), frozenset(prompt), frozenset(deferred))


def records_a_run(old: TaskStatus | None, new: TaskStatus) -> bool:
    body = new.status
    if old is None:
        return body.submission_id is not None or body.phase.finished
    was = old.status
    return (
        body.submission_id != was.submission_id
        or body.run != was.run
        or (body.uid != was.uid and body.run > 0)
        or (body.phase.finished and body.phase is not was.phase)
        or body.retries != was.retries
        or body.preemptions != was.preemptions
        or body.lost_restarts != was.lost_restarts
    )


def deferrable(old: TaskStatus | None, new: TaskStatus) -> bool:
    if new.status.phase is not Phase.QUEUED:
        return False
    if old is None:
        return new.status.submission_id is None
    return old.metadata == new.metadata and _without_position(old.status) == _without_position(
        new.status
    )


def _without_position(body: TaskStatusBody) -> dict[str, object]:
    return {k: v for k, v in body._asdict().items() if k not in _POSITION_FIELDS}


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    options=options_of(),
    with_queues=st.booleans(),
    history=st.lists(
        st.tuples(
            steps(),
            st.sets(st.sampled_from(NAMES), max_size=2),
            st.sets(st.sampled_from(NAMES), max_size=3),
        ),
        min_size=1,
        max_size=60,
    ),
)
def test_write_classes_equal_classify_on_random_histories(
    options: PlanOptions,
    with_queues: bool,
    history: list[tuple[tuple[Any, ...], set[str], set[str]]],
) -> None:
    world = History(options, parse_queue_config(QUEUES) if with_queues else None)
    world.compare = False  # the incremental planner's equivalence is tested on its own

    for step, failing, edited in history:
        world.apply(step)
        world.fail_once = frozenset(failing)
        before = dict(world.statuses)
        plan = world.run_pass()
        new = writes.split(plan, edited)
        assert new == classify(plan, before, edited), step
        # Every changed status has a class, and no unchanged one does.
        changed = {n for n, s in plan.statuses.items() if before.get(n) is not s}
        assert set(plan.write_classes) == changed
