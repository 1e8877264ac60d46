"""The service goals' table (docs/benchmarks.md), filled from the benchmarks' JSON results.

python -m benchmarks.summary                     # reads benchmarks/results/*.json
python -m benchmarks.summary --results DIR

A row whose benchmark did not run, or ran at another size, says so instead of a number.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import RESULTS

Result = Mapping[str, Any]
TIMES = "\N{MULTIPLICATION SIGN}"


def _load(folder: Path, name: str) -> Result | None:
    path = folder / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _at(rows: Sequence[Result], size: int) -> tuple[Result | None, str]:
    """The row for `size` specs, else the largest one run, with a note saying so."""
    if not rows:
        return None, ""
    exact = [r for r in rows if r["specs"] == size]
    if exact:
        return exact[0], ""
    largest = max(rows, key=lambda r: int(r["specs"]))
    return largest, f" (at {largest['specs']:,} specs, not {size:,})"


def _latency(result: Result | None, method: str) -> str:
    rows = [r for r in (result or {}).get("rows", []) if r["path"].startswith(f"serve, {method}")]
    if not rows:
        return "not run"
    # The goals' size when the run had several (benchmarks.busy runs 1k, 10k and 50k).
    r = next((row for row in rows if row.get("specs") == 10_000), rows[0])
    return f"p50 {r['p50_ms']:.0f} ms, p99 {r['p99_ms']:.0f} ms ({r['drops']} writes)"


def _throughput(result: Result | None) -> str:
    rows = (result or {}).get("rows", [])
    if not rows:
        return "not run"
    # The goals' size when the run had several (benchmarks.busy runs 1k, 10k and 50k).
    r = next((row for row in rows if row.get("specs") == 10_000), rows[0])
    via = r.get("side_b", "in-process")
    spread = ""
    if "ratio_min" in r:
        spread = f", median of {r['rounds']} ABBA rounds, {r['ratio_min']:.2f}-{r['ratio_max']:.2f}"
    return (
        f"{r['ratio_b_over_a']:.2f}{TIMES} raw Ray ({r['jobs']} jobs, {r['cpus']} CPUs, via {via}"
        f"{spread})"
    )


def _steady(row: Result | None, note: str) -> str:
    if not row:
        return "not run"
    ms = row["steady_pass_cpu_ms"]
    text = f"{ms:.2f} ms CPU" if ms < 10 else f"{ms:,.0f} ms CPU"
    if "steady_unskipped_pass_cpu_ms" in row:  # results without still passes lack it
        text += (
            f" ({row.get('steady_passes_skipped', 0):.0%} of them still passes; "
            f"{row['steady_unskipped_pass_cpu_ms']:,.0f} ms when Ray's answer changes)"
        )
    return text + note


def _busy(result: Result | None, ray: str) -> str:
    rows = [r for r in (result or {}).get("rows", []) if r.get("ray") == ray]
    if not rows:
        return "not run"
    # The goals' size when the run had several (benchmarks.busy runs 1k, 10k and 50k).
    r = next((row for row in rows if row.get("specs") == 10_000), rows[0])
    return (
        f"{r['cpu_pct_of_core']:.1f} % of a core, {r['cpu_s_per_ended_job']:.2f} s CPU per ended "
        f"job, {r['jobs_ended_per_s']:.2f} jobs/s, {r['rss_mb']:.0f} MB (at {r['specs']:,} specs, "
        f"load {r['load_1min']:.1f})"
    )


def _census(result: Result | None) -> str:
    rows = (result or {}).get("rows", [])
    if not rows:
        return "not run"
    r = min(rows, key=lambda row: int(row["running_tasks"]))
    return (
        f"{r['core_share_at_15s']:.1%} of a core at one census every 15 s "
        f"({r['cpu_seconds_per_poll']:.2f} s CPU, {r['requests_per_poll']} requests, "
        f"{r['bytes_per_poll'] / 2**20:.0f} MiB a census; {r['jobs']:,} jobs, "
        f"{r['running_tasks']:,} running tasks)"
    )


def lines(folder: Path) -> list[str]:
    latency = _load(folder, "latency")
    scale = _load(folder, "scale") or {}
    row10k, note10k = _at(scale.get("rows", []), 10_000)
    row50k, note50k = _at(scale.get("served", []), 50_000)

    def pass_ms(key: str) -> str:
        return f"{row10k[key]:,.0f} ms CPU{note10k}" if row10k else "not run"

    table = [
        (
            "Drop→submission, atomic rename through `serve`",
            _latency(latency, "rename"),
            "p50 ≤ 100 ms, p99 ≤ 250 ms",
        ),
        (
            "Drop→submission, HTTP PUT through `serve`",
            _latency(latency, "http"),
            "p50 ≤ 100 ms, p99 ≤ 250 ms",
        ),
        (
            "Throughput against raw Ray, same head (goal shape: 16 jobs, 4 CPUs)",
            _throughput(_load(folder, "throughput")),
            f"≥ 0.95{TIMES}",
        ),
        ("10,000 specs: steady pass", _steady(row10k, note10k), "≤ 20 ms"),
        (
            "10,000 specs: cold start",
            f"{row10k['cold_start_s']:,.1f} s ({row10k['cold_start_cpu_s']:,.1f} s CPU){note10k}"
            if row10k
            else "not run",
            "≤ 2 s",
        ),
        ("10,000 specs: 1 % changed", pass_ms("changed_1pct_pass_cpu_ms"), "≤ 100 ms"),
        (
            "50,000 specs: `serve` idle CPU",
            f"{row50k['idle_cpu_pct_of_core']:.1f} % of a core{note50k}" if row50k else "not run",
            "≤ 2 %",
        ),
        (
            "50,000 specs: `serve` RSS (now / peak)",
            f"{row50k['rss_mb']:,.0f} / {row50k['peak_rss_mb']:,.0f} MB{note50k}"
            if row50k
            else "not run",
            "≤ 500 MB",
        ),
    ]
    busy = _load(folder, "busy")
    for ray, what in (("fake", "fake Ray in serve"), ("head", "real head, `sleep 3` jobs")):
        table.append(
            (
                f"Busy steady state, 10,000 waiting tasks, a job ending every second ({what})",
                _busy(busy, ray),
                "≤ 5 % of a core",
            )
        )
    table.append(
        (
            "Census of what 1,000 live Ray jobs hold (`serve`'s side)",
            _census(_load(folder, "census")),
            "≤ 2 % of a core",
        )
    )
    out = ["| measure | measured | goal |", "|---|---|---|"]
    out += [f"| {what} | {value} | {goal} |" for what, value, goal in table]
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    print("\n".join(lines(args.results)))


if __name__ == "__main__":
    main()
