"""The scheduling goals of the benchmark matrix: each cell's figures, read from the run's
metrics (reconciler/sim/metrics.py, reconciler/sim/teams.py), and the table that judges them.

A row is one shape, configuration and seed set; each judged column is met only if every seed
of the set meets it, since a goal holds on every cell or not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from reconciler.sim.metrics import Metrics
from reconciler.sim.report import duration
from reconciler.sim.teams import team_name
from reconciler.sim.workload import PRIORITIES

TOP_PRIORITY = PRIORITIES - 1
"""The urgent work of the preemption goal: its p95 wait is judged."""


@dataclass(frozen=True)
class Figures:
    """What one cell is judged on (None: not measured there, as fairness without teams)."""

    utilization: float
    jain: float | None  # of the teams' weight-normalised shares over the contended time
    weighted_share: float | None  # heaviest team's contended share / its weight's share
    mean_wait_ratio: float | None  # equal-weight teams: the longest mean wait / the shortest
    p99_wait_ratio: float | None  # the same of their p99 waits
    urgent_p95: float | None  # p95 wait of priority TOP_PRIORITY, seconds
    wasted: float  # CPU time of preempted runs over all CPU time run
    max_preemptions: int  # of one job


@dataclass(frozen=True)
class CellResult:
    shape: str
    seed: int
    configuration: str
    capacity: int
    offered_load: float
    figures: Figures
    metrics: dict[str, object]


def _ratio(values: Sequence[float]) -> float | None:
    """Largest over smallest; 1 when all are 0, infinite when only the smallest is."""
    if not values:
        return None
    low, high = min(values), max(values)
    if high <= 0:
        return 1.0
    return high / low if low > 0 else float("inf")


def equal_weight_teams(weights: Sequence[float]) -> list[str]:
    """The teams of the most common weight (the lowest on a tie): the ones owed equal waits."""
    common = min(set(weights), key=lambda w: (-weights.count(w), w))
    return [team_name(k) for k, w in enumerate(weights) if w == common]


def figures(metrics: Metrics, weights: Sequence[float]) -> Figures:
    """A cell's figures from its metrics; `weights`: the teams' (empty without teams)."""
    urgent = metrics.waits.get(TOP_PRIORITY)
    alone = Figures(
        utilization=metrics.utilization,
        jain=None,
        weighted_share=None,
        mean_wait_ratio=None,
        p99_wait_ratio=None,
        urgent_p95=urgent.p95 if urgent is not None else None,
        wasted=metrics.wasted_fraction,
        max_preemptions=metrics.max_preemptions_per_job,
    )
    if not weights or metrics.delivered is None:
        return alone
    contended = metrics.delivered["contended_shares"]
    quantiles = metrics.delivered["wait_quantiles"]
    assert isinstance(contended, dict) and isinstance(quantiles, dict)
    share: float | None = None
    if len(set(weights)) > 1:
        heaviest = max(range(len(weights)), key=lambda k: weights[k])
        share = contended[team_name(heaviest)] / (weights[heaviest] / sum(weights))
    equal = equal_weight_teams(list(weights))
    return replace(
        alone,
        jain=metrics.jain_index,
        weighted_share=share,
        mean_wait_ratio=_ratio([quantiles[t]["mean"] for t in equal]),
        p99_wait_ratio=_ratio([quantiles[t]["p99"] for t in equal]),
    )


@dataclass(frozen=True)
class Goal:
    column: str
    text: str
    met: Callable[[float], bool]


GOALS: dict[str, Goal] = {
    "teams_utilization": Goal("utilization_gap", "≥ -2 pts", lambda v: v >= -2.0),
    "preemption_utilization": Goal("utilization_gap", "≥ -3 pts", lambda v: v >= -3.0),
    "jain": Goal("jain", "≥ 0.95", lambda v: v >= 0.95),
    "weighted_share": Goal("weighted_share", "0.85 to 1.15x", lambda v: 0.85 <= v <= 1.15),
    "mean_wait_ratio": Goal("mean_wait_ratio", "≤ 1.5x", lambda v: v <= 1.5),
    "p99_wait_ratio": Goal("p99_wait_ratio", "≤ 2x", lambda v: v <= 2.0),
    "urgent_p95": Goal("urgent_p95", "≤ 60 s", lambda v: v <= 60.0),
    "wasted": Goal("wasted", "≤ 5 %", lambda v: v <= 0.05),
    "max_preemptions": Goal("max_preemptions", "≤ 3", lambda v: v <= 3),
}


def _pct(v: float) -> str:
    return f"{v:.1%}".replace("%", " %")


def _times(v: float) -> str:
    return "∞" if v == float("inf") else f"{v:.2f}x"


# column -> (title with its goals, format); in table order
COLUMNS: dict[str, tuple[str, Callable[[float], str]]] = {
    "utilization": ("utilization", _pct),
    "utilization_gap": (
        "vs no teams, pts (teams ≥ -2, preemption ≥ -3)",
        lambda v: f"{v:+.1f}",
    ),
    "jain": ("Jain (≥ 0.95)", lambda v: f"{v:.3f}"),
    "weighted_share": ("weight-3 share / weight (0.85 to 1.15x)", _times),
    "mean_wait_ratio": ("equal teams' mean wait, max / min (≤ 1.5x)", _times),
    "p99_wait_ratio": ("equal teams' p99 wait, max / min (≤ 2x)", _times),
    "urgent_p95": (f"p95 wait, priority {TOP_PRIORITY} (≤ 60 s)", duration),
    "wasted": ("wasted (≤ 5 %)", _pct),
    "max_preemptions": ("most preemptions of a job (≤ 3)", lambda v: f"{v:g}"),
}


@dataclass(frozen=True)
class Column:
    """One figure of a row, a value per seed, and its goal if this row is judged on it."""

    values: tuple[float | None, ...]
    goal: str | None = None  # a key of GOALS
    misses: int = 0  # seeds that miss the goal (a seed without the figure misses it)


@dataclass(frozen=True)
class Row:
    shape: str
    configuration: str
    seed_set: str
    seeds: tuple[int, ...]
    columns: dict[str, Column]
    meets: bool | None  # every goal on every seed; None: nothing judged (the baseline)


def rows(
    results: Sequence[CellResult],
    baseline: str,
    goals: Mapping[str, Sequence[str]],
    seed_set_of: Callable[[int], str],
) -> list[Row]:
    """One row per shape, configuration and seed set, in the order the cells came; utilization
    is also given against the `baseline` configuration's on the same shape and seed."""
    base = {
        (r.shape, r.seed): r.figures.utilization for r in results if r.configuration == baseline
    }
    groups: dict[tuple[str, str, str], list[CellResult]] = {}
    for r in results:
        groups.setdefault((r.shape, r.configuration, seed_set_of(r.seed)), []).append(r)
    out = []
    for (shape, name, seed_set), cells in groups.items():
        values: dict[str, list[float | None]] = {key: [] for key in COLUMNS}
        for cell in cells:
            f = cell.figures
            reference = None if name == baseline else base.get((shape, cell.seed))
            gap = None if reference is None else 100 * (f.utilization - reference)
            got = {**{k: getattr(f, k) for k in COLUMNS if k != "utilization_gap"}}
            got["utilization_gap"] = gap
            for key in COLUMNS:
                values[key].append(got[key])
        judged = {GOALS[g].column: g for g in goals.get(name, ())}
        columns = {key: _column(tuple(v), judged.get(key)) for key, v in values.items()}
        meets = None if not judged else all(columns[c].misses == 0 for c in judged)
        seeds = tuple(c.seed for c in cells)
        out.append(Row(shape, name, seed_set, seeds, columns, meets))
    return out


