"""The simulator plans with the loop's entry (`plan_incremental`, its memo kept across steps):
every job starts, ends and is preempted exactly as with the reference `planner.plan`, and the
fast pass really runs."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import pytest

from reconciler.core import planner
from reconciler.core.incremental import EMPTY, Memo
from reconciler.core.planner import Observation, Plan, TaskInput
from reconciler.sim import engine
from reconciler.sim.engine import JobRecord, simulate
from reconciler.sim.teams import split, team_config
from reconciler.sim.workload import Job, make_arrays, synthetic
from specs.queues.config import QueueConfig
from specs.settings.process import PlanOptions
from specs.task.status import TaskStatus

CAPACITY = 64


def _reference(
    memo: Memo,
    specs: Mapping[str, TaskInput],
    statuses: Mapping[str, TaskStatus],
    observed: Observation,
    now: datetime,
    options: PlanOptions,
    **given: Any,
) -> tuple[Plan, Memo]:
    """The reference planner in the entry's shape: no memo, every pass a full one."""
    kept = ("queues", "usage", "queue_error")
    options_only = {k: v for k, v in given.items() if k in kept}
    return planner.plan(specs, statuses, observed, now, options, **options_only), EMPTY


def _outcome(records: list[JobRecord]) -> list[tuple[Any, ...]]:
    return [
        (r.job.name, r.start, r.end, r.phase, r.last_start, r.preemptions, r.wasted, r.lost)
        for r in records
    ]


def _both(
    monkeypatch: pytest.MonkeyPatch,
    workload: list[Job],
    policy: str,
    *,
    options: PlanOptions | None = None,
    queues: QueueConfig | None = None,
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], int]:
    """Each job's outcome with the entry and with the reference, and how many of the entry's
    passes were fast ones."""
    real = engine.plan_incremental
    fast = 0

    def counting(*args: Any, **kwargs: Any) -> tuple[Plan, Memo]:
        nonlocal fast
        result, memo = real(*args, **kwargs)
        fast += memo.fast
        return result, memo

    monkeypatch.setattr(engine, "plan_incremental", counting)
    entry = simulate(workload, policy, capacity_cpu=CAPACITY, options=options, queues=queues)
    monkeypatch.setattr(engine, "plan_incremental", _reference)
    reference = simulate(workload, policy, capacity_cpu=CAPACITY, options=options, queues=queues)
    assert entry.passes == reference.passes
    return _outcome(entry.records), _outcome(reference.records), fast


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("policy", ["strict", "backfill", "besteffort"])
def test_the_entry_runs_the_sim_as_the_reference_does(
    monkeypatch: pytest.MonkeyPatch, seed: int, policy: str
) -> None:
    workload = synthetic(120, seed=seed, capacity_cpu=CAPACITY, load=1.2)
    entry, reference, fast = _both(monkeypatch, workload, policy)
    assert entry == reference
    assert fast > 0  # the memo and the fast pass ran, not only full passes


@pytest.mark.parametrize("seed", [1, 2])
def test_the_entry_runs_team_queues_as_the_reference_does(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    workload = split(synthetic(120, seed=seed, capacity_cpu=CAPACITY, load=1.5), 3)
    queues = team_config(3, [1, 2, 1], CAPACITY, engine.MEMORY_BYTES)
    entry, reference, fast = _both(monkeypatch, workload, "backfill", queues=queues)
    assert entry == reference
    assert fast > 0


def test_the_entry_runs_preemption_and_arrays_as_the_reference_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    workload = make_arrays(synthetic(60, seed=4, capacity_cpu=CAPACITY, load=1.5), 0.2, 3, 2, 4)
    options = PlanOptions(preemption="LowerPriority", preemption_grace_seconds=30)
    entry, reference, _ = _both(monkeypatch, workload, "backfill", options=options)
    assert entry == reference
    assert any(preemptions for *_, preemptions, _, _ in entry)
