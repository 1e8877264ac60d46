"""Queues' past use, decayed with a half-life: the arithmetic, pure.

Usage is resources x seconds. Over an interval in which a queue holds `rate` resources, its
usage decays by 2^(-dt/h) and gains what it held, decayed within the interval too:

    U(t + dt) = U(t) * 2^(-dt/h) + rate * tau * (1 - 2^(-dt/h)),   tau = h / ln 2

exact while the rate stays constant (the shell advances it at every pass with the runs it
observed). A queue that holds `rate` for ever tends to U = rate * tau, so U / tau (`mean_rate`)
is its decayed mean use in resources, comparable with what it holds now.

Early on, U / tau understates that mean: after t seconds of tracking a constant rate gives
U = rate * tau * (1 - 2^(-t/h)), so a week's half-life remembers only 12 % of a day's use and
the order is mostly today's share. `mean_rate` divides by that factor when it knows
when tracking began (`since`): the bias-corrected decayed mean (what an exponential moving
average does at its start), equal to the plain mean use since `since` while t << h.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from specs.cluster import Capacity

QueueUsage = Mapping[str, Capacity]
"""Decayed usage by queue name, in resource-seconds (CPU-seconds, GPU-seconds, byte-seconds)."""


class Tracked(dict[str, Capacity]):
    """Decayed usage by queue (a `QueueUsage`) and when its tracking began (`since`, unix
    seconds; None: unknown, as in a status file written before it was recorded)."""

    def __init__(self, usage: QueueUsage | None = None, since: float | None = None) -> None:
        super().__init__(usage or {})
        self.since = since


def since_of(usage: QueueUsage) -> float | None:
    """When tracking began, if the usage says."""
    return usage.since if isinstance(usage, Tracked) else None


def tau(half_life: float) -> float:
    """The decay's time constant: the mean age of what is remembered."""
    return half_life / math.log(2)


def advance(usage: Capacity, rate: Capacity, seconds: float, half_life: float) -> Capacity:
    """`usage` after `seconds` more at `rate`. A clock that went back (seconds < 0) adds
    nothing and decays nothing."""
    if seconds <= 0:
        return usage
    keep = 2.0 ** (-seconds / half_life)
    gain = tau(half_life) * (1.0 - keep)
    return Capacity(
        usage.cpu * keep + rate.cpu * gain,
        usage.gpu * keep + rate.gpu * gain,
        usage.memory * keep + rate.memory * gain,
    )


def advance_all(
    usage: QueueUsage,
    rates: Mapping[str, Capacity],
    seconds: float,
    half_life: float,
    queues: Iterable[str],
) -> dict[str, Capacity]:
    """Every queue in `queues` advanced; queues no longer configured are forgotten."""
    return {
        name: advance(usage.get(name, Capacity()), rates.get(name, Capacity()), seconds, half_life)
        for name in queues
    }


def mean_rate(usage: Capacity, half_life: float, tracked: float | None = None) -> Capacity:
    """Decayed usage as a mean use in resources: U / (tau * (1 - 2^(-tracked/h))) after
    `tracked` seconds of tracking (the bias-corrected decayed mean); U / tau when that is
    unknown (None, as if tracked for ever). Nothing tracked yet (tracked <= 0): 0."""
    t = tau(half_life)
    if tracked is not None:
        if tracked <= 0:
            return Capacity()
        t *= 1.0 - 2.0 ** (-tracked / half_life)
    return Capacity(usage.cpu / t, usage.gpu / t, usage.memory / t)
