"""Jobs that do not keep their word: the simulated Ray holds what each job really uses, and a job
whose real use does not fit waits inside Ray, in Ray's order. The engine's tests here plan on
declarations only (no census: tests/sim/test_charge_held.py charges what Ray holds). With every
job keeping its word, every figure is what it was before real use was modelled, with a census
or without."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from reconciler.core.planner import Plan
from reconciler.sim import teams as team_split
from reconciler.sim.__main__ import main
from reconciler.sim.engine import CENSUS_SECONDS, MEMORY_BYTES, JobRecord, simulate
from reconciler.sim.metrics import measure
from reconciler.sim.runs import with_flag_preemption
from reconciler.sim.workload import Job, Misuse, mark_real_use, mark_resumable, synthetic
from specs.settings.process import PlanOptions
from specs.task.models import Phase


def job(name: str, arrival: float, cpu: float, *, real: float | None = None, **kw: float) -> Job:
    run = kw.get("run", 100.0)
    priority = int(kw.get("priority", 0))
    return Job(name, arrival, run, cpu, priority, kw.get("timeout", 0.0), real_cpu=real)


def by_name(records: list[JobRecord]) -> dict[str, JobRecord]:
    return {r.job.name: r for r in records}


# The engine: the in-Ray wait.


def test_a_job_that_over_uses_holds_the_cluster_and_the_next_waits_inside_ray() -> None:
    seen: dict[float, Plan] = {}
    hog = job("hog", 0, cpu=1, real=4, run=100)
    late = job("late", 10, cpu=1, run=10)
    result = simulate(
        [hog, late], "backfill", capacity_cpu=4, observer=seen.__setitem__, census_seconds=None
    )
    records = by_name(result.records)
    # The planner sees 3 CPUs free and submits; Ray has none free until the hog ends.
    assert records["late"].submitted == 10
    assert (records["late"].start, records["late"].end) == (100, 110)  # its run counts from 100
    assert records["late"].wait == 90 and records["late"].ray_wait == 90
    assert records["late"].phase is Phase.SUCCEEDED
    # Ray listed it RUNNING when submitted: that is when the planner recorded its start.
    status = seen[10].statuses["late"].status
    assert status.phase is Phase.RUNNING and status.started_at is not None
    m = measure(result)
    assert m.waits[0].p95 == pytest.approx(90 - 0.05 * 90)  # hog 0 s, late 90 s
    assert m.held_declared == pytest.approx((1 * 100 + 1 * 100) / (4 * 110))
    assert m.held_in_fact == pytest.approx((4 * 100 + 1 * 10) / (4 * 110))
    assert (m.misdeclared, m.ray_waited, m.inversions) == (1, 1, 0)


def test_a_lower_priority_job_that_fits_starts_first_and_is_an_inversion() -> None:
    hog = job("hog", 0, cpu=1, real=3, run=100)
    urgent = job("urgent", 10, cpu=2, priority=9, run=10)  # submitted: 3 free declared, 1 in fact
    low = job("low", 20, cpu=1, priority=0, run=10)  # submitted: 1 free declared, 1 in fact
    result = simulate([hog, urgent, low], "backfill", capacity_cpu=4, census_seconds=None)
    records = by_name(result.records)
    assert records["low"].start == 20  # Ray gives its free CPU to the job it fits
    assert (records["urgent"].start, records["urgent"].end) == (100, 110)
    assert (records["urgent"].inversions, records["urgent"].behind_lower) == (1, 0)
    m = measure(result)
    assert (m.inversions, m.top_inverted, m.behind_lower) == (1, 1.0, 0)


def test_a_lower_priority_job_submitted_earlier_that_fits_first_is_counted_apart() -> None:
    hog = job("hog", 0, cpu=1, real=3, run=100)
    keep = job("keep", 0, cpu=1, run=200)  # Ray is full from 0: 3 + 1
    low = job("low", 10, cpu=1, priority=0, run=10)  # planner: 2 free
    urgent = job("urgent", 20, cpu=1, real=4, priority=9, run=10)  # planner: 1 free
    result = simulate([hog, keep, low, urgent], "backfill", capacity_cpu=4, census_seconds=None)
    records = by_name(result.records)
    # At 100 the hog's 3 CPUs free: low fits, urgent (4 in fact) waits for keep to end too.
    assert records["low"].start == 100
    assert records["urgent"].start == 200
    assert (records["urgent"].inversions, records["urgent"].behind_lower) == (0, 1)
    m = measure(result)
    assert (m.inversions, m.behind_lower, m.top_behind_lower) == (0, 1, 1.0)


def test_jobs_that_fit_at_the_same_instant_are_no_inversion() -> None:
    hog = job("hog", 0, cpu=1, real=4, run=100)
    urgent = job("urgent", 10, cpu=1, priority=9, run=10)
    low = job("low", 20, cpu=1, priority=0, run=10)
    records = by_name(
        simulate([hog, urgent, low], "backfill", capacity_cpu=4, census_seconds=None).records
    )
    assert records["urgent"].start == records["low"].start == 100
    assert records["urgent"].inversions == records["urgent"].behind_lower == 0


def test_a_job_that_waits_inside_ray_past_its_timeout_is_timed_out_unstarted() -> None:
    hog = job("hog", 0, cpu=1, real=4, run=100)
    late = job("late", 10, cpu=1, run=10, timeout=50)
    result = simulate([hog, late], "backfill", capacity_cpu=4, census_seconds=None)
    records = by_name(result.records)
    # The planner counts the timeout from when Ray listed the job RUNNING: 10 + 50, then + 1.
    assert records["late"].phase is Phase.TIMED_OUT
    assert records["late"].start is None and records["late"].end == 61
    m = measure(result)
    assert (m.timed_out, m.never_started) == (1, 1)
    # It counts in the waits with its wait until it was stopped, a lower bound.
    assert m.waits[0].jobs == 2 and (m.longest_wait, m.longest_wait_job) == (51, "late")


def test_a_job_preempted_while_it_waits_inside_ray_loses_nothing() -> None:
    options = PlanOptions(preemption="LowerPriority", preemption_grace_seconds=30)
    hog = job("hog", 0, cpu=1, real=4, run=300, priority=5)
    low = job("low", 10, cpu=2, run=10, priority=0)  # waits inside Ray behind the hog
    urgent = job("urgent", 20, cpu=2, run=10, priority=9)  # the planner preempts low for it
    result = simulate(
        [hog, low, urgent], "backfill", capacity_cpu=4, options=options, census_seconds=None
    )
    records = by_name(result.records)
    assert records["low"].preemptions == 1
    assert records["low"].wasted == 0 and records["low"].lost == []
    assert records["urgent"].start == 300 and records["low"].start is not None


def test_an_autoscaling_run_refuses_jobs_that_do_not_keep_their_word() -> None:
    from reconciler.sim.nodes import NodeModel, Nodes, parse_node_type

    nodes = Nodes(NodeModel((parse_node_type("w:cpu=4,max=2"),)))
    with pytest.raises(ValueError, match="hold what they declare"):
        simulate([job("hog", 0, cpu=1, real=4)], "backfill", capacity_cpu=8, nodes=nodes)


# The knob's draw.


def test_the_draw_holds_its_fractions_and_is_fixed_by_the_seed() -> None:
    jobs = synthetic(4000, seed=4)
    over, under = Misuse(0.3, 3.0), Misuse(0.2, 0.5)
    marked = mark_real_use(jobs, over, under, 256, seed=4)
    assert marked == mark_real_use(jobs, over, under, 256, seed=4)
    assert marked != mark_real_use(jobs, over, under, 256, seed=5)
    more = [j for j in marked if j.held_cpu > j.cpu]
    less = [j for j in marked if j.held_cpu < j.cpu]
    assert 0.28 < len(more) / len(jobs) < 0.32
    assert 0.18 < len(less) / len(jobs) < 0.22
    assert all(j.held_cpu == min(3 * j.cpu, 256) for j in more)
    assert all(j.held_cpu == 0.5 * j.cpu for j in less)
    # Only the real use moves: arrivals, declarations, priorities and timeouts are the same.
    strip = [(j.name, j.arrival, j.run, j.cpu, j.priority, j.timeout) for j in marked]
    assert strip == [(j.name, j.arrival, j.run, j.cpu, j.priority, j.timeout) for j in jobs]
    # The jobs that over-use at a fraction are among those that do at a larger one.
    fewer = mark_real_use(jobs, Misuse(0.1, 3.0), None, 256, seed=4)
    assert {j.name for j in fewer if j.real_cpu} <= {j.name for j in more}


def test_the_draw_refuses_fractions_over_one_and_off_is_the_workload_itself() -> None:
    jobs = synthetic(200, seed=1)
    with pytest.raises(ValueError, match="more than 1"):
        mark_real_use(jobs, Misuse(0.7, 3.0), Misuse(0.4, 0.5), 256, seed=1)
    assert mark_real_use(jobs, None, None, 256, seed=1) == jobs
    assert mark_real_use(jobs, Misuse(0.0, 3.0), Misuse(0.0, 0.5), 256, seed=1) == jobs


# The knob off changes nothing: the figures of a fixed run, pinned before real use was modelled.


def _digest(records: list[JobRecord]) -> str:
    rows = [
        [r.job.name, r.start, r.end, r.last_start, r.phase.value if r.phase else None, *more]
        for r in records
        for more in [(r.preemptions, r.wasted, r.saved, r.lost)]
    ]
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:16]


PINNED = {  # policy: (digest of every job's record, utilization, priority-9 p95 wait, passes)
    "strict": ("6c28d43bdf7925bc", 0.458276, 5880.25, 287),
    "backfill": ("b806c6c94e180a49", 0.663702, 3061.0, 352),
    "besteffort": ("a83a1bb7ac25403c", 0.784075, 1920.25, 358),
}
PREEMPTION = PlanOptions(preemption="LowerPriority", preemption_grace_seconds=30)


def _figures(jobs: list[Job], policy: str, **kw: object) -> tuple[str, float, float, int]:
    result = simulate(jobs, policy, capacity_cpu=64, **kw)  # type: ignore[arg-type]
    m = measure(result)
    assert m.held_in_fact == pytest.approx(m.held_declared)
    assert (m.ray_waited, m.inversions, m.behind_lower, m.never_started) == (0, 0, 0, 0)
    return _digest(result.records), round(m.utilization, 6), round(m.waits[9].p95, 3), result.passes


@pytest.mark.parametrize("census", [CENSUS_SECONDS, None])
@pytest.mark.parametrize("policy", sorted(PINNED))
def test_with_every_job_keeping_its_word_the_figures_are_the_pinned_ones(
    policy: str, census: float | None
) -> None:
    jobs = mark_real_use(synthetic(120, seed=3, capacity_cpu=64, load=1.5), None, None, 64, 3)
    assert _figures(jobs, policy, census_seconds=census) == PINNED[policy]


def test_with_every_job_keeping_its_word_preemption_and_teams_are_the_pinned_ones() -> None:
    jobs = synthetic(120, seed=3, capacity_cpu=64, load=1.5)
    resumable = mark_resumable(jobs, 0.5, 3)
    got = _figures(resumable, "backfill", options=PREEMPTION)
    assert got == ("6dcef1621fe625a9", 0.702321, 30.0, 374)
    config = team_split.team_config(
        2, (1.0, 3.0), 64, MEMORY_BYTES, quota=False, half_life=3600.0, fair_preemption=False
    )
    config = with_flag_preemption(config, PREEMPTION)
    teams = team_split.split(jobs, 2, None)
    got = _figures(teams, "backfill", queues=config, options=PREEMPTION)
    assert got == ("1237d7645540224c", 0.651337, 2279.5, 347)


# The flags and the report.


def test_the_flags_report_real_use_in_the_table_and_the_json(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_json = tmp_path / "out.json"
    args = ["--workload", "synthetic", "--jobs", "80", "--processes", "1", "--load", "1.5"]
    args += ["--policies", "backfill", "--overuse", "0.3:3", "--underuse", "0.2:0.5"]
    assert main([*args, "--json", str(out_json)]) == 0
    assert "jobs that do not keep their word (" in capsys.readouterr().out
    report = json.loads(out_json.read_text())
    assert report["overuse"] == {"fraction": 0.3, "factor": 3.0}
    figures = report["workloads"]["synthetic"]["policies"]["backfill"]
    assert figures["misdeclared"] > 0 and figures["held_in_fact"] > 0
    assert {"inversions", "top_inverted", "held_declared", "never_started"} <= set(figures)


def test_without_the_flags_the_table_has_no_real_use_section(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--workload", "synthetic", "--jobs", "40", "--processes", "1"]) == 0
    assert "do not keep their word" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--overuse", "0.3"], "F:K"),
        (["--overuse", "0.3:0.5"], "F:K"),
        (["--underuse", "0.3:2"], "F:K"),
        (["--overuse", "1.2:3"], "F:K"),
    ],
)
def test_bad_values_are_refused(
    flags: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["--workload", "synthetic", "--jobs", "5", *flags])
    assert words in capsys.readouterr().err


def test_fractions_that_add_up_past_one_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--workload", "synthetic", "--jobs", "5", "--overuse", "0.7:3", "--underuse", "0.4:0.5"]
    assert main(args) == 2
    assert "add up to 1 at most" in capsys.readouterr().out
