"""The waits of each team's widest tasks, and the passes by its own later tasks."""

from __future__ import annotations

from reconciler.sim.engine import JobRecord
from reconciler.sim.teams import team_of
from reconciler.sim.widewaits import wide_threshold, wide_waits
from reconciler.sim.workload import Job


def record(name: str, arrival: float, start: float, cpu: float, priority: int = 0) -> JobRecord:
    return JobRecord(Job(name, arrival, 10, cpu, priority, 0), start=start, end=start + 10)


def test_the_wide_threshold_takes_the_widest_tenth_ties_in() -> None:
    records = [record(f"team-0/j{i}", 0, 0, cpu) for i, cpu in enumerate(range(1, 21))]
    assert wide_threshold(records) == 19  # 2 of 20
    assert wide_threshold([*records, record("team-0/tie", 0, 0, 19)]) == 19
    assert wide_threshold([]) == 0


def test_wide_waits_per_team_and_passes_by_own_later_tasks() -> None:
    narrow = [record(f"team-1/n{i}", 0, 0, 1) for i in range(18)]
    records = [
        record("team-0/wide", 0, 100, 64),  # waits 100 s
        record("team-0/later", 5, 20, 1),  # behind it (arrived later), started first: a pass
        record("team-0/urgent", 6, 30, 1, priority=5),  # ahead of it by priority: no pass
        record("team-0/after", 7, 200, 1),  # started after it: no pass
        record("team-1/wide", 0, 0, 64),
        record("team-1/other", 1, 0, 1),  # same start, not before: no pass
        *narrow,
    ]
    got = wide_waits(records, team_of)
    assert got.wide_cpu == 64
    zero, one = got.teams["team-0"], got.teams["team-1"]
    assert (zero.wide, zero.wide_longest, zero.wide_p95) == (1, 100, 100)
    assert (zero.passes, zero.wide_passed) == (1, 1)
    assert zero.longest == 193 and zero.tasks == 4
    assert (one.wide, one.wide_longest, one.passes, one.wide_passed) == (1, 0, 0, 0)
    assert (got.all.wide, got.all.wide_longest, got.all.passes) == (2, 100, 1)
    assert got.all.tasks == len(records)
