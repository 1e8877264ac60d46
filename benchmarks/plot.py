"""Cost against folder size on log-log axes, as an SVG for docs/ (from benchmarks.scale's JSON).

python -m benchmarks.plot            # benchmarks/results/scale.json (+ busy.json) -> docs/scale.svg
python -m benchmarks.plot --results /tmp/scale.json --out docs/scale.svg

Plain SVG written here: the project has no plotting dependency, and a few lines, dots and
labels on two logarithmic axes do not need one.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from benchmarks.common import RESULTS

DOCS = Path(__file__).resolve().parent.parent / "docs"
PANEL_W, PANEL_H = 450, 330
MARGIN_L, MARGIN_R, MARGIN_T, MARGIN_B = 64, 30, 40, 48
LEGEND_H = 112


@dataclass(frozen=True)
class Series:
    label: str
    color: str
    points: tuple[tuple[float, float], ...]  # (specs, value), value > 0
    goals: tuple[tuple[float, float], ...] = ()  # (specs, value) the goals ask for


@dataclass(frozen=True)
class Panel:
    title: str
    unit: str
    series: tuple[Series, ...]


def _points(rows: Sequence[Mapping[str, Any]], key: str, scale: float) -> tuple[Any, ...]:
    found = [(float(r["specs"]), float(r[key]) * scale) for r in rows if key in r]
    return tuple((x, y) for x, y in sorted(found) if x > 0 and y > 0)  # a log axis has no zero


# The scale goals (docs/benchmarks.md), (specs, value) in each panel's unit.
JOB_END_GOALS = ((1e4, 10.0), (5e4, 30.0))  # ms of CPU, the pass when a job starts or ends
CHANGED_GOALS = ((1e4, 50.0),)  # ms, the pass after 1 % of the specs changed
# serve at <= 5 % of a core with a job ending every second: 50 ms of CPU per ended job.
BUSY_GOAL_MS_PER_JOB = 50.0
BUSY_GOALS = ((1e4, BUSY_GOAL_MS_PER_JOB),)
COLD_GOALS = ((1e4, 1.5), (5e4, 8.0))  # s of CPU, the first pass
SIDECARS_GOALS = ((5e4, 15.0),)  # s of CPU until every sidecar is on disk
RSS_GOALS = ((5e4, 300.0),)  # MB


def _busy(busy: Mapping[str, Any] | None, ray: str) -> list[Mapping[str, Any]]:
    return [r for r in (busy or {}).get("rows", []) if r.get("ray") == ray]


def panels(result: Mapping[str, Any], busy: Mapping[str, Any] | None = None) -> list[Panel]:
    """What the doc shows, against the scale goals: CPU per event (a job's end, 1 % of the
    specs changed, a job ended in the busy steady state), start-up, and resident memory.
    `result`: benchmarks.scale's; `busy`: benchmarks.busy's, at one size or several."""
    rows, served = result.get("rows", []), result.get("served", [])
    fake, head = _busy(busy, "fake"), _busy(busy, "head")
    event = (
        Series(
            "pass when a job ends and the next starts",
            "#2ca02c",
            _points(rows, "job_end_pass_cpu_ms", 1),
            JOB_END_GOALS,
        ),
        Series(
            "pass after 1 % of the specs changed",
            "#d62728",
            _points(rows, "changed_1pct_pass_cpu_ms", 1),
            CHANGED_GOALS,
        ),
        Series(
            "busy serve, per ended job (fake Ray)",
            "#8c564b",
            _points(fake, "cpu_s_per_ended_job", 1000),
            BUSY_GOALS,
        ),
        Series(
            "busy serve, per ended job (real head)",
            "#e377c2",
            _points(head, "cpu_s_per_ended_job", 1000),
            BUSY_GOALS,
        ),
    )
    start = (
        Series(
            "cold start: the first pass",
            "#1f77b4",
            _points(rows, "cold_start_cpu_s", 1),
            COLD_GOALS,
        ),
        Series(
            "serve: every sidecar on disk",
            "#ff7f0e",
            _points(served, "sidecars_written_cpu_s", 1),
            SIDECARS_GOALS,
        ),
    )
    memory = (
        Series("serve, sidecars written (RSS)", "#ff7f0e", _points(served, "rss_mb", 1), RSS_GOALS),
        Series("busy serve (fake Ray)", "#8c564b", _points(fake, "rss_mb", 1)),
        Series("busy serve (real head)", "#e377c2", _points(head, "rss_mb", 1)),
        Series("in-process benchmark, peak", "#1f77b4", _points(rows, "peak_rss_mb", 1)),
    )
    drawn = [
        Panel("CPU per event", "CPU ms", tuple(s for s in event if s.points)),
        Panel("start-up", "CPU s", tuple(s for s in start if s.points)),
        Panel("memory (RSS)", "MB", tuple(s for s in memory if s.points)),
    ]
    return [p for p in drawn if p.series]


class LogAxis:
    """Whole decades around the values, mapped linearly in log10 onto [low, high] pixels."""

    def __init__(self, values: Sequence[float], low: float, high: float) -> None:
        self.first = math.floor(math.log10(min(values)))
        self.last = max(math.ceil(math.log10(max(values))), self.first + 1)
        self.low, self.high = low, high

    def __call__(self, value: float) -> float:
        share = (math.log10(value) - self.first) / (self.last - self.first)
        return self.low + share * (self.high - self.low)

    def decades(self) -> list[float]:
        return [10.0**e for e in range(self.first, self.last + 1)]


def _num(value: float) -> str:
    if value >= 1000:
        return f"{value:,.0f}"
    return f"{value:g}"


def _goal_words(goals: Sequence[tuple[float, float]]) -> str:
    """`goals` for the legend: ' (◇ 10 at 10k, 30 at 50k)'."""
    if not goals:
        return ""
    return " (◇ " + ", ".join(f"{_num(y)} at {x / 1000:g}k" for x, y in goals) + ")"


def _panel(panel: Panel, left: float) -> list[str]:
    values = [p for s in panel.series for p in (*s.points, *s.goals)]
    if not values:
        return []
    x0, x1 = left + MARGIN_L, left + PANEL_W - MARGIN_R
    y0, y1 = MARGIN_T + PANEL_H - MARGIN_T - MARGIN_B, MARGIN_T  # y0 is the bottom
    xs = LogAxis([x for x, _ in values], x0, x1)
    ys = LogAxis([y for _, y in values], y0, y1)
    out = [f'<text x="{(x0 + x1) / 2:.1f}" y="22" class="title">{escape(panel.title)}</text>']
    for tick in xs.decades():
        x = xs(tick)
        out.append(f'<line x1="{x:.1f}" y1="{y1}" x2="{x:.1f}" y2="{y0}" class="grid"/>')
        out.append(f'<text x="{x:.1f}" y="{y0 + 16}" class="tick">{_num(tick)}</text>')
    for tick in ys.decades():
        y = ys(tick)
        out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" class="grid"/>')
        out.append(f'<text x="{x0 - 6}" y="{y + 4:.1f}" class="ytick">{_num(tick)}</text>')
    out.append(f'<rect x="{x0}" y="{y1}" width="{x1 - x0}" height="{y0 - y1}" class="frame"/>')
    out.append(
        f'<text x="{(x0 + x1) / 2:.1f}" y="{y0 + 36}" class="label">specs in the folder</text>'
    )
    mid = (y0 + y1) / 2
    out.append(
        f'<text x="{left + 16}" y="{mid:.1f}" class="label" '
        f'transform="rotate(-90 {left + 16} {mid:.1f})">{escape(panel.unit)}</text>'
    )
    drawn_at: dict[tuple[int, int], int] = {}
    for series in panel.series:
        coords = [(xs(x), ys(y)) for x, y in series.points]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
        label = escape(series.label)
        out.append(
            f'<polyline points="{path}" stroke="{series.color}" class="series" '
            f'data-label="{label}"/>'
        )
        out += [
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{series.color}"/>' for x, y in coords
        ]
        for goal in series.goals:
            gx, gy = xs(goal[0]), ys(goal[1])
            # Goals at one spot (CHANGED_GOALS and BUSY_GOALS share one) are drawn as nested
            # diamonds, so that every colour shows.
            spot = (round(gx), round(gy))
            r = 5 + 3 * drawn_at.get(spot, 0)
            drawn_at[spot] = drawn_at.get(spot, 0) + 1
            out.append(
                f'<path d="M{gx - r:.1f},{gy:.1f} L{gx:.1f},{gy - r:.1f} L{gx + r:.1f},{gy:.1f} '
                f'L{gx:.1f},{gy + r:.1f} Z" stroke="{series.color}" class="goal" '
                f'data-label="{label} goal"/>'
            )
    legend_y = PANEL_H + 8
    for i, series in enumerate(panel.series):
        y = legend_y + 16 * i
        out.append(
            f'<line x1="{x0}" y1="{y}" x2="{x0 + 22}" y2="{y}" stroke="{series.color}" '
            'stroke-width="2"/>'
        )
        text = series.label + _goal_words(series.goals)
        out.append(f'<text x="{x0 + 28}" y="{y + 4}" class="legend">{escape(text)}</text>')
    return out


def render(result: Mapping[str, Any], note: str = "", busy: Mapping[str, Any] | None = None) -> str:
    drawn = panels(result, busy)
    width, height = PANEL_W * len(drawn), PANEL_H + LEGEND_H
    body: list[str] = []
    for i, panel in enumerate(drawn):
        body += _panel(panel, PANEL_W * i)
    body.append(
        f'<text x="{MARGIN_L}" y="{height - 8}" class="note">'
        f"log-log; ◇ a scale goal (2 cores, as served). {escape(note)}</text>"
    )
    style = (
        "text{font-family:sans-serif;fill:#222}.title{font-size:14px;text-anchor:middle}"
        ".label{font-size:12px;text-anchor:middle}.tick{font-size:11px;text-anchor:middle}"
        ".ytick{font-size:11px;text-anchor:end}.legend{font-size:12px}.note{font-size:11px}"
        ".grid{stroke:#ddd;stroke-width:1}.frame{fill:none;stroke:#888}"
        ".series{fill:none;stroke-width:2}.goal{fill:none;stroke-width:1.5}"
    )
    return "\n".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}">',
            f"<style>{style}</style>",
            f'<rect width="{width}" height="{height}" fill="white"/>',
            *body,
            "</svg>",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS / "scale.json")
    parser.add_argument("--out", type=Path, default=DOCS / "scale.svg")
    parser.add_argument("--note", default="", help="a line under the plot: where the data is from")
    parser.add_argument(
        "--busy", type=Path, default=RESULTS / "busy.json", help="benchmarks.busy's JSON, if any"
    )
    args = parser.parse_args(argv)
    result = json.loads(args.results.read_text())
    busy = json.loads(args.busy.read_text()) if args.busy.is_file() else None
    args.out.write_text(render(result, args.note, busy))
    print(f"plot: {args.out}")


if __name__ == "__main__":
    main()
