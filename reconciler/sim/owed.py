"""What the fair-share order owes each team after a late team arrives, as a fluid model
started from the run's own past.

The order starts work for the queue with the lowest `(m_i + a * x_i) / w_i` (pure sharing:
`x_i` the share of the cluster held now, `m_i` the bias-corrected decayed mean of `x_i`,
`a` = `quotas.CURRENT_USE_WEIGHT`). In the fluid limit, every team saturated, the cluster is
water-filled: the teams that hold anything sit at one level `L`, so
`x_i = max(0, (L * w_i - m_i) / a)` with `sum(x) = 1`, and the means follow what is held,
`m_i' = (x_i - m_i) / (tau * (1 - 2^(-t/h)))`. A team that overused its weight before the
newcomer came (the others' work did not fill the cluster, say) is owed little until its mean
comes down; a newcomer with no past is owed most of the cluster at first. The model starts
from the means the run actually had at the arrival (from its records), not from an assumed
history: the first week's load decides where the teams stand.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from reconciler.core.queues.quotas import CURRENT_USE_WEIGHT
from reconciler.core.queues.usage import advance, mean_rate
from reconciler.sim.engine import JobRecord
from reconciler.sim.teams import delivered, jain, sweep, team_name, team_of
from specs.cluster import Capacity

STEP = 600.0
"""Seconds per integration step: one closes under 1 % of the gap between a mean and what is
held once tracking is a day old (0.14 % at a week)."""


def water_fill(means: Sequence[float], weights: Sequence[float], a: float) -> list[float]:
    """Shares held that minimise the highest `(m_i + a * x_i) / w_i`, all of the cluster held.
    `a` = 0: all to the lowest `m_i / w_i` (split evenly on a tie)."""
    n = len(means)
    if a <= 0:
        levels = [m / w for m, w in zip(means, weights, strict=True)]
        low = min(levels)
        lowest = [i for i in range(n) if levels[i] <= low + 1e-12]
        return [1.0 / len(lowest) if i in lowest else 0.0 for i in range(n)]
    # teams enter in the order of m_i / w_i; the level settles between two entry points
    order = sorted(range(n), key=lambda i: means[i] / weights[i])
    level = 0.0
    for k in range(1, n + 1):
        inside = order[:k]
        w = sum(weights[i] for i in inside)
        level = (a + sum(means[i] for i in inside)) / w
        nxt = means[order[k]] / weights[order[k]] if k < n else float("inf")
        if level <= nxt:
            break
    return [max(0.0, (level * weights[i] - means[i]) / a) for i in range(n)]


class Fluid:
    """The model's state, advanced in time: each team's decayed usage, in cluster-seconds (the
    planner's arithmetic, `core/queues/usage.py`, on shares of the cluster as CPUs)."""

    def __init__(
        self,
        weights: Sequence[float],
        means: Sequence[float],
        at: float,
        half_life: float,
        a: float,
    ) -> None:
        self.weights, self.half_life, self.a, self.at = list(weights), half_life, a, at
        per = _mean(1.0, half_life, at)  # the mean one unit of decayed usage stands for
        self.usage = [m / per if per > 0 else 0.0 for m in means]

    def means(self) -> list[float]:
        return [_mean(u, self.half_life, self.at) for u in self.usage]

    def held(self) -> list[float]:
        return water_fill(self.means(), self.weights, self.a)

    def advance(self, until: float) -> None:
        while self.at < until:
            dt = min(STEP, until - self.at)
            pairs = zip(self.usage, self.held(), strict=True)
            self.usage = [_advance(u, x, dt, self.half_life) for u, x in pairs]
            self.at += dt


def _advance(u: float, rate: float, seconds: float, half_life: float) -> float:
    return advance(Capacity(u), Capacity(rate), seconds, half_life).cpu


def _mean(u: float, half_life: float, tracked: float) -> float:
    """The bias-corrected mean of decayed usage `u` after `tracked` seconds (from 0)."""
    return mean_rate(Capacity(u), half_life, tracked).cpu


def means_at(
    intervals: Iterable[tuple[float, float, dict[str, float]]],
    names: Sequence[str],
    at: float,
    half_life: float,
    capacity: float,
) -> list[float]:
    """Each team's bias-corrected decayed mean share of the cluster at `at`, from what it held
    over the run's intervals (start, length, CPUs held by team), tracked from 0 as the
    simulator's planner tracks it."""
    usage = dict.fromkeys(names, 0.0)
    end = 0.0
    for start, span, held in intervals:
        if start >= at:
            break
        dt = min(span, at - start)
        usage = {t: _advance(u, held[t] / capacity, dt, half_life) for t, u in usage.items()}
        end = start + dt
    # nothing held from `end` to `at`: it only decays
    usage = {t: _advance(u, 0.0, at - end, half_life) for t, u in usage.items()}
    return [_mean(usage[t], half_life, at) for t in names]


def expected_late(
    records: Sequence[JobRecord],
    teams: int,
    weights: Sequence[float],
    arrival: float,
    half_life: float | None,
    capacity: float,
    current_weight: float = CURRENT_USE_WEIGHT,
) -> dict[str, object]:
    """What the order owes each team once team-0 arrives at `arrival` (the fluid model from the
    means the run had then; without decay, each its weight's share), averaged over the
    contended seconds, and the weighted Jain index of the delivered contended shares against
    it. Pure sharing (no nominal quota): the model has no quota in it."""
    names = [team_name(k) for k in range(teams)]
    total = sum(weights)
    fluid: Fluid | None = None
    start: list[float] | None = None
    if half_life is not None:
        past = ((now, span, held) for now, span, _, held in sweep(records, team_of, names))
        start = means_at(past, names, arrival, half_life, capacity)
        fluid = Fluid(weights, start, arrival, half_life, current_weight)
    owed = dict.fromkeys(names, 0.0)
    seconds = 0.0
    for now, span, waiting, _ in sweep(records, team_of, names):
        if span <= 0 or not all(waiting[t] > 0 for t in names):
            continue
        seconds += span
        due = [w / total for w in weights]
        if fluid is not None and now + span / 2 >= arrival:
            fluid.advance(now + span / 2)
            due = fluid.held()
        for t, x in zip(names, due, strict=True):
            owed[t] += x * span
    expected = {t: (v / seconds if seconds else 0.0) for t, v in owed.items()}
    got = delivered(records, teams, weights).contended_shares
    ratios = [got[t] / expected[t] for t in names if expected[t] > 0]
    return {
        "expected_shares": expected,
        "jain_vs_expected": jain(ratios),
        "means_at_arrival": None if start is None else dict(zip(names, start, strict=True)),
    }
