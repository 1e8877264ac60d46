"""Teams in the simulator: split a workload over team folders, give each a queue, and measure
how fairly the cluster was shared.

Job i goes to team i mod N (folder `team-<k>/`), or with `--team-load` so that the teams offer
the work in those proportions (`team_indices`). Each team's nominal quota is an equal split of
the cluster, lending and borrowing are unlimited, and each team has its own weight. With a tree
(`--tree 4x2`, nested queues), each team is divided into users (`team-<k>/user-<j>/`: a team's
n-th job to user n mod U; with equal loads, job i to user (i div N) mod U), sub-queues with an
equal split of their team's quota and their own weights.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from reconciler.sim.engine import JobRecord
from reconciler.sim.workload import Job, offered_load
from specs.queues.config import (
    DEFAULT_HALF_LIFE,
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
    QueueConfig,
    QueueEntry,
)


def team_name(index: int) -> str:
    return f"team-{index}"


def team_of(job_name: str) -> str:
    return job_name.split("/", 1)[0]


def user_name(team: int, user: int) -> str:
    return f"{team_name(team)}/user-{user}"


def user_of(job_name: str) -> str:
    return "/".join(job_name.split("/", 2)[:2])


def team_indices(
    workload: Sequence[Job], teams: int, loads: Sequence[float] | None = None
) -> list[int]:
    """The team of each job, in workload order: job i to team i mod `teams`. With `loads`, each
    job to the team furthest behind its part of the CPU-seconds offered so far (the lowest
    offered / load; the lowest index on a tie), so that every team offers its part of the work
    over the run, within one job. The choice never looks at the job itself, so each team's jobs
    are a like sample of the workload (choosing by the work after the job would send the largest
    jobs to the largest part). A split by job count would not balance the work: with heavy-tailed
    tasks, equal job counts give the teams clearly unequal parts of it."""
    if loads is None:
        return [i % teams for i in range(len(workload))]
    offered = [0.0] * teams
    out: list[int] = []
    for job in workload:
        work = job.cpu * job.run
        team = min(range(teams), key=lambda k: (offered[k] / loads[k], k))
        offered[team] += work
        out.append(team)
    return out


def offered(
    workload: Sequence[Job], teams: int, weights: Sequence[float], capacity: float
) -> dict[str, float]:
    """Per team, its part of the workload's offered load (`workload.offered_load`) as a multiple
    of its weight's share of the cluster: above 1 it is saturated, and the nearer 1 the sooner
    its queue runs dry."""
    load = offered_load(list(workload), capacity)
    work = {team_name(k): 0.0 for k in range(teams)}
    for job in workload:
        work[team_of(job.name)] += job.cpu * job.run
    total = sum(work.values()) or 1.0
    return {t: load * work[t] / total / (weights[k] / sum(weights)) for k, t in enumerate(work)}


def split_tree(
    workload: Sequence[Job], teams: int, users: int, loads: Sequence[float] | None = None
) -> list[Job]:
    """Jobs to teams as `split`, and a team's n-th job to its user n mod `users` (with equal
    loads: job i to user (i div `teams`) mod `users`)."""
    counts = [0] * teams
    out = []
    for job, team in zip(workload, team_indices(workload, teams, loads), strict=True):
        out.append(replace(job, name=f"{user_name(team, counts[team] % users)}/{job.name}"))
        counts[team] += 1
    return out


def divide(config: QueueConfig, users: int, user_weights: Sequence[float]) -> QueueConfig:
    """Each team queue divided into `users` sub-queues (nested queues): an equal split of its
    nominal quota each, the given weights."""
    entries = []
    for entry in config.spec.queues:
        entries.append(entry)
        share = entry.nominal_quota.model_copy(
            update={
                "cpu": entry.nominal_quota.cpu / users,
                "memory": entry.nominal_quota.memory // users,
            }
        )
        entries += [
            QueueEntry(name=f"{entry.name}/user-{j}", nominal_quota=share, weight=user_weights[j])
            for j in range(users)
        ]
    spec = config.spec.model_copy(update={"queues": entries})
    return config.model_copy(update={"spec": spec})


def user_weight_shares(
    teams: int, users: int, weights: Sequence[float], user_weights: Sequence[float]
) -> dict[str, float]:
    """Each user's due share of the cluster: its team's weight share times its own within."""
    return {
        user_name(k, j): weights[k] / sum(weights) * user_weights[j] / sum(user_weights)
        for k in range(teams)
        for j in range(users)
    }


def split(workload: Sequence[Job], teams: int, loads: Sequence[float] | None = None) -> list[Job]:
    """Job i (in workload order) to team i mod `teams`; with `loads`, so that the teams offer
    the work in those proportions (`team_indices`)."""
    return [
        replace(job, name=f"{team_name(team)}/{job.name}")
        for job, team in zip(workload, team_indices(workload, teams, loads), strict=True)
    ]


def split_over(workload: Sequence[Job], queues: Sequence[str]) -> list[Job]:
    """Job i (in workload order) to the folder of queue i mod len(queues); with no queue listed,
    every job stays outside them all (the default queue)."""
    if not queues:
        return list(workload)
    return [
        replace(job, name=f"{queues[i % len(queues)]}/{job.name}") for i, job in enumerate(workload)
    ]


def team_config(
    teams: int,
    weights: Sequence[float],
    capacity_cpu: float,
    memory: float,
    *,
    quota: bool = True,
    half_life: float | None = DEFAULT_HALF_LIFE,
    fair_preemption: bool = False,
) -> QueueConfig:
    """Equal nominal quotas (none with `quota=False`: all capacity is then the default
    queue's, idle and lent, so every start is a borrow ordered by weighted share), no borrowing
    or lending limits, the given weights; past use decayed with `half_life` seconds (None:
    only current use counts, `mode: CurrentUsage`); `fair_preemption`: a queue below another's
    weighted share may stop its runs (`preemptionStrategies: [LessThanOrEqualToFinalShare]`)."""
    sharing: dict[str, object] = (
        {"mode": "CurrentUsage"} if half_life is None else {"usageHalfLife": half_life}
    )
    if fair_preemption:
        sharing["preemptionStrategies"] = [LESS_THAN_OR_EQUAL_TO_FINAL_SHARE]
    share = 1 / teams if quota else 0.0
    return QueueConfig.model_validate(
        {
            "apiVersion": "rayqueue/v1",
            "kind": "QueueConfig",
            "spec": {
                "queues": [
                    {
                        "name": team_name(k),
                        "nominalQuota": {
                            "cpu": capacity_cpu * share,
                            "memory": f"{int(memory * share)}B",
                        },
                        "weight": weights[k],
                    }
                    for k in range(teams)
                ],
                "fairSharing": sharing,
            },
        }
    )


def within_teams(
    records: Sequence[JobRecord], teams: int, users: int, user_weights: Sequence[float]
) -> dict[str, dict[str, object]]:
    """Per team: its users' shares of the team's delivered CPU-hours over the seconds in which
    every one of its users had work waiting, the weighted Jain index of those shares against
    the user weights, and how many such seconds there were."""
    result: dict[str, dict[str, object]] = {}
    for k in range(teams):
        team = team_name(k)
        mine = [r for r in records if team_of(r.job.name) == team]
        due = {user_name(k, j): user_weights[j] / sum(user_weights) for j in range(users)}
        got = delivered_by(mine, due, user_of)
        seconds = _contended_seconds(mine, list(due), user_of)
        result[team] = {
            "contended_shares": got.contended_shares,
            "weighted_jain": got.weighted_jain,
            "contended_seconds": seconds,
        }
    return result


def _contended_seconds(
    records: Sequence[JobRecord], names: Sequence[str], owner_of: Callable[[str], str]
) -> float:
    deltas: list[tuple[float, str, int]] = []
    for record in records:
        owner = owner_of(record.job.name)
        for since, until in life(record).waits:
            deltas.append((since, owner, 1))
            if until is not None:
                deltas.append((until, owner, -1))
    deltas.sort(key=lambda d: d[0])
    waiting = dict.fromkeys(names, 0)
    total = 0.0
    for index, (at, owner, change) in enumerate(deltas):
        waiting[owner] += change
        if index + 1 < len(deltas) and all(waiting[n] > 0 for n in names):
            total += deltas[index + 1][0] - at
    return total


@dataclass(frozen=True)
class Life:
    """When a job held its CPUs and when it waited (virtual seconds)."""

    runs: tuple[tuple[float, float], ...]  # each run: those preemption stopped, then the last
    waits: tuple[tuple[float, float | None], ...]  # None: still waiting when the run ended
    requeued: tuple[bool, ...]  # by run: it queued again at its end (preempted)


def life(record: JobRecord) -> Life:
    """A preempted job holds its CPUs only while each of its runs lasts, and waits again from
    each preempted run's end to its next start; counting from its first start to its last
    end would credit its team with the hours it spent queued again (fair-share preemption
    stops whole runs)."""
    runs = list(record.lost)
    requeued = [True] * len(runs)
    last = record.last_start if record.last_start is not None else record.start
    if last is not None and (not runs or last > runs[-1][0]):  # it ran again after its losses
        runs.append((last, record.end if record.end is not None else last))
        requeued.append(False)
    waits: list[tuple[float, float | None]] = []
    since: float | None = record.job.arrival
    for begin, end in runs:
        if since is not None and begin > since:
            waits.append((since, begin))
        since = end
    if not runs or requeued[-1]:
        waits.append((record.job.arrival if not runs else runs[-1][1], None))
    return Life(tuple(runs), tuple(waits), tuple(requeued))


@dataclass(frozen=True)
class Fairness:
    jain_index: float  # of the teams' weight-normalised shares; 1 is perfectly fair
    team_shares: dict[str, float]  # mean CPU share / weight over the contended seconds
    contended_seconds: float  # simulated seconds in which every team had waiting work


def jain(values: Sequence[float]) -> float:
    """Jain's index: (sum x)^2 / (n sum x^2); 1 when all equal, 1/n when one takes all."""
    total = sum(values)
    squares = sum(v * v for v in values)
    return total * total / (len(values) * squares) if squares > 0 else 1.0


def fairness(
    records: Sequence[JobRecord], teams: int, weights: Sequence[float], capacity_cpu: float
) -> Fairness:
    """Each team's CPU share of the cluster divided by its weight, averaged over the seconds in
    which every team had work waiting (arrived, not yet started): only then is a fair split
    owed. Only CPUs are simulated, so the dominant share is the CPU share."""
    names = [team_name(k) for k in range(teams)]
    integral = dict.fromkeys(names, 0.0)
    contended = 0.0
    for _, span, waiting, held in sweep(records, team_of, names):
        if span > 0 and all(waiting[t] > 0 for t in names):
            contended += span
            for k, t in enumerate(names):
                integral[t] += span * held[t] / capacity_cpu / weights[k]
    shares = {t: (integral[t] / contended if contended else 0.0) for t in names}
    return Fairness(jain(list(shares.values())), shares, contended)


def sweep(
    records: Sequence[JobRecord], owner_of: Callable[[str], str], names: Sequence[str]
) -> Iterator[tuple[float, float, dict[str, int], dict[str, float]]]:
    """The run as a sweep line: for each interval between two events (an arrival, a start,
    an end), its start, its length, and per group the tasks waiting and the CPUs held in it.
    The dicts are live: read them before the next interval."""
    # (time, group, change in waiting count, change in CPUs held)
    deltas: list[tuple[float, str, int, float]] = []
    for record in records:
        group = owner_of(record.job.name)
        spans = life(record)
        for since, until in spans.waits:
            deltas.append((since, group, 1, 0.0))
            if until is not None:
                deltas.append((until, group, -1, 0.0))
        for begin, end in spans.runs:
            deltas += [(begin, group, 0, record.job.cpu), (end, group, 0, -record.job.cpu)]
    deltas.sort(key=lambda d: d[0])
    waiting = dict.fromkeys(names, 0)
    held = dict.fromkeys(names, 0.0)
    index = 0
    while index < len(deltas):
        now = deltas[index][0]
        while index < len(deltas) and deltas[index][0] == now:
            _, group, dw, dc = deltas[index]
            waiting[group] += dw
            held[group] += dc
            index += 1
        if index == len(deltas):
            return
        yield now, deltas[index][0] - now, waiting, held


def drop_until(workload: Sequence[Job], team: str, until: float) -> list[Job]:
    """`team` is idle until `until`: its jobs that arrive earlier are left out."""
    return [j for j in workload if team_of(j.name) != team or j.arrival >= until]


@dataclass(frozen=True)
class Reclaim:
    """How a team's lent quota came back when its work returned."""

    returned_at: float  # its first arrival after being idle
    regained_at: float | None  # when it first held its nominal quota (None: never)
    borrowed_meanwhile: float  # CPUs others started above their nominal in between: should be 0
    borrowed_at_return: float  # CPUs other teams held above their nominal when it returned


def reclaim(
    records: Sequence[JobRecord], team: str, nominal: float, teams: int, until: float
) -> Reclaim:
    names = [team_name(k) for k in range(teams)]
    # (time, order, team, cpu change, waiting change); at one instant ends come first, so
    # freed CPUs are what a start can take, and arrivals last
    events: list[tuple[float, int, str, float, int]] = []
    for record in records:
        owner = team_of(record.job.name)
        if owner == team:
            events.append((record.job.arrival, 2, owner, 0.0, 1))
        spans = life(record)
        mine = 1 if owner == team else 0
        for (begin, end), again in zip(spans.runs, spans.requeued, strict=True):
            events.append((begin, 1, owner, record.job.cpu, -mine))
            events.append((end, 0, owner, -record.job.cpu, mine if again else 0))
    events.sort(key=lambda e: (e[0], e[1]))
    returned = min(
        (r.job.arrival for r in records if team_of(r.job.name) == team and r.job.arrival >= until),
        default=until,
    )
    held = dict.fromkeys(names, 0.0)
    waiting = 0
    regained: float | None = None
    meanwhile = 0.0
    at_return: float | None = None
    for time, _, owner, change, arrived in events:
        if at_return is None and time >= returned:
            at_return = sum(max(0.0, held[t] - nominal) for t in names if t != team)
        before = held[owner]
        held[owner] += change
        waiting += arrived
        if time < returned or regained is not None:
            continue
        if owner == team and held[team] >= nominal - 1e-9:
            regained = time
        elif owner != team and change > 0 and waiting > 0:
            # another team borrowed while this one was below its quota with work waiting
            meanwhile += max(0.0, held[owner] - max(before, nominal))
    return Reclaim(returned, regained, meanwhile, at_return or 0.0)


@dataclass(frozen=True)
class Delivered:
    """Each team's share of the CPU-hours delivered to the teams, and how fair that was."""

    run_shares: dict[str, float]  # over the whole run
    contended_shares: dict[str, float]  # over the seconds in which every team had work waiting
    weighted_jain: float  # Jain's index of contended share / weight share
    window_jain_min: float | None  # the worst sliding day (only days contended half the time)
    window_jain_mean: float | None
    windows: int
    p95_wait: dict[str, float]  # per team, seconds
    # Each run started in the contended time (its start decided while every team had work
    # waiting), counted whole: CPUs x its length, even past the contended time's end
    # (`_started_while`). The contended shares cut a run at the end of the contended time: a
    # team that waits for room for a wide task until its queue empties has the wait counted
    # and the run not.
    started_shares: dict[str, float] = field(default_factory=dict)
    started_jain: float = 1.0
    # Per team, its waits at each of WAIT_QUANTILES (seconds, keyed "p50" ...) and their mean
    # ("mean"): the p95 alone can sit on a step of one team's waits and not of another's
    # (scheduling.md, "Against the goal").
    wait_quantiles: dict[str, dict[str, float]] = field(default_factory=dict)


WAIT_QUANTILES = (0.5, 0.9, 0.95, 0.99)


def rank_quantile(values: Sequence[float], q: float) -> float:
    """The sorted values' entry at index int(q * n), capped at the last; 0 for none. The rank
    every p95 wait in the simulator's team figures has been read at."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def _wait_quantiles(waits: Sequence[float]) -> dict[str, float]:
    """The waits at each of WAIT_QUANTILES, and their mean (0 for none): a team's mean wait
    follows all its tasks, where a quantile can sit on a step of its own draw of jobs."""
    ordered = sorted(waits)  # once: rank_quantile re-sorting a sorted list is linear
    quantiles = {f"p{round(q * 100)}": rank_quantile(ordered, q) for q in WAIT_QUANTILES}
    return {**quantiles, "mean": sum(ordered) / len(ordered) if ordered else 0.0}


def delivered(
    records: Sequence[JobRecord],
    teams: int,
    weights: Sequence[float],
    *,
    window: float = 86400.0,
    stride: float = 21600.0,
) -> Delivered:
    """Shares of delivered CPU-seconds (a job's CPUs x the time it held them), over the run,
    over the contended seconds (every team had work waiting), and over sliding windows of
    `window` seconds every `stride`, counting only their contended seconds."""
    names = [team_name(k) for k in range(teams)]
    due = {t: weights[k] / sum(weights) for k, t in enumerate(names)}
    return delivered_by(records, due, team_of, window=window, stride=stride)


def delivered_by(
    records: Sequence[JobRecord],
    weight_share: dict[str, float],
    owner_of: Callable[[str], str],
    *,
    window: float = 86400.0,
    stride: float = 21600.0,
) -> Delivered:
    """`delivered` for any grouping of the jobs: `owner_of` names a job's group (a team, or a
    user in a tree), `weight_share` each group's due share of the cluster."""
    names = list(weight_share)
    waits: dict[str, list[float]] = {t: [] for t in names}
    for record in records:
        if record.start is not None:
            waits[owner_of(record.job.name)].append(record.start - record.job.arrival)
    run = dict.fromkeys(names, 0.0)
    contended = dict.fromkeys(names, 0.0)
    spans: list[tuple[float, float]] = []  # the contended time, as closed intervals
    buckets: dict[int, tuple[dict[str, float], float]] = {}  # by stride: CPU-s, contended s
    for now, span, waiting, held in sweep(records, owner_of, names):
        for t in names:
            run[t] += span * held[t]
        if span <= 0 or not all(waiting[t] > 0 for t in names):
            continue
        if spans and spans[-1][1] == now:
            spans[-1] = (spans[-1][0], now + span)
        else:
            spans.append((now, now + span))
        for t in names:
            contended[t] += span * held[t]
        at, end = now, now + span
        while at < end:  # split the span over the buckets it covers
            b = int(at // stride)
            upto = min(end, (b + 1) * stride)
            cpu, secs = buckets.get(b, (dict.fromkeys(names, 0.0), 0.0))
            for t in names:
                cpu[t] += (upto - at) * held[t]
            buckets[b] = (cpu, secs + upto - at)
            at = upto

    def shares(amounts: dict[str, float]) -> dict[str, float]:
        total = sum(amounts.values())
        return {t: (v / total if total else 0.0) for t, v in amounts.items()}

    def weighted(amounts: dict[str, float]) -> float:
        got = shares(amounts)
        total = sum(weight_share.values())
        return jain([got[t] / (weight_share[t] / total) for t in names])

    per_window = max(1, round(window / stride))
    window_jains: list[float] = []
    for first in sorted(buckets):
        cpu = dict.fromkeys(names, 0.0)
        secs = 0.0
        for b in range(first, first + per_window):
            got, s = buckets.get(b, ({}, 0.0))
            secs += s
            for t, v in got.items():
                cpu[t] += v
        if secs >= window / 2:
            window_jains.append(weighted(cpu))
    started = _started_while(records, spans, owner_of, names)
    quantiles = {t: _wait_quantiles(waits[t]) for t in names}
    return Delivered(
        run_shares=shares(run),
        contended_shares=shares(contended),
        weighted_jain=weighted(contended),
        window_jain_min=min(window_jains) if window_jains else None,
        window_jain_mean=sum(window_jains) / len(window_jains) if window_jains else None,
        windows=len(window_jains),
        p95_wait={t: quantiles[t]["p95"] for t in names},
        wait_quantiles=quantiles,
        started_shares=shares(started),
        started_jain=weighted(started),
    )


def _started_while(
    records: Sequence[JobRecord],
    spans: Sequence[tuple[float, float]],
    owner_of: Callable[[str], str],
    names: Sequence[str],
) -> dict[str, float]:
    """Per group, the CPU-seconds of the runs that began within the contended time, each run
    whole. A run beginning at a span's end counts: the start that empties the last queue of
    a group is decided at that instant, while every group still had work waiting."""
    got = dict.fromkeys(names, 0.0)
    begins = [s for s, _ in spans]
    for record in records:
        for begin, end in life(record).runs:
            i = bisect.bisect_right(begins, begin) - 1
            if i >= 0 and begin <= spans[i][1]:
                got[owner_of(record.job.name)] += record.job.cpu * (end - begin)
    return got
