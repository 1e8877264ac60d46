"""The benchmarks' own tools: /proc readings, the SVG plot, the summary table, the runner."""

from __future__ import annotations

import importlib
import json
import math
import os
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from benchmarks import __main__ as runner
from benchmarks import plot, procstat, summary

SVG = "{http://www.w3.org/2000/svg}"


def test_cpu_seconds_follow_the_process_own_clock() -> None:
    before, own = procstat.cpu_seconds(os.getpid()), time.process_time()
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:  # burn CPU
        pass
    spent = procstat.cpu_seconds(os.getpid()) - before
    assert spent == pytest.approx(time.process_time() - own, abs=0.05)
    assert spent >= 0.25


def test_memory_is_read_in_megabytes() -> None:
    ballast = bytearray(64 * 2**20)
    ballast[::4096] = b"x" * len(ballast[::4096])  # touch every page, so it is resident
    found = procstat.memory(os.getpid())
    assert found.rss_mb >= 64 and found.peak_rss_mb >= found.rss_mb
    del ballast


def scale_result() -> dict[str, object]:
    sizes = [100, 1_000, 10_000]
    rows = [
        {
            "specs": n,
            "cold_start_s": n / 500,
            "cold_start_cpu_s": n / 1000,
            "full_rescan_pass_cpu_ms": n / 10,
            "steady_pass_cpu_ms": n / 20,
            "job_end_pass_cpu_ms": n / 20,
            "changed_1pct_pass_cpu_ms": n / 5,
            "peak_rss_mb": 90 + n / 100,
        }
        for n in sizes
    ]
    served = [
        {
            "specs": n,
            "idle_cpu_pct_of_core": n / 1000,
            "sidecars_written_cpu_s": n / 500,
            "rss_mb": 100.0,
            "peak_rss_mb": 110.0,
        }
        for n in sizes
    ]
    return {"rows": rows, "served": served}


def test_the_plot_has_log_log_axes() -> None:
    root = ET.fromstring(plot.render(scale_result(), "test"))
    lines = {el.get("data-label"): el for el in root.iter(f"{SVG}polyline")}
    assert set(lines) == {
        "pass when a job ends and the next starts",
        "pass after 1 % of the specs changed",
        "cold start: the first pass",
        "serve: every sidecar on disk",
        "serve, sidecars written (RSS)",
        "in-process benchmark, peak",
    }
    label = "pass when a job ends and the next starts"
    points = [tuple(map(float, p.split(","))) for p in lines[label].get("points", "").split()]
    assert len(points) == 3
    (x1, y1), (x2, y2), (x3, y3) = points
    # Sizes and values grow tenfold each step: on log axes, the steps are equal.
    assert x2 - x1 == pytest.approx(x3 - x2, abs=0.2) and x2 > x1
    assert y1 - y2 == pytest.approx(y2 - y3, abs=0.2) and y2 < y1  # SVG's y grows downwards
    goals = [el.get("data-label") for el in root.iter(f"{SVG}path")]
    # The goals for that pass: 10 ms at 10,000 specs and 30 ms at 50,000.
    assert goals.count(f"{label} goal") == 2
    assert "serve, sidecars written (RSS) goal" in goals
    legend = [el.text for el in root.iter(f"{SVG}text") if el.get("class") == "legend"]
    assert f"{label} (◇ 10 at 10k, 30 at 50k)" in legend


def test_the_log_axis_spans_whole_decades() -> None:
    axis = plot.LogAxis([3.0, 420.0], 0, 300)
    assert axis.decades() == [1.0, 10.0, 100.0, 1000.0]
    assert axis(1.0) == 0 and axis(1000.0) == 300
    assert axis(math.sqrt(10)) == pytest.approx(50)


