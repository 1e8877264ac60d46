"""The benchmark matrix: the wide workload shape, the seed split, the loop's defaults in every
configuration, and a tiny matrix run that gives every column of the table."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest

from reconciler.sim import engine, matrix
from reconciler.sim.__main__ import main as sim_main
from reconciler.sim.goals import COLUMNS, CellResult, Figures, markdown, rows
from reconciler.sim.workload import (
    WIDE_CAPACITY,
    WIDE_LOAD,
    WIDE_SHORT_RUN,
    WIDE_WHOLE_SHARE,
    offered_load,
    wide,
)
from specs.queues.parse import parse_queue_config
from specs.settings.planner import PlannerSettings
from specs.settings.process import Settings

# --- the wide shape ---


@pytest.mark.parametrize("capacity", [WIDE_CAPACITY, 100])
def test_wide_widths_are_powers_of_two_up_to_the_cluster(capacity: int) -> None:
    jobs = wide(2000, seed=3, capacity_cpu=capacity)
    widths = {int(j.cpu) for j in jobs}
    top = 2 ** int(math.log2(capacity))
    assert widths == {2**k for k in range(int(math.log2(top)) + 1)}  # every one drawn
    whole = sum(1 for j in jobs if j.cpu == top) / len(jobs)
    assert 0 < whole <= 2 * WIDE_WHOLE_SHARE  # a few cluster-wide jobs


def test_wide_is_mostly_short_jobs_at_its_load() -> None:
    for seed in (0, 1, 10):
        jobs = wide(1000, seed=seed)
        short = sum(1 for j in jobs if j.run <= WIDE_SHORT_RUN[1]) / len(jobs)
        assert 0.55 <= short <= 0.65
        assert offered_load(jobs, WIDE_CAPACITY) == pytest.approx(WIDE_LOAD, abs=0.005)
        assert all(j.timeout >= j.run for j in jobs)
        assert [j.arrival for j in jobs] == sorted(j.arrival for j in jobs)


def test_wide_is_deterministic_per_seed() -> None:
    assert wide(300, seed=5) == wide(300, seed=5)
    assert wide(300, seed=5) != wide(300, seed=6)


def test_the_simulator_runs_the_wide_shape(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--workload", "wide", "--jobs", "40", "--capacity", "64", "--policies", "backfill"]
    assert sim_main([*args, "--processes", "1"]) == 0
    assert "wide: 40 jobs, 64 CPUs, offered load 0.95" in capsys.readouterr().out


# --- the seed split and the loop's defaults ---


def test_held_out_seeds_are_fixed_and_disjoint_from_the_tuning_seeds() -> None:
    assert matrix.TUNING_SEEDS == (0, 1, 2)
    assert matrix.HELD_OUT_SEEDS == (10, 11, 12, 13, 14)
    assert not set(matrix.TUNING_SEEDS) & set(matrix.HELD_OUT_SEEDS)
    assert matrix.SEED_SETS == {"tuning": (0, 1, 2), "held-out": (10, 11, 12, 13, 14)}
    assert matrix.seed_set_of(12) == "held-out" and matrix.seed_set_of(1) == "tuning"


def test_every_configuration_plans_with_the_loops_defaults(tmp_path: Path) -> None:
    """Every planner setting a configuration does not name is the loop's default (Settings,
    as serve builds its PlanOptions); the policy is the loop's default, backfill."""
    loop = Settings(tmp_path).plan_options()
    names = {f.name for f in dataclasses.fields(PlannerSettings)}
    for config in matrix.CONFIGURATIONS:
        changed = dict(config.changes)
        assert set(changed) <= names - {"policy"}, config.name
        options = config.options()
        for name in names:
            want = changed.get(name, getattr(loop, name))
            assert getattr(options, name) == want, (config.name, name)
    assert loop.policy == "backfill"
    assert matrix.BASELINE.options() == dataclasses.replace(loop, queue_id="default")


