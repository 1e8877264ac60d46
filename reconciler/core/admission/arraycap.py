"""Task arrays in admission: `spec.array.maxParallel` caps an array's elements that are
Starting or Running, counted as one group. Elements are ordinary tasks named `NAME[i]`
(specs/task/arrays.py); only this cap sees them as an array."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from reconciler.core.admission.policies import Candidate
from reconciler.core.admission.waits import ArrayAtMaxParallel, Waiting
from specs.task.arrays import split
from specs.task.records import Task
from specs.task.status import TaskStatusBody


def cap(
    queue: Sequence[Candidate],
    bodies: Mapping[str, TaskStatusBody],
    tasks: Mapping[str, Task],
) -> tuple[list[Candidate], dict[str, Waiting]]:
    """The candidates that may start (in queue order), and why the others of capped arrays
    wait: each array may start only as many as maxParallel leaves beside its active ones."""
    if not any(name[-1:] == "]" for name in bodies):  # no element at all (split's own test)
        return list(queue), {}
    active: Counter[str] = Counter()
    for name, body in bodies.items():
        parts = split(name)
        if parts is not None and body.phase.active:
            active[parts[0]] += 1
    kept: list[Candidate] = []
    capped: dict[str, Waiting] = {}
    for candidate in queue:
        parts = split(candidate.name)
        task = tasks.get(candidate.name)
        array = task.spec.array if task is not None else None
        limit = array.max_parallel if array is not None else None
        if parts is None or limit is None:
            kept.append(candidate)
        elif active[parts[0]] >= limit:
            capped[candidate.name] = Waiting(ArrayAtMaxParallel(parts[0], limit))
        else:
            active[parts[0]] += 1  # a place the policy may use this pass
            kept.append(candidate)
    return kept, capped