def test_the_summary_fills_the_issue_table(tmp_path: Path) -> None:
    (tmp_path / "scale.json").write_text(json.dumps(scale_result()))
    latency = {
        "rows": [
            {
                "path": "serve, rename -> Ray start_time",
                "drops": 100,
                "p50_ms": 81.0,
                "p99_ms": 240.0,
            },
            {
                "path": "serve, http -> Ray start_time",
                "drops": 100,
                "p50_ms": 95.0,
                "p99_ms": 300.0,
            },
        ]
    }
    (tmp_path / "latency.json").write_text(json.dumps(latency))
    table = "\n".join(summary.lines(tmp_path))
    assert "p50 81 ms, p99 240 ms (100 writes)" in table
    assert "p50 95 ms, p99 300 ms" in table
    assert "| 10,000 specs: steady pass | 500 ms CPU |" in table  # 10,000 / 20
    rows = json.loads((tmp_path / "scale.json").read_text())
    rows["rows"][-1].update(
        steady_pass_cpu_ms=0.25, steady_passes_skipped=1.0, steady_unskipped_pass_cpu_ms=210.4
    )
    (tmp_path / "scale.json").write_text(json.dumps(rows))
    table = "\n".join(summary.lines(tmp_path))
    assert (
        "| 10,000 specs: steady pass | 0.25 ms CPU (100% of them still passes; "
        "210 ms when Ray's answer changes) |"
    ) in table
    assert "10.0 % of a core (at 10,000 specs, not 50,000)" in table
    assert "Throughput against raw Ray, same head (goal shape: 16 jobs, 4 CPUs) | not run" in table


def test_the_runner_runs_a_benchmark_and_plots_nothing_without_scale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plotted = tmp_path / "scale.svg"
    code = runner.main(
        ["--quick", "--only", "history", "--results", str(tmp_path), "--plot", str(plotted)]
    )
    assert code == 0
    rows = json.loads((tmp_path / "history.json").read_text())["rows"]
    assert {r["history_jobs"] for r in rows} == {0, 1000}
    assert not plotted.exists()


@pytest.mark.parametrize("name", sorted(runner.RUNS))
def test_every_benchmark_of_the_runner_takes_out(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The runner hands each benchmark --out; one without it would fail the whole set late."""
    module = importlib.import_module(f"benchmarks.{name}")
    with pytest.raises(SystemExit):
        module.main(["--help"])
    assert "--out" in capsys.readouterr().out


def busy_result() -> dict[str, object]:
    row = {
        "specs": 10_000,
        "cpu_pct_of_core": 3.2,
        "cpu_s_per_ended_job": 0.032,
        "jobs_ended_per_s": 1.0,
        "rss_mb": 180.0,
        "load_1min": 2.5,
    }
    fake = [
        {**row, "ray": "fake", "specs": n, "cpu_pct_of_core": 3.2 * n / 1e4}
        | {"cpu_s_per_ended_job": 0.032 * n / 1e4}
        for n in (1_000, 10_000, 50_000)
    ]
    return {"rows": [*fake, {**row, "ray": "head", "cpu_s_per_ended_job": 0.2}]}


def test_the_plot_shows_the_busy_steady_state_with_its_goal() -> None:
    root = ET.fromstring(plot.render(scale_result(), "test", busy_result()))
    lines = {el.get("data-label"): el for el in root.iter(f"{SVG}polyline")}
    assert "busy serve, per ended job (real head)" in lines
    fake = lines["busy serve, per ended job (fake Ray)"]
    assert len(fake.get("points", "").split()) == 3  # one point per size: a line
    goals = {el.get("data-label"): el.get("d") for el in root.iter(f"{SVG}path")}
    assert "busy serve, per ended job (fake Ray) goal" in goals
    # The 1 % pass and a busy job share a goal (50 ms at 10,000): nested, not hidden.
    shapes = {goals[f"{name} goal"] for name in ("pass after 1 % of the specs changed",)}
    shapes |= {
        goals[f"busy serve, per ended job ({ray}) goal"] for ray in ("fake Ray", "real head")
    }
    assert len(shapes) == 3
    # Without busy results, no busy series (and the plot still renders).
    root = ET.fromstring(plot.render(scale_result(), "test"))
    assert not any("busy" in (el.get("data-label") or "") for el in root.iter(f"{SVG}polyline"))


def test_the_summary_has_the_busy_steady_state(tmp_path: Path) -> None:
    table = "\n".join(summary.lines(tmp_path))
    assert "a job ending every second (fake Ray in serve) | not run | ≤ 5 % of a core |" in table
    (tmp_path / "busy.json").write_text(json.dumps(busy_result()))
    table = "\n".join(summary.lines(tmp_path))
    # The row at the issue's 10,000 specs, of the three sizes run.
    assert "(fake Ray in serve) | 3.2 % of a core, 0.03 s CPU per ended job, 1.00 jobs/s" in table
    assert "(real head, `sleep 3` jobs) | 3.2 % of a core, 0.20 s CPU per ended job" in table
