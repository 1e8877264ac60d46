"""Process-wide tuning that the composition root applies; never at import."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


def tune_gc() -> None:
    """A pass allocates many short-lived objects over a large, long-lived cache of parsed specs.
    With the default thresholds the cyclic GC walks that cache again and again in every pass
    (measured: about 60% of a 10,000-task plan). Collect less often; freeze what exists."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)


@contextmanager
def first_pass_gc() -> Iterator[None]:
    """Serve's first pass (Reconciler.run's `first`) reads every spec into what the passes
    after it keep: at 50,000 specs over a million objects that live on, and almost no garbage
    (its twelve collections freed 937 objects; docs/benchmarks.md, helper `cold`). So no
    automatic collection during it, and what exists after it is frozen, as tune_gc froze what
    was there before: later collections do not walk it again. A frozen object whose last
    reference goes is freed as ever; only cyclic garbage made during the pass stays."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
