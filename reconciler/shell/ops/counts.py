"""Counts of a plan's statuses by some key (queue and reason, queue and phase), kept between passes
and updated by the statuses that changed, so that a pass where one job ends costs what changed, not
a walk over every waiting task.

Level-triggered all the same: a pass that cannot say what changed (a full walk, the first
pass), or whose statuses do not add up with what was counted (a task gone), counts anew.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Hashable, Mapping
from typing import Generic, TypeVar

from specs.task.status import TaskStatus

K = TypeVar("K", bound=Hashable)


class Tally(Generic[K]):
    """`key_of(status)` for every status of the last mapping counted; None counts nothing."""

    def __init__(self, key_of: Callable[[TaskStatus], K | None]) -> None:
        self.key_of = key_of
        self._keys: dict[str, K | None] = {}
        self.counts: Counter[K] = Counter()
        # One object per distinct key, kept for every task with that key (not a tuple each: the
        # map holds every task); a key leaves when nothing counts it.
        self._shared: dict[K, K] = {}
        self.recounts = 0  # full counts so far (for tests)
        self._stale = False

    def stale(self) -> None:
        """The next update counts everything anew (a pass failed between its changes and
        their count)."""
        self._stale = True

    def update(self, after: Mapping[str, TaskStatus], changed: Collection[str] | None) -> None:
        """Count `after`. `changed`: every name whose status is new, changed or gone since
        the last update (the plan's write_classes); None: count everything anew."""
        if changed is not None and self.recounts and not self._stale:
            for name in changed:
                self._set(name, after.get(name))
            if len(self._keys) == len(after):
                return
            # Sizes differ: a task left without a changed status naming it. Count anew.
        self._keys.clear()
        self.counts.clear()
        self._shared.clear()
        self.recounts += 1
        self._stale = False
        for name, status in after.items():
            self._set(name, status)

    def _set(self, name: str, status: TaskStatus | None) -> None:
        old = self._keys.pop(name, None)
        if old is not None:
            self.counts[old] -= 1
            if not self.counts[old]:
                del self.counts[old], self._shared[old]
        if status is None:
            return
        key = self.key_of(status)
        if key is not None:
            key = self._shared.setdefault(key, key)
            self.counts[key] += 1
        self._keys[name] = key
