"""Waits of each team's widest tasks, and how often their own queue's later tasks passed them.

Backfill's reservation exists so that a wide head is not starved by the narrower tasks behind
it; fair share's rule that the least-served queue starts its own later tasks past its blocked
head (`fairshare._FairShareRun._own_first`) may trade that away. This measures the trade: per team,
the p95 and longest wait of its wide tasks (the widest `WIDE_FRACTION` of the whole workload
by CPUs) beside those of all its tasks, and the passes: an own task that came later in the
queue's order (priority not above, arrived later) and started first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from reconciler.sim.engine import JobRecord
from reconciler.sim.teams import rank_quantile

WIDE_FRACTION = 0.10


@dataclass(frozen=True)
class TeamWaits:
    tasks: int  # started
    p95: float  # seconds, of all its started tasks
    longest: float
    wide: int  # started wide tasks
    wide_p95: float
    wide_longest: float
    passes: int  # (wide task, own later task that started before it) pairs
    wide_passed: int  # wide tasks passed at least once by their own later tasks


@dataclass(frozen=True)
class WideWaits:
    wide_cpu: float  # a task asking for at least this many CPUs is wide
    teams: dict[str, TeamWaits]
    all: TeamWaits  # every team together (passes: within each team, summed)


def wide_threshold(records: Sequence[JobRecord], fraction: float = WIDE_FRACTION) -> float:
    """The CPUs of the narrowest task among the widest `fraction` of all tasks (ties in)."""
    cpus = sorted((r.job.cpu for r in records), reverse=True)
    if not cpus:
        return 0.0
    return cpus[max(0, min(len(cpus) - 1, int(fraction * len(cpus)) - 1))]


def _passed_by(wide: JobRecord, own: Sequence[JobRecord]) -> int:
    """Own tasks behind `wide` in the queue's order (priority, then arrival) that started
    before it."""
    assert wide.start is not None
    return sum(
        1
        for other in own
        if other is not wide
        and other.start is not None
        and other.start < wide.start
        and (other.job.priority, -other.job.arrival) < (wide.job.priority, -wide.job.arrival)
    )


def _team(records: Sequence[JobRecord], wide_cpu: float, own: Sequence[JobRecord]) -> TeamWaits:
    started = [r for r in records if r.start is not None]
    waits = [(r.start or 0.0) - r.job.arrival for r in started]
    wide = [r for r in started if r.job.cpu >= wide_cpu]
    wide_waits = [(r.start or 0.0) - r.job.arrival for r in wide]
    passed = [_passed_by(r, own) for r in wide] if own else []
    return TeamWaits(
        tasks=len(started),
        p95=rank_quantile(waits, 0.95),
        longest=max(waits, default=0.0),
        wide=len(wide),
        wide_p95=rank_quantile(wide_waits, 0.95),
        wide_longest=max(wide_waits, default=0.0),
        passes=sum(passed),
        wide_passed=sum(1 for p in passed if p),
    )


def wide_waits(
    records: Sequence[JobRecord],
    owner_of: Callable[[str], str],
    fraction: float = WIDE_FRACTION,
) -> WideWaits:
    """Per owner (a team's queue), the waits of all and of the wide tasks, and the passes."""
    wide_cpu = wide_threshold(records, fraction)
    by_owner: dict[str, list[JobRecord]] = {}
    for record in records:
        by_owner.setdefault(owner_of(record.job.name), []).append(record)
    teams = {name: _team(own, wide_cpu, own) for name, own in sorted(by_owner.items())}
    overall = replace(
        _team(records, wide_cpu, []),
        passes=sum(t.passes for t in teams.values()),
        wide_passed=sum(t.wide_passed for t in teams.values()),
    )
    return WideWaits(wide_cpu, teams, overall)
