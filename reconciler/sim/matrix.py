"""python -m reconciler.sim matrix: every workload shape x seed x configuration, one table.

python -m reconciler.sim matrix --trace lublin_256.swf                 # every cell, 2,000 jobs
python -m reconciler.sim matrix --seeds tuning --shapes synthetic,wide --jobs 300
python -m reconciler.sim matrix --trace T --workers 2 --json m.json --markdown m.md

Each cell is one simulated run: a workload shape, a seed and a configuration (teams, decay,
preemption), planned by the loop's planner with the loop's defaults (`PlanOptions()`, the
planner group of the Settings) but for what the configuration names. The table has one row per
shape, configuration and seed set, each goal's column marked met or missed over every seed of
the set (reconciler/sim/goals.py); the JSON holds every cell's figures and full metrics.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from reconciler.sim import teams as team_split
from reconciler.sim.engine import CENSUS_SECONDS
from reconciler.sim.flags import whole_number
from reconciler.sim.goals import CellResult, Row, figures, markdown, rows
from reconciler.sim.runs import Teams, run
from reconciler.sim.workload import (
    SYNTHETIC_LOAD,
    WIDE_CAPACITY,
    Job,
    mark_resumable,
    offered_load,
    read_swf,
    synthetic,
    wide,
)
from specs.queues.config import DEFAULT_HALF_LIFE
from specs.settings.process import PlanOptions

TUNING_SEEDS = (0, 1, 2)
"""The seeds a candidate rule may be tuned on: look at these cells while choosing a rule."""

HELD_OUT_SEEDS = (10, 11, 12, 13, 14)
"""The seeds that judge a rule: never looked at while choosing one, only once it is chosen, so
that a rule which helps only the cells it was tuned on shows here as no help. Fixed before any
tuning; disjoint from TUNING_SEEDS."""

SEED_SETS: dict[str, tuple[int, ...]] = {"tuning": TUNING_SEEDS, "held-out": HELD_OUT_SEEDS}

SHAPES = ("lublin", "synthetic", "wide")
CAPACITY = {"lublin": 256, "synthetic": 256, "wide": WIDE_CAPACITY}
"""CPUs of the cluster each shape runs on: the Lublin trace's machine, the synthetic
workload's default, and the wide shape's own."""


@dataclass(frozen=True)
class Configuration:
    """What a cell sets beyond the loop's defaults: teams (none: one queue), the part of the
    work each team offers, the planner options that differ from `PlanOptions()`, and the share
    of resumable jobs."""

    name: str
    teams: Teams | None = None
    team_load: tuple[float, ...] | None = None
    changes: tuple[tuple[str, Any], ...] = ()  # (PlanOptions field, value)
    resumable_fraction: float = 0.0
    goals: tuple[str, ...] = ()  # the goals judged: keys of goals.GOALS

    def options(self) -> PlanOptions:
        return replace(PlanOptions(), **dict(self.changes))


BASELINE = Configuration("no teams")
"""One queue, no preemption: what every other configuration's utilization is measured
against."""

TEAM_GOALS = ("teams_utilization", "jain", "mean_wait_ratio", "p99_wait_ratio")
PREEMPTION_GOALS = ("preemption_utilization", "urgent_p95", "wasted", "max_preemptions")

CONFIGURATIONS = (
    BASELINE,
    Configuration("4 equal teams", Teams(4, (1.0,) * 4), goals=TEAM_GOALS),
    Configuration(
        "teams 1:1:1:3, decay",
        Teams(4, (1.0, 1.0, 1.0, 3.0), half_life=DEFAULT_HALF_LIFE),
        # Each team offers its weight's part of the work, so the weight-3 team is as saturated
        # as the others and its share is the order's, not its queue running dry.
        team_load=(1.0, 1.0, 1.0, 3.0),
        goals=(*TEAM_GOALS, "weighted_share"),
    ),
    Configuration(
        "preempt ≥ 7, half resumable",
        changes=(("preemption", "LowerPriority"), ("preemption_min_preemptor_priority", 7)),
        resumable_fraction=0.5,
        goals=PREEMPTION_GOALS,
    ),
    Configuration(
        "preempt any lower, cap 3",
        changes=(("preemption", "LowerPriority"), ("preemption_max_per_task", 3)),
        goals=PREEMPTION_GOALS,
    ),
)


@dataclass(frozen=True)
class Cell:
    shape: str
    seed: int
    configuration: Configuration
    jobs: int
    trace: Path | None


def workload(shape: str, seed: int, jobs: int, trace: Path | None) -> list[Job]:
    """The shape's jobs for a seed: the Lublin trace's first `jobs` (the seed draws timeouts
    and priorities), or the seeded synthetic or wide workload."""
    capacity = CAPACITY[shape]
    if shape == "lublin":
        if trace is None:
            raise ValueError("the lublin shape reads a trace: pass --trace PATH")
        return read_swf(trace, limit=jobs, seed=seed, capacity_cpu=capacity)
    if shape == "synthetic":
        return synthetic(jobs, seed=seed, capacity_cpu=capacity, load=SYNTHETIC_LOAD)
    if shape == "wide":
        return wide(jobs, seed=seed, capacity_cpu=capacity)
    raise ValueError(f"unknown shape {shape!r}; choose from {', '.join(SHAPES)}")


def run_cell(cell: Cell) -> CellResult:
    config = cell.configuration
    capacity = CAPACITY[cell.shape]
    jobs = workload(cell.shape, cell.seed, cell.jobs, cell.trace)
    jobs = mark_resumable(jobs, config.resumable_fraction, cell.seed)
    if config.teams is not None:
        jobs = team_split.split(jobs, config.teams.count, config.team_load)
    options = config.options()
    metrics = run((jobs, options.policy, capacity, config.teams, options, None, CENSUS_SECONDS))
    weights = config.teams.weights if config.teams is not None else ()
    return CellResult(
        cell.shape,
        cell.seed,
        config.name,
        capacity,
        offered_load(jobs, capacity),
        figures(metrics, weights),
        metrics.to_json(),
    )


def cells(shapes: Sequence[str], seeds: Sequence[int], jobs: int, trace: Path | None) -> list[Cell]:
    return [
        Cell(shape, seed, config, jobs, trace)
        for shape in shapes
        for config in CONFIGURATIONS
        for seed in seeds
    ]


def run_cells(todo: Sequence[Cell], workers: int) -> list[CellResult]:
    """Every cell, in `workers` processes; the results do not depend on how many."""
    if workers > 1 and len(todo) > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(run_cell, todo))
    return [run_cell(cell) for cell in todo]


def seed_set_of(seed: int) -> str:
    return next(name for name, seeds in SEED_SETS.items() if seed in seeds)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m reconciler.sim matrix", description=__doc__.splitlines()[0]
    )
    p.add_argument("--seeds", choices=[*SEED_SETS, "all"], default="all")
    p.add_argument(
        "--shapes",
        type=_shapes,
        default=SHAPES,
        metavar="A,B",
        help=f"comma-separated, from {', '.join(SHAPES)} (default all)",
    )
    p.add_argument("--jobs", type=whole_number, default=2000, help="jobs per cell (default 2000)")
    p.add_argument("--trace", type=Path, default=None, metavar="PATH", help="SWF for lublin")
    p.add_argument("--workers", type=whole_number, default=1, help="cells run in parallel (1)")
    p.add_argument("--json", type=Path, default=None, help="also write every cell here")
    p.add_argument("--markdown", type=Path, default=None, help="also write the table here")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if "lublin" in args.shapes and (args.trace is None or not args.trace.is_file()):
        print(
            "the lublin shape reads a trace: pass --trace PATH (an SWF file), or leave it out "
            "of --shapes"
        )
        return 2
    seeds = sum(SEED_SETS.values(), ()) if args.seeds == "all" else SEED_SETS[args.seeds]
    results = run_cells(cells(args.shapes, seeds, args.jobs, args.trace), args.workers)
    table_rows = rows(
        results, BASELINE.name, {c.name: c.goals for c in CONFIGURATIONS}, seed_set_of
    )
    text = markdown(table_rows, args.jobs)
    print(text)
    if args.markdown is not None:
        args.markdown.write_text(text + "\n")
    if args.json is not None:
        args.json.write_text(json.dumps(report(args, results, table_rows), indent=2) + "\n")
    return 0


def report(
    args: argparse.Namespace, results: Sequence[CellResult], table_rows: Sequence[Row]
) -> dict[str, object]:
    return {
        "jobs": args.jobs,
        "shapes": list(args.shapes),
        "capacity": {shape: CAPACITY[shape] for shape in args.shapes},
        "seed_sets": {name: list(seeds) for name, seeds in SEED_SETS.items()},
        "configurations": [
            {
                "name": c.name,
                "teams": None if c.teams is None else asdict(c.teams),
                "team_load": c.team_load,
                "options": dict(c.changes),
                "resumable_fraction": c.resumable_fraction,
                "goals": list(c.goals),
            }
            for c in CONFIGURATIONS
        ],
        "rows": [asdict(row) for row in table_rows],
        "cells": [{**asdict(r), "seed_set": seed_set_of(r.seed)} for r in results],
    }


def _shapes(text: str) -> tuple[str, ...]:
    names = tuple(s.strip() for s in text.split(",") if s.strip())
    unknown = [s for s in names if s not in SHAPES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"shapes from {', '.join(SHAPES)} (got {text!r})")
    return names


if __name__ == "__main__":
    sys.exit(main())
