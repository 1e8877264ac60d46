"""Right-sizing: a live run's aggregate (peak, time-weighted mean, CPU efficiency, a lower
bound marked), the records it ends in, and the suggestion rule."""

from __future__ import annotations

import math

import pytest

from reconciler.shell.ops.rightsize import (
    GI,
    MI,
    RunIdentity,
    RunRecord,
    RunUse,
    SuggestRule,
    families,
    suggest,
)
from specs.cluster import Capacity, Usage

DECLARED = Capacity(2, 0, 4 * GI)
ONE_CPU = Capacity(1, 0, 0)


def identity(task: str = "train", run: int = 1, declared: Capacity = DECLARED) -> RunIdentity:
    return RunIdentity(task, run, f"{task}-{run}", "team-a", declared, started_at=100.0)


def test_peak_and_time_weighted_mean_of_what_a_run_holds() -> None:
    use = RunUse()
    use.observe(100, Capacity(1, 0, GI), Usage(cpu_percent=50, memory=GI), complete=True)
    use.observe(110, Capacity(3, 0, GI), Usage(cpu_percent=250, memory=3 * GI), complete=True)
    use.observe(130, Capacity(1, 0, GI), Usage(cpu_percent=50, memory=2 * GI), complete=True)
    record = use.record(identity(), ended_at=140)
    assert record.peak == Capacity(3, 0, GI)
    # 1 CPU for 10 s, 3 for 20 s, 1 for the last 10 s: 80 CPU-seconds over 40 s.
    assert record.mean.cpu == pytest.approx(2.0)
    assert record.mean.memory == pytest.approx(GI)
    # Cores busy: 0.5 x 10 + 2.5 x 20 + 0.5 x 10 = 60 core-seconds over 40 s, 1.5 cores;
    # seff's CPU efficiency: CPU-seconds used over declared CPUs times wall time.
    assert record.cpu_seconds == pytest.approx(1.5 * 40)
    assert record.cpu_efficiency == pytest.approx(1.5 / 2)
    assert record.peak_memory == 3 * GI
    assert record.polls == 3 and not record.lower_bound
    assert record.busy_cores == pytest.approx(1.5)


def test_a_figure_holds_at_most_hold_seconds() -> None:
    use = RunUse(hold_seconds=5)
    use.observe(0, Capacity(4), None, complete=True)
    use.observe(100, Capacity(0), None, complete=True)  # a long gap: Ray did not answer
    record = use.record(identity(), ended_at=105)
    assert record.mean.cpu == pytest.approx(4 * 5 / 10)  # 5 s at 4, 5 s at 0
    assert record.cpu_efficiency is None and record.peak_memory is None  # never read


def test_one_poll_is_its_own_mean_and_the_same_census_counts_once() -> None:
    use = RunUse()
    use.observe(10, Capacity(1), Usage(cpu_percent=100), complete=True)
    use.observe(10, Capacity(9), Usage(cpu_percent=900), complete=True)  # seen again
    record = use.record(identity(), ended_at=None)
    assert record.polls == 1 and record.mean == Capacity(1) and record.peak == Capacity(1)
    assert record.cpu_efficiency == pytest.approx(0.5)


def test_a_lower_bound_is_marked_for_the_whole_run() -> None:
    use = RunUse()
    use.observe(0, Capacity(1), None, complete=True)
    use.observe(10, Capacity(1), None, complete=False)
    use.observe(20, Capacity(1), None, complete=True)
    assert use.record(identity(), ended_at=30).lower_bound


def record(
    task: str = "train",
    *,
    peak: Capacity = ONE_CPU,
    polls: int = 4,
    peak_memory: float | None = 900 * MI,
    cores: float = 0.5,
    lower_bound: bool = False,
    declared: Capacity = DECLARED,
) -> RunRecord:
    wall = 100.0
    return RunRecord(
        task=task,
        run=1,
        submission_id="s",
        queue=None,
        outcome="SUCCEEDED",
        started_at=0.0,
        ended_at=wall,
        declared=declared,
        peak=peak,
        mean=peak,
        cpu_seconds=cores * wall,
        cpu_efficiency=cores / declared.cpu if declared.cpu else None,
        peak_memory=peak_memory,
        peak_gpu_memory=None,
        polls=polls,
        lower_bound=lower_bound,
    )


def test_the_suggestion_rounds_up_what_was_held_and_adds_headroom_to_memory() -> None:
    found = suggest("train", [record(), record(peak=Capacity(1.5, 1, 0))], DECLARED)
    assert found is not None
    assert (found.cpu, found.gpu) == (2.0, 1)  # ceil(1.5); the peak GPU held
    assert found.memory == 1280 * MI  # 900Mi x 1.2 = 1080Mi, up to 256Mi steps
    assert found.changes(DECLARED) == {"gpu": 1, "memory": "1280Mi"}
    assert found.runs == 2 and found.polls == 8


def test_no_suggestion_without_enough_polls_and_lower_bounds_left_out() -> None:
    assert suggest("train", [record(polls=2)], DECLARED) is None
    assert suggest("train", [record(polls=5, lower_bound=True)], DECLARED) is None
    rule = SuggestRule(min_runs=2)
    assert suggest("train", [record()], DECLARED, rule) is None
    assert suggest("train", [record(), record()], DECLARED, rule) is not None


def test_busy_cores_count_when_above_what_was_held() -> None:
    # A driver that computes in its own process holds nothing in Ray but keeps cores busy.
    found = suggest("train", [record(peak=Capacity(), cores=2.4)], DECLARED)
    assert found is not None and found.cpu == 3


def test_only_the_last_runs_count() -> None:
    old = [record(peak=Capacity(8))] * 3
    new = [record(peak=Capacity(1))] * 10
    found = suggest("train", old + new, DECLARED)
    assert found is not None and found.cpu == 1


def test_a_fractional_declaration_that_held_stays() -> None:
    half = Capacity(0.5, 0, 0)
    found = suggest("x", [record(peak=Capacity(0.5), cores=0.2, declared=half)], half)
    assert found is not None and found.cpu == 0.5 and "cpu" not in found.changes(half)


def test_memory_rounds_to_whole_gi_above_four() -> None:
    found = suggest("x", [record(peak_memory=5 * GI)], DECLARED)
    assert found is not None and found.memory == 6 * GI  # 6Gi: 5 x 1.2


def test_memory_unmeasured_keeps_the_declaration() -> None:
    found = suggest("x", [record(peak_memory=None)], DECLARED)
    assert found is not None and found.memory is None and "memory" not in found.changes(DECLARED)


def test_an_arrays_elements_suggest_together() -> None:
    grouped = families([record("sweep[0]"), record("sweep[1]"), record("train")])
    assert sorted(grouped) == ["sweep", "train"] and len(grouped["sweep"]) == 2


def test_a_record_reads_back_as_written_and_its_text_fields_are_capped() -> None:
    use = RunUse()
    use.observe(100, Capacity(1), Usage(cpu_percent=100, memory=GI), complete=False)
    written = use.record(identity("t" * 5000), ended_at=110)
    data = written.to_json()
    assert len(data["task"].encode()) <= 512 and data["task"].endswith("[... cut]")
    back = RunRecord.from_json(data)
    assert back is not None and back.lower_bound and back.peak == Capacity(1)
    assert back.cpu_efficiency == pytest.approx(0.5) and back.peak_memory == GI
    assert RunRecord.from_json({"task": 1}) is None and RunRecord.from_json([]) is None
    assert math.isclose(back.started_at or 0, 100)
