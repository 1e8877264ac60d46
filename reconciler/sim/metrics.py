"""Scheduling metrics of one simulated run: utilization, waits per priority, slowdown, and, when
jobs do not keep their word, what Ray really held and the priority inversions inside Ray."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from reconciler.sim.engine import SimResult
from specs.task.models import Phase

URGENT_PRIORITY = 7
"""Priorities from here up are "urgent" for the preemption goals (p95 wait of 10 minutes)."""

BSLD_FLOOR_SECONDS = 10.0
"""Bounded slowdown divides by max(run, 10 s), so very short jobs do not dominate the mean."""


@dataclass(frozen=True)
class WaitStats:
    jobs: int
    mean: float
    p50: float
    p95: float


@dataclass(frozen=True)
class Metrics:
    policy: str
    jobs: int
    utilization: float  # integral of declared CPU use / (capacity x makespan)
    makespan: float  # first arrival to last end, seconds
    mean_wait: float  # waits, here and below: from arrival to when Ray really started the work
    waits: dict[int, WaitStats]  # by priority level
    wide: WaitStats  # jobs asking for at least half the cluster: the ones besteffort starves
    urgent: WaitStats  # jobs of priority URGENT_PRIORITY and up
    mean_bounded_slowdown: float
    longest_wait: float
    longest_wait_job: str
    top_longest_wait: float  # longest wait at the highest priority level
    preemptions: int  # runs stopped to make room for more urgent ones
    max_preemptions_per_job: int
    wasted_fraction: float  # CPU-seconds of preempted runs over all CPU-seconds run
    unfinished: int
    passes: int
    pass_ms: float  # mean planner time per pass
    task_us: float  # mean planner time per live task per pass
    wall_seconds: float
    # With teams (--teams): Jain's index of the weight-normalised team shares, and the shares,
    # averaged over the seconds in which every team had waiting work; and the reclaim test.
    jain_index: float | None = None
    team_shares: dict[str, float] | None = None
    lost_cpu_hours: float = 0.0  # CPU-hours of preempted runs thrown away (wasted)
    contended_seconds: float | None = None
    reclaim: dict[str, float | None] | None = None
    # --idle-team-until: what the share formula owes each team once team-0 arrives
    # (owed.expected_late), averaged over the contended seconds, and Jain's index against it
    late: dict[str, object] | None = None
    # With teams: shares of delivered CPU-hours (run, contended, sliding days), p95 waits
    # (reconciler.sim.teams.Delivered, as a dict).
    delivered: dict[str, object] | None = None
    # With --tree: the same per user (reconciler.sim.teams.Delivered over the users' queues).
    users: dict[str, object] | None = None
    # With teams: per team, the waits of all and of the widest tasks, and how often its own
    # later tasks passed a wide one (reconciler.sim.widewaits.WideWaits, as a dict).
    wide_waits: dict[str, object] | None = None
    # With teams: per team, the load it offers as a multiple of its weight's share
    # (reconciler.sim.teams.offered).
    offered: dict[str, float] | None = None
    # What was held, over capacity x makespan: declared, the CPUs the planner counts, from when
    # Ray listed each run RUNNING to its end; in fact, the CPUs Ray really gave each run, from
    # when it started the work to its end. Both count every run, preempted and timed out too.
    held_declared: float = 0.0
    held_in_fact: float = 0.0
    misdeclared: int = 0  # jobs whose real use is not what they declare
    ray_waited: int = 0  # jobs that waited inside Ray for their real use to fit
    # Priority inversions inside Ray (the engine's docstring): starts of lower-priority jobs
    # submitted after one that waited, and the share of the top priority's jobs passed over so;
    # and the same for lower-priority jobs submitted before it (Ray's order of submission).
    inversions: int = 0
    top_inverted: float = 0.0
    behind_lower: int = 0
    top_behind_lower: float = 0.0
    timed_out: int = 0  # jobs whose final phase is TimedOut
    # Of those, the ones Ray never started: each counts in the waits with its wait until its
    # timeout stopped it, a lower bound of the wait it would have had.
    never_started: int = 0

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["waits"] = {str(k): asdict(v) for k, v in sorted(self.waits.items())}
        data["wide"] = asdict(self.wide)
        data["urgent"] = asdict(self.urgent)
        return data


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 100]."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _stats(waits: Sequence[float]) -> WaitStats:
    if not waits:
        return WaitStats(0, math.nan, math.nan, math.nan)
    return WaitStats(
        len(waits), sum(waits) / len(waits), percentile(waits, 50), percentile(waits, 95)
    )


def measure(result: SimResult) -> Metrics:
    done = [r for r in result.records if r.start is not None and r.end is not None]
    if not done:
        raise ValueError("no job finished; nothing to measure")
    never = [
        r
        for r in result.records
        if r.submitted is not None and r.start is None and r.end is not None
    ]
    first = min(r.job.arrival for r in result.records)
    makespan = max(r.end or 0.0 for r in done) - first
    # Useful work only: the run that finished, and what a resumable job saved in its earlier
    # runs. The rest of the preempted runs is counted as wasted instead.
    used = sum(
        r.job.cpu * ((r.end or 0.0) - (r.last_start or r.start or 0.0) + r.saved) for r in done
    )
    wasted = sum(r.wasted for r in result.records)
    waited = done + never
    waits = [r.wait or 0.0 for r in done] + [(r.end or 0.0) - r.job.arrival for r in never]
    by_priority: dict[int, list[float]] = {}
    for record, wait in zip(waited, waits, strict=True):
        by_priority.setdefault(record.job.priority, []).append(wait)
    # Arrival to the end of the run that finished: a preempted job pays for its reruns here.
    slowdowns = [
        max(1.0, ((r.end or 0.0) - r.job.arrival) / max(r.job.run, BSLD_FLOOR_SECONDS))
        for r in done
    ]
    longest = max(range(len(waited)), key=lambda i: (waits[i], waited[i].job.name))
    top = [r for r in result.records if r.job.priority == max(by_priority)]
    area = result.capacity_cpu * makespan
    return Metrics(
        policy=result.policy,
        jobs=len(result.records),
        utilization=used / (result.capacity_cpu * makespan) if makespan > 0 else 0.0,
        makespan=makespan,
        mean_wait=sum(waits) / len(waits),
        waits={level: _stats(w) for level, w in sorted(by_priority.items())},
        wide=_stats(
            [w for r, w in zip(waited, waits, strict=True) if 2 * r.job.cpu >= result.capacity_cpu]
        ),
        urgent=_stats(
            [w for r, w in zip(waited, waits, strict=True) if r.job.priority >= URGENT_PRIORITY]
        ),
        mean_bounded_slowdown=sum(slowdowns) / len(slowdowns),
        longest_wait=waits[longest],
        longest_wait_job=waited[longest].job.name,
        top_longest_wait=max(by_priority[max(by_priority)]),
        preemptions=sum(r.preemptions for r in result.records),
        max_preemptions_per_job=max((r.preemptions for r in result.records), default=0),
        wasted_fraction=wasted / (used + wasted) if used + wasted > 0 else 0.0,
        lost_cpu_hours=wasted / 3600,
        unfinished=result.unfinished,
        passes=result.passes,
        pass_ms=result.pass_ms,
        task_us=result.task_us,
        wall_seconds=result.wall_seconds,
        held_declared=sum(r.declared_cpu_seconds for r in result.records) / area if area else 0.0,
        held_in_fact=sum(r.held_cpu_seconds for r in result.records) / area if area else 0.0,
        misdeclared=sum(1 for r in result.records if r.job.held_cpu != r.job.cpu),
        ray_waited=sum(1 for r in result.records if r.ray_wait > 0),
        inversions=sum(r.inversions for r in result.records),
        top_inverted=sum(1 for r in top if r.inversions) / len(top),
        behind_lower=sum(r.behind_lower for r in result.records),
        top_behind_lower=sum(1 for r in top if r.behind_lower) / len(top),
        timed_out=sum(1 for r in result.records if r.phase is Phase.TIMED_OUT),
        never_started=len(never),
    )
