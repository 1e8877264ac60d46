"""Array caps on the fast pass (core/incremental/fastpass.py): which waiting elements their
array's maxParallel holds back, as admission's cap (core/admission/arraycap.py) decides.

An element's cap reads its siblings: the array's active elements (Starting or Running) and
the waiting ones ahead of it in queue order. The cap lets the first `maxParallel - active` of
an array's waiting elements that count (not past maxQueued) be candidates; the rest wait for
it, and are no candidates at all. Every active element is loud, so redone each pass (or
deleted: then no longer counted); an array none of whose elements was redone, deleted or moved
keeps its active count and its order, and so its cap. A pass thus judges again the arrays of
those elements only, and hands on the elements whose cap changed (`Caps.changed`) to be
placed again.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Mapping
from typing import Literal, NamedTuple

from reconciler.core.admission.waits import Waiting
from reconciler.core.incremental.keptorder import (
    ArrayCap,
    Entry,
    Order,
    array_cap,
    capped_names,
    max_parallel,
)
from reconciler.core.planner import TaskResult
from specs.task.arrays import split


class Caps(NamedTuple):
    """The arrays' caps after a pass's changes."""

    arrays: Mapping[str, ArrayCap]
    capped: Mapping[str, Waiting]  # by element held back by its array's maxParallel: why
    changed: set[str]  # the elements whose wait for their cap began, ended or changed


def recap(
    order: Order,
    names: Iterable[str],
    key_of: Mapping[str, Entry],
    redone: Mapping[str, TaskResult],
    result_of: Callable[[str], TaskResult],
) -> Caps | None:
    """The caps, judged again for the arrays of `names` (the redone tasks, the deleted ones
    and those whose entry changed: `key_of` holds their new ones). None: an array's waiting
    elements disagree on its maxParallel (only the full pass reads each one's)."""
    touched: dict[str, set[str]] = {}
    for name in names:
        parts = split(name)
        if parts is not None:
            touched.setdefault(parts[0], set()).add(name)
    if not touched:
        return Caps(order.arrays, order.capped, set())
    arrays = dict(order.arrays)
    capped = dict(order.capped)
    changed: set[str] = set()
    for array, members in touched.items():
        before = arrays.pop(array, None)
        cap = _array_again(array, before, members, order.key_of, key_of, redone, result_of)
        if cap is False:
            return None
        was = set(capped_names(before)) if before is not None else set()
        now = set(capped_names(cap)) if cap is not None else set()
        for name in was:
            del capped[name]
        if cap is not None:
            arrays[array] = cap
            capped.update(dict.fromkeys(now, cap.wait))
        changed |= was ^ now
        if before is not None and cap is not None and before.wait != cap.wait:
            changed |= was & now
    return Caps(arrays, capped, changed)


def _array_again(
    array: str,
    before: ArrayCap | None,
    members: set[str],
    old_keys: Mapping[str, Entry],
    key_of: Mapping[str, Entry],
    redone: Mapping[str, TaskResult],
    result_of: Callable[[str], TaskResult],
) -> ArrayCap | Literal[False] | None:
    """An array's cap with `members` judged again (None: no element of it waits capped by a
    maxParallel; False: its elements disagree on it)."""
    entries = list(before.entries) if before is not None else []
    for name in members:
        old = old_keys.get(name)
        if old is None or before is None:
            continue
        at = bisect_left(entries, old)
        if at < len(entries) and entries[at] == old:
            del entries[at]
    untouched = len(entries)
    limits: set[int] = set()
    active = 0
    for name in members:
        result = redone.get(name)
        if result is not None and result.body.phase.active:
            active += 1  # every active element is loud: redone, and so counted here
        new = key_of.get(name)
        if new is None or new.past_limit:
            continue
        limit = max_parallel(result if result is not None else result_of(name))
        if limit is not None:
            limits.add(limit)
            insort(entries, new)
    if untouched and before is not None:
        limits.add(before.limit)
    if len(limits) > 1:
        return False
    if not entries:
        return None
    return array_cap(array, entries, limits.pop(), active)
