"""Task arrays in the simulator: `--array-fraction` turns seeded jobs into arrays
of `--array-size` elements, each element the task the store would hand the planner, so
maxParallel, fair share and preemption are checked with arrays."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from reconciler.core.planner import Plan
from reconciler.sim.__main__ import main
from reconciler.sim.engine import simulate, to_task
from reconciler.sim.teams import split
from reconciler.sim.workload import Job, make_arrays, synthetic
from specs.queues.config import QueueConfig
from specs.task import arrays
from specs.task.arrays import split as split_element
from specs.task.models import Phase
from specs.task.records import Task


def test_make_arrays_is_seeded_and_copies_the_job() -> None:
    jobs = synthetic(50, seed=2)
    first = make_arrays(jobs, 0.2, 5, 2, seed=1)
    assert first == make_arrays(jobs, 0.2, 5, 2, seed=1)
    assert make_arrays(jobs, 0.0, 5, 2, seed=1) == jobs
    elements = [j for j in first if j.array_size]
    bases = Counter(split_element(j.name)[0] for j in elements)  # type: ignore[index]
    assert bases and set(bases.values()) == {5}
    assert len(first) == len(jobs) + 4 * len(bases)
    base = next(iter(bases))
    original = next(j for j in jobs if j.name == base)
    element = next(j for j in elements if j.name == f"{base}[3]")
    assert (element.arrival, element.run, element.cpu, element.priority) == (
        original.arrival, original.run, original.cpu, original.priority,
    )  # fmt: skip
    assert element.max_parallel == 2
    assert {j.max_parallel for j in make_arrays(jobs, 1.0, 3, None, seed=1)} == {3}


def test_an_element_is_the_task_the_store_hands_the_planner() -> None:
    job = Job("team-1/sweep", 0, 10, 2, 4, 0)
    (element,) = [j for j in make_arrays([job], 1.0, 4, 2, seed=0) if j.name.endswith("[2]")]
    array = Task.model_validate(
        {
            "apiVersion": "rayqueue/v1",
            "kind": "Task",
            "spec": {
                "entrypoint": "sim team-1/sweep",
                "priority": 4,
                "resources": {"cpu": 2},
                "timeoutSeconds": 0,
                "resumable": False,
                "array": {"count": 4, "maxParallel": 2},
            },
        }
    )
    assert to_task(element) == arrays.expand("team-1/sweep", array)["team-1/sweep[2]"]


def test_max_parallel_caps_an_array_and_every_element_runs_once() -> None:
    jobs = make_arrays([Job("sweep", 0, 10, 1, 0, 0)], 1.0, 6, 2, seed=0)
    jobs.append(Job("other", 0, 10, 1, 0, 0))
    peaks: list[int] = []

    def observe(now: float, plan: Plan) -> None:
        active = [
            n for n, s in plan.statuses.items() if n.startswith("sweep[") and s.status.phase.active
        ]
        peaks.append(len(active))

    result = simulate(jobs, "backfill", capacity_cpu=8, observer=observe)
    assert max(peaks) == 2  # 8 CPUs free, the cap holds the array to 2
    assert result.unfinished == 0
    assert all(r.phase is Phase.SUCCEEDED and r.preemptions == 0 for r in result.records)
    starts = sorted(r.start for r in result.records if r.job.name.startswith("sweep["))
    assert starts == [0, 0, 10, 10, 20, 20]
    assert next(r.start for r in result.records if r.job.name == "other") == 0


def test_fair_share_and_preemption_with_arrays() -> None:
    """Team 0 fills the cluster with a low-priority array; team 1's urgent job preempts one
    element (the element runs again in full) and team 1 gets its share back."""
    sweep = [Job("team-0/sweep", 0, 100, 1, 0, 0)]
    team0 = make_arrays(sweep, 1.0, 8, None, seed=0)
    urgent = Job("team-1/urgent", 10, 50, 1, 9, 0)
    block = {"reclaimWithinCohort": "Any", "gracePeriodSeconds": 5}
    queues = QueueConfig.model_validate(
        {
            "apiVersion": "rayqueue/v1",
            "kind": "QueueConfig",
            "spec": {
                "queues": [
                    {"name": f"team-{k}", "nominalQuota": {"cpu": 4}, "preemption": block}
                    for k in range(2)
                ]
            },
        }
    )
    result = simulate([*team0, urgent], "backfill", capacity_cpu=8, queues=queues)
    by_name = {r.job.name: r for r in result.records}
    assert result.unfinished == 0
    assert by_name["team-1/urgent"].start == 15  # after one element's 5 s grace
    victims = [r for n, r in by_name.items() if n.startswith("team-0/") and r.preemptions]
    assert len(victims) == 1 and victims[0].wasted == 1 * 15
    assert all(r.phase is Phase.SUCCEEDED for r in result.records)


def test_the_flags_reach_the_workload_and_the_json(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    args = ["--workload", "synthetic", "--jobs", "30", "--processes", "1", "--policies"]
    args += ["backfill", "--teams", "2", "--preemption", "LowerPriority"]
    args += ["--array-fraction", "0.2", "--array-size", "4", "--array-max-parallel", "2"]
    assert main([*args, "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert (report["array_fraction"], report["array_size"], report["array_max_parallel"]) == (
        0.2, 4, 2,
    )  # fmt: skip
    expected = make_arrays(split(synthetic(30, seed=1, capacity_cpu=256), 2), 0.2, 4, 2, 1)
    assert report["workloads"]["synthetic"]["jobs"] == len(expected) > 30
