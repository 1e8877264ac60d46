"""Process-wide tuning that the composition root applies; never at import."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


def tune_gc() -> None:
    """A pass allocates many short-lived objects over a large, long-lived cache of parsed specs.
    With the default thresholds the cyclic GC walks that cache, which holds no garbage, again and
    again in every pass. Collect less often; freeze what exists."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)


@contextmanager
def first_pass_gc() -> Iterator[None]:
    """Serve's first pass (Reconciler.run's `first`) reads every spec into what the passes after it
    keep: objects by the million on a big folder that live on, and almost no garbage (its
    collections free next to nothing). So no automatic collection during it, and what exists after
    it is frozen, as tune_gc freezes what exists before it: later collections do not walk it again.
    A frozen object whose last reference goes is freed as ever; only cyclic garbage made during the
    pass stays."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