def _column(values: tuple[float | None, ...], goal: str | None) -> Column:
    if goal is None:
        return Column(values)
    met = GOALS[goal].met
    return Column(values, goal, sum(1 for v in values if v is None or not met(v)))


def _cell(key: str, column: Column) -> str:
    present = [v for v in column.values if v is not None]
    fmt = COLUMNS[key][1]
    if not present:
        text = "—"
    elif min(present) == max(present):
        text = fmt(min(present))
    else:
        text = f"{fmt(min(present))} to {fmt(max(present))}"
    if column.goal is None:
        return text
    if column.misses == 0:
        return f"{text} ✓"
    return f"**{text} ✗ {column.misses}/{len(column.values)}**"


def markdown(table_rows: Sequence[Row], jobs: int) -> str:
    """The table: each figure's range over the seeds of the row's set, ✓ where every seed meets
    the row's goal for it, ✗ n/m where n of its m seeds miss it; held-out rows in bold."""
    titles = [title for title, _ in COLUMNS.values()]
    lines = [
        f"{jobs} jobs a cell; each figure: min to max over the row's seeds; ✓: every seed meets "
        "the row's goal, ✗ n/m: n of its m seeds miss it; held-out seed sets in bold.",
        "",
        "| shape | configuration | seeds | " + " | ".join(titles) + " | goals met |",
        "|---|---|---|" + "---|" * len(titles) + "---|",
    ]
    for row in table_rows:
        seeds = ", ".join(str(s) for s in row.seeds)
        label = (
            f"**{row.seed_set}** {seeds}"
            if row.seed_set == "held-out"
            else f"{row.seed_set} {seeds}"
        )
        cells = [_cell(k, row.columns[k]) for k in COLUMNS]
        met = "baseline" if row.meets is None else ("✓" if row.meets else "✗")
        lines.append(
            f"| {row.shape} | {row.configuration} | {label} | " + " | ".join(cells) + f" | {met} |"
        )
    return "\n".join(lines)
