"""The simulator: it drives the real planner, is deterministic, and backfill keeps its promise."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.core.planner import Plan
from reconciler.sim.__main__ import main
from reconciler.sim.engine import EPOCH, SimResult, simulate
from reconciler.sim.metrics import measure, percentile
from reconciler.sim.workload import Job, offered_load, read_swf, synthetic
from specs.settings.process import PlanOptions
from specs.task.models import Phase


def test_smoke_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--workload", "synthetic", "--jobs", "40", "--processes", "1"]) == 0
    out = capsys.readouterr().out
    for policy in ("strict", "backfill", "besteffort"):
        assert f"| {policy} |" in out
    assert "utilization" in out and "longest wait" in out


def test_a_team_run_reports_each_teams_wait_quantiles(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_json = tmp_path / "out.json"
    args = ["--workload", "synthetic", "--jobs", "60", "--processes", "1", "--load", "2"]
    args += ["--teams", "2", "--policies", "backfill", "--json", str(out_json)]
    assert main(args) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "waits at" in x)
    assert line.strip().startswith("waits at p50 / p90 / p95 / p99 / mean: team-0 ")
    (run,) = json.loads(out_json.read_text())["workloads"].values()
    delivered = run["policies"]["backfill"]["delivered"]
    for team, quantiles in delivered["wait_quantiles"].items():
        assert list(quantiles) == ["p50", "p90", "p95", "p99", "mean"]
        mean = quantiles.pop("mean")
        assert list(quantiles.values()) == sorted(quantiles.values())
        assert mean >= 0
        assert quantiles["p95"] == delivered["p95_wait"][team]


# The Lublin trace is data kept outside the repository; name it to run the trace tests.
TRACE_ENV = "RAYQUEUE_SIM_TRACE"


@pytest.fixture
def lublin_trace() -> Path:
    value = os.environ.get(TRACE_ENV)
    if not value:
        pytest.skip(f"set {TRACE_ENV}=PATH to an SWF trace (lublin_256.swf) to run this test")
    path = Path(value)
    if not path.is_file():
        pytest.skip(f"{TRACE_ENV}={value} is not a file")
    return path


def test_smoke_on_the_trace(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, lublin_trace: Path
) -> None:
    out_json = tmp_path / "out.json"
    args = ["--workload", "lublin", "--jobs", "30", "--processes", "1", "--json", str(out_json)]
    args += ["--trace", str(lublin_trace)]
    assert main(args) == 0
    assert "lublin: 30 jobs" in capsys.readouterr().out
    assert '"backfill"' in out_json.read_text()


def test_unknown_policy_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--policies", "fifo", "--jobs", "5"]) == 2
    assert "unknown policy fifo" in capsys.readouterr().out


def _outcome(result: SimResult) -> list[tuple[str, float | None, float | None]]:
    return [(r.job.name, r.start, r.end) for r in result.records]


def test_same_seed_same_result() -> None:
    assert synthetic(50, seed=7) == synthetic(50, seed=7)
    assert synthetic(50, seed=7) != synthetic(50, seed=8)
    for policy in ("strict", "backfill", "besteffort"):
        first = simulate(synthetic(60, seed=7), policy, capacity_cpu=64)
        second = simulate(synthetic(60, seed=7), policy, capacity_cpu=64)
        assert _outcome(first) == _outcome(second)
        a, b = measure(first), measure(second)
        assert (a.utilization, a.waits, a.longest_wait) == (b.utilization, b.waits, b.longest_wait)


def test_every_job_runs_once_within_capacity() -> None:
    capacity = 32
    peaks: list[float] = []

    def check(now: float, p: Plan) -> None:
        assert p.summary is not None
        peaks.append(p.summary.used.cpu)

    jobs = synthetic(80, seed=3, capacity_cpu=capacity)
    result = simulate(jobs, "backfill", capacity_cpu=capacity, observer=check)
    assert max(peaks) <= capacity
    assert result.unfinished == 0
    for r in result.records:
        assert r.phase is Phase.SUCCEEDED
        assert r.start is not None and r.start >= r.job.arrival
        assert r.end == r.start + r.job.run
    assert 0 < measure(result).utilization <= 1


def test_timeouts_are_the_planners() -> None:
    jobs = [Job("late", 0, run=100, cpu=1, priority=0, timeout=10)]
    (record,) = simulate(jobs, "strict", capacity_cpu=4).records
    assert record.phase is Phase.TIMED_OUT
    assert record.end == 11  # "ran longer than" 10 s: noticed at the first second past it


def test_read_swf(tmp_path: Path) -> None:
    trace = tmp_path / "t.swf"
    trace.write_text(
        "; Version: 2\n"
        "; MaxNodes: 8\n"
        "1  100 -1  50  4 -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1\n"
        "2  130 -1  20 -1 -1 -1  2 -1 -1 1 -1 -1 -1 0 -1 -1 -1\n"  # allocated unknown: requested
        "3  140 -1  -1  1 -1 -1 -1 -1 -1 0 -1 -1 -1 0 -1 -1 -1\n"  # no run time: skipped
        "4  150 -1  10 16 -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1\n"  # wider than the cluster
        "\n"
        "5  160 -1   7  1 -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1\n"
    )
    jobs = read_swf(trace, capacity_cpu=8, seed=1)
    assert [(j.name, j.arrival, j.run, j.cpu) for j in jobs] == [
        ("swf-000001", 0, 50, 4),
        ("swf-000002", 30, 20, 2),
        ("swf-000005", 60, 7, 1),
    ]
    assert all(j.run <= j.timeout <= 5 * j.run + 1 and 0 <= j.priority <= 9 for j in jobs)
    assert read_swf(trace, capacity_cpu=8, seed=1, limit=2) == jobs[:2]


def test_synthetic_offers_the_load_asked_for() -> None:
    jobs = synthetic(2000, seed=1, capacity_cpu=256, load=0.9)
    assert 0.8 < offered_load(jobs, 256) < 1.0
    assert {j.priority for j in jobs} == set(range(10))
    assert max(j.cpu for j in jobs) == 256 and min(j.cpu for j in jobs) == 1


def test_metrics() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([5], 95) == 5
    jobs = [
        Job("a", 0, run=100, cpu=1, priority=9, timeout=100),
        Job("b", 0, run=5, cpu=2, priority=0, timeout=5),
    ]
    result = simulate(jobs, "strict", capacity_cpu=2)
    m = measure(result)
    # a (1 CPU) runs 0..100, b (2 CPUs) waits 100 s then runs 5 s: 110 CPU-s of 2 x 105.
    assert m.waits[9].mean == 0 and m.waits[0].p95 == 100
    assert m.utilization == pytest.approx(110 / 210)
    assert m.longest_wait == 100 and m.longest_wait_job == "b"
    # bounded slowdown: a is 1; b is (100 + 5) / max(5, 10) = 10.5
    assert m.mean_bounded_slowdown == pytest.approx((1 + 10.5) / 2)


# -- property: the reserved head never starts later than its reservation ----------------------


@st.composite
def bounded_workloads(draw: st.DrawFn) -> list[Job]:
    """One priority level, so the head stays the head until it starts; runs = declared bounds,
    except tasks without a timeout, whose run the scheduler cannot know."""
    rows = draw(
        st.lists(
            st.tuples(
                st.integers(0, 300),  # arrival
                st.integers(1, 8),  # CPUs of an 8-CPU cluster
                st.integers(1, 200),  # run
                st.booleans(),  # declares a timeout
            ),
            min_size=1,
            max_size=14,
        )
    )
    return [
        Job(f"j{i:02d}", arrival, run, cpu, priority=0, timeout=run if bounded else 0)
        for i, (arrival, cpu, run, bounded) in enumerate(rows)
    ]


@settings(max_examples=200, deadline=None)
@given(bounded_workloads())
def test_backfill_keeps_every_reservation(jobs: list[Job]) -> None:
    # Under strict, the head starts as soon as the running jobs' bounds allow, which is exactly
    # its reservation; so "never later than its reservation" is "never later than without
    # backfilling", given the declared bounds.
    promised: dict[str, float] = {}

    def record(now: float, p: Plan) -> None:
        for name, status in p.statuses.items():
            when = status.status.estimated_start_at
            if when is not None:
                at = (when - EPOCH) / timedelta(seconds=1)
                assert at >= now
                promised[name] = min(promised.get(name, at), at)

    result = simulate(jobs, "backfill", capacity_cpu=8, observer=record)
    assert result.unfinished == 0
    starts = {r.job.name: r.start for r in result.records}
    for name, at in promised.items():
        start = starts[name]
        assert start is not None and start <= at, f"{name} promised {at}, started {start}"


def test_timeout_factor_sets_the_declared_bounds(capsys: pytest.CaptureFixture[str]) -> None:
    exact = synthetic(30, seed=2, timeout_factor=(1, 1))
    assert all(j.timeout == j.run for j in exact)
    loose = synthetic(30, seed=2)
    assert [j.priority for j in loose] == [j.priority for j in exact]  # only timeouts differ
    args = ["--workload", "synthetic", "--jobs", "20", "--processes", "1"]
    assert main([*args, "--timeout-factor", "1,1"]) == 0
    with pytest.raises(SystemExit):
        main([*args, "--timeout-factor", "0.5,2"])  # a job must end within its own bound
    capsys.readouterr()


def test_team_load_is_checked_against_the_teams(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--workload", "synthetic", "--jobs", "20", "--policies", "backfill"]
    assert main([*args, "--team-load", "1,3"]) == 2
    assert "--team-load goes with --teams or --tree" in capsys.readouterr().out
    assert main([*args, "--teams", "3", "--team-load", "1,3"]) == 2
    assert "--team-load gives 2 parts for 3 teams" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main([*args, "--teams", "2", "--team-load", "1,0"])
    assert "weights must be > 0" in capsys.readouterr().err


def test_missing_trace_is_reported(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["--workload", "lublin", "--trace", str(tmp_path / "none.swf")]) == 2
    assert "no trace at" in capsys.readouterr().out


def test_trace_workload_needs_a_trace(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--workload", "lublin"]) == 2
    assert "pass --trace PATH" in capsys.readouterr().out


def test_preemption_is_modelled_faithfully() -> None:
    """A victim holds its CPUs for the grace period, its run so far is wasted, and it runs
    again in full; the urgent job waits exactly the grace period."""
    workload = [
        Job("low", arrival=0, run=100, cpu=4, priority=0, timeout=0),
        Job("urgent", arrival=50, run=10, cpu=4, priority=9, timeout=0),
    ]
    options = PlanOptions(preemption="LowerPriority", preemption_grace_seconds=30)
    result = simulate(workload, "backfill", capacity_cpu=4, options=options)
    low, urgent = sorted(result.records, key=lambda r: r.job.name)
    assert (urgent.start, urgent.end) == (80, 90)  # after the 30 s grace
    assert (low.start, low.last_start, low.end) == (0, 90, 190)  # run 2 from the start
    assert low.preemptions == 1 and low.wasted == 4 * 80
    m = measure(result)
    assert (m.preemptions, m.max_preemptions_per_job) == (1, 1)
    assert m.wasted_fraction == pytest.approx(320 / (320 + 4 * 100 + 4 * 10))
    assert m.urgent.p95 == 30
    # Without preemption the urgent job waits for the end of the low one.
    plain = simulate(workload, "backfill", capacity_cpu=4)
    assert {r.job.name: r.start for r in plain.records} == {"low": 0, "urgent": 100}
    assert measure(plain).wasted_fraction == 0


def test_preemption_flags_reach_the_json(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    args = ["--workload", "synthetic", "--jobs", "40", "--processes", "1", "--policies"]
    args += ["backfill", "--preemption", "LowerPriority", "--grace", "5", "--json", str(out)]
    assert main(args) == 0
    report = json.loads(out.read_text())
    assert (report["preemption"], report["grace_seconds"]) == ("LowerPriority", 5)
    metrics = report["workloads"]["synthetic"]["policies"]["backfill"]
    assert {"preemptions", "max_preemptions_per_job", "wasted_fraction"} <= set(metrics)


def test_min_preemptor_priority_reaches_the_planner() -> None:
    """Below the threshold a job waits for the run to end, as without preemption; at it, it
    preempts. The simulator passes the option on; the planner decides."""
    workload = [
        Job("low", arrival=0, run=100, cpu=4, priority=0, timeout=0),
        Job("mid", arrival=50, run=10, cpu=4, priority=6, timeout=0),
    ]
    on = PlanOptions(preemption="LowerPriority", preemption_grace_seconds=30)
    starts = {}
    for threshold in (0, 6, 7):
        options = replace(on, preemption_min_preemptor_priority=threshold)
        result = simulate(workload, "backfill", capacity_cpu=4, options=options)
        starts[threshold] = {r.job.name: r.start for r in result.records}
        assert measure(result).preemptions == (threshold <= 6)
    assert starts[0] == starts[6] == {"low": 0, "mid": 80}  # after the grace
    assert starts[7] == {"low": 0, "mid": 100}  # waits for the end of low


def test_min_preemptor_priority_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--workload", "synthetic", "--jobs", "150", "--processes", "1", "--policies"]
    args += ["backfill", "--preemption", "LowerPriority"]
    reports = []
    for extra in ([], ["--min-preemptor-priority", "9"]):
        out = tmp_path / "out.json"
        assert main([*args, *extra, "--json", str(out)]) == 0
        reports.append(json.loads(out.read_text()))
    anyone, urgent_only = (r["workloads"]["synthetic"]["policies"]["backfill"] for r in reports)
    assert [r["min_preemptor_priority"] for r in reports] == [0, 9]
    assert 0 < urgent_only["preemptions"] < anyone["preemptions"]
    with pytest.raises(SystemExit):
        main([*args, "--min-preemptor-priority", "10"])
    assert "a priority 0..9 (got '10')" in capsys.readouterr().err


def test_priority_weights_shape_the_mix_and_leave_the_default_alone() -> None:
    urgent_tier = (13.0, 13.0, 13.0, 13.0, 13.0, 13.0, 12.0, 5.0, 3.0, 2.0)
    tiered = synthetic(4000, seed=3, priority_weights=urgent_tier)
    share = sum(j.priority >= 7 for j in tiered) / len(tiered)
    assert 0.07 < share < 0.13  # 10 % asked for
    only_top = synthetic(200, seed=3, priority_weights=(0,) * 9 + (1,))
    assert {j.priority for j in only_top} == {9}
    # The default draw is unchanged, so earlier published figures still reproduce.
    assert synthetic(300, seed=5) == synthetic(300, seed=5, priority_weights=None)
    assert len({j.priority for j in synthetic(300, seed=5)}) == 10


def test_priority_weights_flag_is_checked(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--workload", "synthetic", "--jobs", "20", "--priority-weights", "1,2,3"])
    assert exc.value.code == 2
    assert "ten shares" in capsys.readouterr().err
    args = ["--workload", "synthetic", "--jobs", "30", "--processes", "1", "--policies", "strict"]
    assert main([*args, "--priority-weights", "0,0,0,0,0,0,0,0,0,1"]) == 0
