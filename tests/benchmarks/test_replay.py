"""The pieces of benchmarks/replay.py on tiny inputs: the slice, the scaling, the queue file,
the simulator's side and the comparison (the real replay itself takes minutes and a Ray head)."""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from benchmarks import replay
from reconciler.sim.workload import Job

# SWF: id, submit, wait, run, procs, ..., requested procs (field 8).
TRACE = """\
; a header comment
1 1000 0 500 1 -1 -1 1
2 1100 0 -1 1 -1 -1 1
3 1200 0 50 8 -1 -1 8
4 1300 0 3000 2 -1 -1 2
5 1400 0 100 -1 -1 -1 4
6 2000 0 10 1 -1 -1 1
"""


def _trace(tmp_path: Path) -> Path:
    path = tmp_path / "t.swf"
    path.write_text(TRACE)
    return path


def test_the_slice_skips_what_does_not_fit_scales_and_deals_to_the_queues(tmp_path: Path) -> None:
    how = replay.Scale(span=100, run_factor=0.1, min_run=3, max_run=25, timeout_slack=10)
    jobs = replay.trace_slice(_trace(tmp_path), start=1, count=3, seed=1, how=how)
    # Job 2 has no run time and job 3 is wider than 4 CPUs; job 1 is skipped by `start`.
    assert [j.name for j in jobs] == ["team-a/swf-000004", "team-b/swf-000005", "team-a/swf-000006"]
    # Arrivals squeezed into the span, from the slice's first; runs x 0.1, clamped to 3..25.
    assert [j.arrival for j in jobs] == [0.0, 14.0, 100.0]
    assert [j.run for j in jobs] == [25.0, 10.0, 3.0]
    assert [j.cpu for j in jobs] == [2.0, 4.0, 1.0]
    for job in jobs:  # the timeout keeps its ratio to the run, plus the slack
        assert job.run + 10 <= job.timeout <= 5 * job.run + 11


def test_the_queue_file_has_two_teams_with_preemption_for_priority_7() -> None:
    config = replay.parse_queues(replay.queue_file(grace=3))
    assert [q.name for q in config.spec.queues] == list(replay.QUEUES)
    for queue in config.spec.queues:
        assert queue.nominal_quota.cpu == 2
        block = queue.preemption
        assert (block.within_queue, block.reclaim_within_cohort) == ("LowerPriority", "Any")
        assert (block.min_preemptor_priority, block.grace_period_seconds) == (7, 3)


def test_a_task_file_sleeps_its_run_with_its_priority_and_timeout() -> None:
    doc = yaml.safe_load(replay.spec_yaml(Job("team-a/x", 0, 12, 2, 8, 40)))
    assert doc["spec"] == {
        "entrypoint": "sleep 12",
        "priority": 8,
        "resources": {"cpu": 2},
        "timeoutSeconds": 40,
    }


def test_the_simulated_side_records_starts_and_a_preemption() -> None:
    # team-a fills the cluster (it borrows team-b's idle quota); team-b's priority-9 task
    # reclaims what was lent at once.
    jobs = [Job(f"team-a/low{i}", 0, 100, 1, 0, 0) for i in range(4)] + [
        Job("team-b/urgent", 10, 5, 2, 9, 0)
    ]
    outcome = replay.simulated(jobs, replay.parse_queues(replay.queue_file(grace=3)))
    assert outcome.starts["team-b/urgent"] == 13  # after the victims' 3 s grace
    assert all(outcome.starts[f"team-a/low{i}"] == 0 for i in range(4))
    assert sorted(p.preemptor for p in outcome.preemptions) == ["team-b/urgent"] * 2
    assert all(p.at == 10 for p in outcome.preemptions)
    assert not outcome.unfinished


def test_the_comparison_counts_order_preemptions_and_waits() -> None:
    jobs = [Job(n, a, 5, 1, 0, 0) for n, a in (("a", 0), ("b", 1), ("c", 2), ("d", 3))]
    sim = replay.Outcome(
        starts={"a": 0, "b": 1, "c": 5, "d": 6},
        preemptions=[replay.Preempted(4, "a", "c"), replay.Preempted(5, "b", "d")],
    )
    real = replay.Outcome(
        starts={"a": 0.5, "b": 1.5, "d": 6.0, "c": 9.0},
        preemptions=[replay.Preempted(4.2, "a", "c"), replay.Preempted(7, "a", "d")],
    )
    got = replay.compare(jobs, sim, real)
    assert replay.start_order(real) == ["a", "b", "d", "c"]
    assert (got.same_position, got.discordant, got.pairs) == (2, 1, 6)
    assert got.both == [("a", "c")]
    assert got.only_sim == [("b", "d")] and got.only_real == [("a", "d")]
    assert got.summary()["preemptors_both"] == 2  # c and d preempted on both sides
    waits = {r.name: (r.sim_wait, r.real_wait, r.sim_preempted, r.real_preempted) for r in got.rows}
    assert waits["c"] == (3, 7.0, 0, 0)
    assert waits["a"] == (0, 0.5, 1, 2)
    summary = got.summary()
    assert summary["max_abs_delta"] == 4.0 and summary["within_5s"] == 4
    assert "2 at the same position; 1 of 6 pairs the other way round" in replay.render(got)


def test_discordant_pairs_of_identical_and_reversed_orders() -> None:
    assert replay.discordant_pairs(["a", "b", "c"], ["a", "b", "c"]) == 0
    assert replay.discordant_pairs(["a", "b", "c"], ["c", "b", "a"]) == 3
    assert replay.discordant_pairs(["a", "b", "x"], ["b", "a"]) == 1  # only common tasks


def test_serve_s_preemptions_are_read_from_its_log() -> None:
    log = (
        "2026-12-01 12:40:30,000 INFO rayqueue.loop: submitted team-b/x (priority 0, 1 CPU)\n"
        "2026-12-01 12:40:32,314 INFO rayqueue.loop: preempted team-b/a for team-b/p "
        "(priority 7)\n"
        "2026-12-01 12:40:35,500 INFO rayqueue.loop: preempted team-a/b, team-a/c for "
        "team-b/q (priority 9, reclaiming lent quota)\n"
        "2026-12-01 12:40:36,000 INFO rayqueue.loop: stop requested for team-a/b (rq-1): "
        "preempted by team-b/q\n"
    )
    t0 = time.mktime(time.strptime("2026-12-01 12:40:30", "%Y-%m-%d %H:%M:%S"))
    assert replay.log_preemptions(log, t0) == [
        replay.Preempted(2.314, "team-b/a", "team-b/p"),
        replay.Preempted(5.5, "team-a/b", "team-b/q"),
        replay.Preempted(5.5, "team-a/c", "team-b/q"),
    ]


def test_the_overhead_is_the_median_extra_of_runs_never_preempted() -> None:
    jobs = [Job(n, 0, 3, 1, 0, 10) for n in ("a", "b", "c", "d")]
    real = replay.Outcome(
        starts={"a": 0, "b": 0, "c": 0, "d": 0}, ends={"a": 10, "b": 11.4, "c": 50, "d": 5}
    )
    # d's extra (2 s) is left out: it was preempted; the median of 7, 8.4 and 47 is 8.4.
    assert replay.run_overhead(jobs, real, {"d"}) == 8
    longer = replay.with_overhead(jobs, 8)
    assert [(j.run, j.timeout) for j in longer[:1]] == [(11, 18)]
    assert replay.with_overhead([Job("x", 0, 3, 1, 0, 0)], 8)[0].timeout == 0
