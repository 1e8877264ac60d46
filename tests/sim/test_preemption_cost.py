"""The simulator's side of preemption's cost: a queue file (`--queues`, preemption blocks included),
and resumable jobs (`--resumable-fraction`) that lose only their grace period when preempted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.sim.__main__ import main
from reconciler.sim.engine import simulate
from reconciler.sim.metrics import measure
from reconciler.sim.workload import Job, mark_resumable, synthetic
from specs.queues.parse import parse_queue_config
from specs.settings.process import PlanOptions

ON = PlanOptions(preemption="LowerPriority", preemption_grace_seconds=30)


def two_jobs(resumable: bool, prefix: str = "") -> list[Job]:
    return [
        Job(f"{prefix}low", arrival=0, run=100, cpu=4, priority=0, timeout=0, resumable=resumable),
        Job(f"{prefix}urgent", arrival=50, run=10, cpu=4, priority=9, timeout=0),
    ]


def test_a_resumable_job_loses_only_its_grace_and_resumes_where_it_was() -> None:
    result = simulate(two_jobs(resumable=True), "backfill", capacity_cpu=4, options=ON)
    low, urgent = sorted(result.records, key=lambda r: r.job.name)
    assert (urgent.start, urgent.end) == (80, 90)  # after the 30 s grace, as for any job
    # SIGTERM at 50: it saved 50 s of work, lost the 30 s grace, and its run 2 does the rest
    assert (low.saved, low.wasted) == (50, 4 * 30)
    assert (low.last_start, low.end) == (90, 140)
    plain = simulate(two_jobs(resumable=False), "backfill", capacity_cpu=4, options=ON)
    low = sorted(plain.records, key=lambda r: r.job.name)[0]
    assert (low.wasted, low.end) == (4 * 80, 190)  # all it ran, then again in full
    # its saved 50 s are useful work: 4 x 100 for low in all, 4 x 10 for urgent, 4 x 30 wasted
    assert measure(result).wasted_fraction == pytest.approx(120 / (400 + 40 + 120))
    assert measure(result).utilization == pytest.approx((400 + 40) / (4 * 140))
    assert measure(result).wasted_fraction < measure(plain).wasted_fraction


def test_resumable_fraction_is_seeded_and_leaves_the_workload_alone() -> None:
    jobs = synthetic(2000, seed=4)
    half = mark_resumable(jobs, 0.5, seed=4)
    assert half == mark_resumable(jobs, 0.5, seed=4)  # the same seed, the same jobs
    assert half != mark_resumable(jobs, 0.5, seed=5)
    assert 0.45 < sum(j.resumable for j in half) / len(half) < 0.55
    assert not any(j.resumable for j in mark_resumable(jobs, 0, seed=4))
    assert all(j.resumable for j in mark_resumable(jobs, 1, seed=4))
    strip = [(j.name, j.arrival, j.run, j.cpu, j.priority, j.timeout) for j in half]
    assert strip == [(j.name, j.arrival, j.run, j.cpu, j.priority, j.timeout) for j in jobs]


QUEUES = """apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
      nominalQuota: {{cpu: 2}}
      preemption: {{{a}}}
    - name: team-b
      nominalQuota: {{cpu: 2}}
"""


def test_the_queue_files_grace_is_the_one_a_preempted_job_gets() -> None:
    config = parse_queue_config(
        QUEUES.format(a="withinQueue: LowerPriority, gracePeriodSeconds: 7")
    )
    result = simulate(two_jobs(False, "team-a/"), "backfill", capacity_cpu=4, queues=config)
    urgent = next(r for r in result.records if r.job.name == "team-a/urgent")
    assert urgent.start == 57  # preempted at 50, stopped 7 s later
    off = simulate(
        two_jobs(False, "team-a/"),
        "backfill",
        capacity_cpu=4,
        queues=parse_queue_config(QUEUES.format(a="")),
    )
    assert measure(off).preemptions == 0  # the block, not the options, turns preemption on


def _report(tmp_path: Path, *args: str) -> dict[str, object]:
    out = tmp_path / "out.json"
    base = ["--workload", "synthetic", "--jobs", "300", "--capacity", "16", "--processes", "1"]
    assert main([*base, "--policies", "backfill", *args, "--json", str(out)]) == 0
    report: dict[str, object] = json.loads(out.read_text())
    return report


def _metrics(report: dict[str, object]) -> dict[str, float]:
    return report["workloads"]["synthetic"]["policies"]["backfill"]  # type: ignore[index,no-any-return]


def test_queues_reads_the_file_and_its_preemption_blocks(tmp_path: Path) -> None:
    path = tmp_path / "_queues.yaml"
    runs = {}
    for name, block in [
        ("off", ""),
        ("capped", "withinQueue: LowerPriority, maxPerTask: 1"),
        ("uncapped", "withinQueue: LowerPriority, maxPerTask: 0"),
    ]:
        path.write_text(QUEUES.format(a=block))
        report = _report(tmp_path, "--queues", str(path))
        assert report["queues"] == str(path)
        runs[name] = _metrics(report)
    assert runs["off"]["preemptions"] == 0
    assert runs["capped"]["max_preemptions_per_job"] == 1
    assert runs["uncapped"]["max_preemptions_per_job"] > 1


def test_the_cap_is_3_by_default_in_the_simulator_too(tmp_path: Path) -> None:
    capped = _report(tmp_path, "--preemption", "LowerPriority")
    assert capped["max_preemptions"] == 3
    assert 0 < _metrics(capped)["max_preemptions_per_job"] <= 3
    free = _report(tmp_path, "--preemption", "LowerPriority", "--max-preemptions", "0")
    assert _metrics(free)["max_preemptions_per_job"] > 3


def test_resumable_fraction_lowers_the_waste(tmp_path: Path) -> None:
    args = ("--preemption", "LowerPriority")
    none = _report(tmp_path, *args)
    half = _report(tmp_path, *args, "--resumable-fraction", "0.5")
    assert half["resumable_fraction"] == 0.5
    assert _metrics(half)["wasted_fraction"] < _metrics(none)["wasted_fraction"]


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--preemption", "LowerPriority"], "--preemption: with --queues"),
        (["--max-preemptions", "5"], "--max-preemptions: with --queues"),
        (["--teams", "2"], "--teams: with --queues"),
    ],
)
def test_beside_queues_the_preemption_flags_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], said: str
) -> None:
    path = tmp_path / "_queues.yaml"
    path.write_text(QUEUES.format(a=""))
    assert main(["--workload", "synthetic", "--jobs", "10", "--queues", str(path), *extra]) == 2
    assert said in capsys.readouterr().out


def test_a_bad_queue_file_is_reported_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "q.yaml"
    path.write_text(QUEUES.format(a="maxPerTask: -1"))
    assert main(["--workload", "synthetic", "--jobs", "10", "--queues", str(path)]) == 2
    out = capsys.readouterr().out
    assert "q.yaml:7" in out and "maxPerTask" in out
    with pytest.raises(SystemExit):
        main(["--resumable-fraction", "2"])
