"""Queues' past use, decayed with a half-life (issue 30): the arithmetic, pure.

Usage is resources x seconds. Over an interval in which a queue holds `rate` resources, its
usage decays by 2^(-dt/h) and gains what it held, decayed within the interval too:

    U(t + dt) = U(t) * 2^(-dt/h) + rate * tau * (1 - 2^(-dt/h)),   tau = h / ln 2

exact while the rate stays constant (the shell advances it at every pass with the runs it
observed). A queue that holds `rate` for ever tends to U = rate * tau, so U / tau (`mean_rate`)
is its decayed mean use in resources, comparable with what it holds now.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from specs.cluster import Capacity

QueueUsage = Mapping[str, Capacity]
"""Decayed usage by queue name, in resource-seconds (CPU-seconds, GPU-seconds, byte-seconds)."""


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


def mean_rate(usage: Capacity, half_life: float) -> Capacity:
    """Decayed usage as a mean use in resources (U / tau)."""
    t = tau(half_life)
    return Capacity(usage.cpu / t, usage.gpu / t, usage.memory / t)
