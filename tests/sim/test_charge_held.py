"""The simulator feeds the planner what each job holds in Ray, as the loop's census does: taken
every census_seconds, of Ray as it stood then, so a job started since is not in it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.core.planner import Plan
from reconciler.sim.__main__ import main
from reconciler.sim.engine import CENSUS_SECONDS, JobRecord, simulate
from reconciler.sim.metrics import measure
from reconciler.sim.workload import Job
from specs.settings.process import Settings
from specs.task.models import Phase, Reason


def job(name: str, arrival: float, cpu: float, *, real: float | None = None, **kw: float) -> Job:
    run = kw.get("run", 100.0)
    priority = int(kw.get("priority", 0))
    return Job(name, arrival, run, cpu, priority, kw.get("timeout", 0.0), real_cpu=real)


def by_name(records: list[JobRecord]) -> dict[str, JobRecord]:
    return {r.job.name: r for r in records}


def test_the_census_period_is_the_loops_default() -> None:
    assert Settings.census_seconds == CENSUS_SECONDS


def test_a_job_holding_more_than_it_declares_makes_the_next_wait_held_in_fact() -> None:
    seen: dict[float, Plan] = {}
    hog = job("hog", 0, cpu=1, real=4, run=100)
    late = job("late", 20, cpu=1, run=10)  # after the census at 15, which saw the hog hold 4
    result = simulate([hog, late], "backfill", capacity_cpu=4, observer=seen.__setitem__)
    records = by_name(result.records)
    # Not submitted into the full cluster: the planner waits, and says why with the numbers.
    body = seen[20].statuses["late"].status
    assert body.phase is Phase.QUEUED and body.reason == Reason.WAITING_FOR_RESOURCES
    assert body.message is not None and body.message.startswith(
        "cluster full in fact: hog holds 4 CPU, declared 1; needs 1 CPU; 0 free"
    )
    assert records["late"].submitted == 100 and records["late"].start == 100
    assert records["late"].ray_wait == 0 and records["late"].phase is Phase.SUCCEEDED
    # Declarations only: submitted at once, it waits inside Ray for the hog to end.
    plain = by_name(simulate([hog, late], "backfill", capacity_cpu=4, census_seconds=None).records)
    assert plain["late"].submitted == 20 and plain["late"].ray_wait == 80


def test_a_job_started_after_the_census_is_not_in_it() -> None:
    hog = job("hog", 0, cpu=1, real=4, run=100)
    early = job("early", 5, cpu=1, run=10)  # before the census at 15: the hog is unseen
    records = by_name(simulate([hog, early], "backfill", capacity_cpu=4).records)
    assert records["early"].submitted == 5 and records["early"].ray_wait == 95
    # A census every second has seen the hog by 5.
    fast = simulate([hog, early], "backfill", capacity_cpu=4, census_seconds=1)
    assert by_name(fast.records)["early"].submitted == 100


def test_a_census_instant_runs_a_pass_only_when_ray_holds_other_than_declared() -> None:
    honest = [job("a", 0, cpu=2, run=100), job("b", 0, cpu=2, run=40)]
    census = simulate(honest, "backfill", capacity_cpu=4)
    declared = simulate(honest, "backfill", capacity_cpu=4, census_seconds=None)
    assert census.passes == declared.passes
    hog = [job("hog", 0, cpu=1, real=4, run=100)]
    assert (
        simulate(hog, "backfill", capacity_cpu=4).passes
        > simulate(hog, "backfill", capacity_cpu=4, census_seconds=None).passes
    )


def test_charging_what_is_held_keeps_a_lower_priority_job_from_passing_one_in_ray() -> None:
    hog = job("hog", 0, cpu=1, real=3, run=100)
    urgent = job("urgent", 10, cpu=2, priority=9, run=10)  # the census has not seen the hog
    low = job("low", 20, cpu=1, priority=0, run=10)  # the census at 15 has
    charged = by_name(simulate([hog, urgent, low], "backfill", capacity_cpu=4).records)
    assert charged["urgent"].start == 100 and charged["urgent"].inversions == 0
    assert charged["low"].start is not None and charged["low"].start >= 100
    plain = simulate([hog, urgent, low], "backfill", capacity_cpu=4, census_seconds=None)
    assert by_name(plain.records)["urgent"].inversions == 1


def test_the_census_period_must_be_positive() -> None:
    with pytest.raises(ValueError, match="census_seconds"):
        simulate([job("a", 0, cpu=1)], "backfill", capacity_cpu=4, census_seconds=0)


# The switch.


def _report(tmp_path: Path, *flags: str) -> dict[str, object]:
    out = tmp_path / "out.json"
    args = ["--workload", "synthetic", "--jobs", "60", "--processes", "1", "--load", "1.5"]
    args += ["--policies", "backfill", "--overuse", "0.3:3", "--json", str(out), *flags]
    assert main(args) == 0
    report: dict[str, object] = json.loads(out.read_text())
    return report


def _policies(report: dict[str, object]) -> dict[str, dict[str, object]]:
    policies: dict[str, dict[str, object]] = report["workloads"]["synthetic"]["policies"]  # type: ignore[index]
    return policies


def test_the_switch_charges_by_default_and_compares_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    charged = _report(tmp_path)
    assert charged["census_seconds"] == CENSUS_SECONDS
    declared = _report(tmp_path, "--no-charge-held")
    assert declared["census_seconds"] is None
    both = _report(tmp_path, "--compare-charging")
    assert set(_policies(both)) == {"backfill", "backfill/declared"}
    assert _policies(both)["backfill"] == _policies(charged)["backfill"] | {
        k: _policies(both)["backfill"][k] for k in ("wall_seconds", "pass_ms", "task_us")
    }
    same = _policies(declared)["backfill"]
    got = _policies(both)["backfill/declared"]
    assert got["inversions"] == same["inversions"] and got["waits"] == same["waits"]
    assert "| backfill/declared |" in capsys.readouterr().out
    assert main(["--workload", "synthetic", "--jobs", "5", "--census-seconds", "0"]) == 2


def test_measure_counts_what_charging_changes() -> None:
    hog = job("hog", 0, cpu=1, real=4, run=100)
    late = job("late", 20, cpu=1, run=10)
    m = measure(simulate([hog, late], "backfill", capacity_cpu=4))
    assert (m.ray_waited, m.inversions) == (0, 0)