def test_the_teams_decay_as_a_queue_file_that_says_nothing_does() -> None:
    text = b"apiVersion: rayqueue/v1\nkind: QueueConfig\nspec:\n  queues:\n  - name: a\n"
    default = parse_queue_config(text, file="_queues.yaml").spec.fair_sharing
    for config in matrix.CONFIGURATIONS:
        if config.teams is not None:
            assert config.teams.half_life == default.usage_half_life
            assert config.teams.quota and not config.teams.fair_preemption


def test_a_cell_runs_the_loops_planner_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    real = engine.plan_incremental

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "plan_incremental", counting)
    matrix.run_cell(matrix.Cell("wide", 0, matrix.CONFIGURATIONS[1], 20, None))
    assert calls > 0


# --- the table ---


def _result(configuration: str, seed: int, utilization: float, **given: Any) -> CellResult:
    base = {k: None for k in ("jain", "weighted_share", "mean_wait_ratio", "p99_wait_ratio")}
    values = {**base, "urgent_p95": 10.0, "wasted": 0.0, "max_preemptions": 0, **given}
    return CellResult("wide", seed, configuration, 128, 0.95, Figures(utilization, **values), {})


def test_a_row_misses_a_goal_when_one_seed_of_its_set_does() -> None:
    results = [
        _result("no teams", 0, 0.80),
        _result("no teams", 1, 0.80),
        _result("teams", 0, 0.79, jain=0.99, mean_wait_ratio=1.2, p99_wait_ratio=1.1),
        _result("teams", 1, 0.75, jain=0.99, mean_wait_ratio=1.2, p99_wait_ratio=1.1),
    ]
    goals = {"teams": matrix.TEAM_GOALS}
    (baseline, teams) = rows(results, "no teams", goals, lambda seed: "tuning")
    assert baseline.meets is None
    gap = teams.columns["utilization_gap"]
    assert gap.values == pytest.approx((-1.0, -5.0)) and gap.misses == 1
    assert teams.columns["jain"].misses == 0 and teams.meets is False
    assert "✗ 1/2" in markdown([baseline, teams], 10)


def test_a_tiny_matrix_gives_every_column_for_every_row(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(matrix, "SEED_SETS", {"tuning": (0,), "held-out": (10,)})
    out_json, out_md = tmp_path / "m.json", tmp_path / "m.md"
    argv = ["--shapes", "synthetic,wide", "--jobs", "30", "--json", str(out_json)]
    assert sim_main(["matrix", *argv, "--markdown", str(out_md)]) == 0
    text = capsys.readouterr().out
    assert out_md.read_text().strip() == text.strip()
    table = [line for line in text.splitlines() if line.startswith("| ")]
    header, body = table[0], table[1:]
    for title, _ in COLUMNS.values():
        assert title in header
    assert len(body) == 2 * len(matrix.CONFIGURATIONS) * 2  # shapes x configurations x sets
    assert all(line.count(" | ") == header.count(" | ") for line in body)
    assert sum("**held-out** 10" in line for line in body) == len(body) // 2
    report = json.loads(out_json.read_text())
    assert len(report["cells"]) == len(body)
    teams = next(c for c in report["cells"] if c["configuration"] == "4 equal teams")
    quantiles = teams["metrics"]["delivered"]["wait_quantiles"]
    assert set(quantiles) == {"team-0", "team-1", "team-2", "team-3"}
    assert all("mean" in q for q in quantiles.values())
    assert teams["figures"]["mean_wait_ratio"] is not None


def test_lublin_needs_a_trace(capsys: pytest.CaptureFixture[str]) -> None:
    assert sim_main(["matrix", "--shapes", "lublin", "--jobs", "5"]) == 2
    assert "--trace" in capsys.readouterr().out


def test_cells_give_the_same_figures_in_a_process_pool() -> None:
    todo = matrix.cells(["wide"], [0, 1], 20, None)[:4]
    alone = [r.figures for r in matrix.run_cells(todo, 1)]
    assert [r.figures for r in matrix.run_cells(todo, 2)] == alone
