"""`plan_incremental` with a plan that stands (incremental.Stand): the pass that reads back
exactly what the last plan wrote, or reads nothing new after a still plan, is answered with
the standing plan, not planned; anything else changed, Ray's answer, the caller's inputs or an
unsettled read brings the planned pass back. Each standing plan equals `planner.plan`'s."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime

from reconciler.core import incremental
from reconciler.core.planner import Observation, Plan, TaskInput, plan
from specs.cluster import PENDING, Capacity, RayJob
from specs.settings.process import PlanOptions
from specs.task.status import TaskStatus
from tests.support.incremental_history import T0
from tests.support.planner_world import GIB, task

_OPTIONS = PlanOptions(queue_id="q")
_CAP = Capacity(2, 0, 64 * GIB)


class Loop:
    """The loop's part, by hand: versions bumped for every status it writes, the names that
    changed since the pass before, and the memo handed on."""

    def __init__(self, names: str) -> None:
        t = task()
        self.specs = {n: TaskInput(n, t, None, t, t.spec_hash()) for n in names}
        self.statuses: dict[str, TaskStatus] = {}
        self.versions: dict[str, tuple[int, int]] = {n: (1, 0) for n in names}
        self.memo = incremental.EMPTY
        self.changed: set[str] | None = None

    def run(
        self, observed: Observation, at: float, inputs: object = 0, settled: bool = True
    ) -> Plan:
        result, self.memo = incremental.plan_incremental(
            self.memo,
            self.specs,
            dict(self.statuses),
            observed,
            datetime.fromtimestamp(at, UTC),
            _OPTIONS,
            versions=dict(self.versions),
            changed=self.changed,
            stand=incremental.Stand(inputs, settled),
        )
        self.changed = set()
        if not self.memo.stood:
            self.write(result.statuses)
        return result

    def write(self, statuses: Mapping[str, TaskStatus]) -> None:
        for name, status in statuses.items():
            if self.statuses.get(name) is not status:
                self.statuses[name] = status
                spec, generation = self.versions[name]
                self.versions[name] = (spec, generation + 1)
                assert self.changed is not None
                self.changed.add(name)


def _listed(first: Plan) -> Observation:
    jobs = {
        s.request.submission_id: RayJob(
            s.request.submission_id,
            PENDING,
            start_time=T0,
            metadata=dict(s.request.metadata),
            entrypoint_cpus=1,
        )
        for s in first.submits
    }
    return Observation(jobs, _CAP)


def _moved(loop: Loop) -> tuple[Plan, Observation]:
    """Two tasks submitted, two waiting; then Ray lists the jobs PENDING: statuses move."""
    first = loop.run(Observation({}, _CAP), T0)
    assert len(first.submits) == 2
    observed = _listed(first)
    moved = loop.run(observed, T0 + 1)
    assert loop.memo.fast and moved.write_classes and not moved.still and not moved.submits
    return moved, observed


def _listed_again(loop: Loop) -> Observation:
    standing = loop.memo.standing
    assert standing is not None
    return standing.observed


def _full(loop: Loop, observed: Observation, at: float) -> Plan:
    return plan(loop.specs, loop.statuses, observed, datetime.fromtimestamp(at, UTC), _OPTIONS)


def test_the_read_back_of_the_loops_own_writes_stands() -> None:
    loop = Loop("abcd")
    _, observed = _moved(loop)
    standing = loop.run(observed, T0 + 1.1)
    assert loop.memo.stood and standing.still
    full = _full(loop, observed, T0 + 1.1)
    assert full.still and not full.write_classes
    assert {n: s.status for n, s in standing.statuses.items()} == {
        n: s.status for n, s in full.statuses.items()
    }
    # and it is a still plan from then on: nothing read anew stands too, without a read
    assert incremental.stands(loop.memo, observed, datetime.fromtimestamp(T0 + 1.2, UTC), 0)
    loop.run(observed, T0 + 1.2)
    assert loop.memo.stood


def test_a_status_written_by_someone_else_is_planned() -> None:
    loop = Loop("abcd")
    _moved(loop)
    observed = _listed_again(loop)
    loop.write({"d": loop.statuses["c"]})  # not what the plan gave d
    loop.run(observed, T0 + 1.1)
    assert not loop.memo.stood


def test_ray_the_inputs_or_an_unsettled_read_bring_the_plan_back() -> None:
    for run in (
        lambda loop, observed: loop.run(Observation({}, _CAP), T0 + 1.1),
        lambda loop, observed: loop.run(observed, T0 + 1.1, inputs=1),
        lambda loop, observed: loop.run(observed, T0 + 1.1, settled=False),
    ):
        loop = Loop("abcd")
        _, observed = _moved(loop)
        run(loop, observed)
        assert not loop.memo.stood


def test_a_failed_write_lets_nothing_stand() -> None:
    loop = Loop("abcd")
    _, observed = _moved(loop)
    loop.memo = incremental.without_standing(loop.memo)
    loop.run(observed, T0 + 1.1)
    assert not loop.memo.stood


def test_what_ray_says_jobs_hold_or_have_available_brings_the_plan_back() -> None:
    for change in (
        lambda observed: replace(observed, held={sid: Capacity(2) for sid in observed.jobs}),
        lambda observed: replace(observed, ray_available=Capacity(0, 0, 64 * GIB)),
    ):
        loop = Loop("abcd")
        _, observed = _moved(loop)
        loop.run(observed, T0 + 1.1)
        assert loop.memo.stood  # a still plan now
        changed = change(observed)
        at = datetime.fromtimestamp(T0 + 1.2, UTC)
        assert not incremental.stands(loop.memo, changed, at, 0)
        loop.run(changed, T0 + 1.2)
        assert not loop.memo.stood
