"""Task arrays at the boundary: one file with `spec.array` becomes element tasks `NAME[i]`.

The planner never sees an array: the store hands it one task per element, each with its own
environment (the element's values, RAYQUEUE_ARRAY_INDEX, RAYQUEUE_ARRAY_SIZE) and so its own
spec hash, submission ids, retries, timeout and preemption. The elements' statuses go to one
sidecar for the whole array (specs/task/arraystatus.py).
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any, Final

from specs.task.models import ARRAY_SIZE_VAR, RESTARTED_AT, ArraySpec, ArrayValue
from specs.task.records import Task

# `rayqueue rerun NAME --failed`: a JSON object of element index -> the time it was asked to
# run again. Each listed element gets its own restartedAt, so only it starts a new run.
RERUN_ELEMENTS: Final = "rayqueue/rerunElements"
INDEX_VAR: Final = "RAYQUEUE_ARRAY_INDEX"
SIZE_VAR: Final = ARRAY_SIZE_VAR
_ELEMENT = re.compile(r"(?P<array>.+)\[(?P<index>0|[1-9][0-9]{0,5})\]")


def element_name(array: str, index: int) -> str:
    return f"{array}[{index}]"


def split(name: str) -> tuple[str, int] | None:
    """(array, index) of an element name like team-a/sweep[3]; None for any other name."""
    if name[-1:] != "]":  # most names: no regex run (a pass asks several times per task)
        return None
    match = _ELEMENT.fullmatch(name)
    if match is None:
        return None
    return match["array"], int(match["index"])


def order_key(name: str) -> str:
    """A string that sorts elements of one array in index order (sweep[2] before sweep[10])
    and every other name as itself."""
    parts = split(name)
    return name if parts is None else f"{parts[0]}[{parts[1]:06d}]"


def _text(value: ArrayValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def element_values(array: ArraySpec) -> list[dict[str, str]]:
    """Each element's own variables, in index order (matrix: the last key varies fastest)."""
    if array.count is not None:
        return [{} for _ in range(array.count)]
    if array.values is not None:
        return [{k: _text(v) for k, v in item.items()} for item in array.values]
    matrix = array.matrix or {}
    keys = list(matrix)
    return [
        {k: _text(v) for k, v in zip(keys, combo, strict=True)}
        for combo in itertools.product(*(matrix[k] for k in keys))
    ]


def expand(name: str, task: Task) -> dict[str, Task]:
    """The element tasks of an array task, by element name; {name: task} for a plain task."""
    array = task.spec.array
    if array is None:
        return {name: task}
    elements = element_values(array)
    size = str(len(elements))
    runtime_env: dict[str, Any] = dict(task.spec.runtime_env or {})
    base_env = dict(runtime_env.get("env_vars") or {})
    reruns = rerun_elements(task)
    out: dict[str, Task] = {}
    for index, own in enumerate(elements):
        env = {**base_env, **own, INDEX_VAR: str(index), SIZE_VAR: size}
        spec = task.spec.model_copy(update={"runtime_env": {**runtime_env, "env_vars": env}})
        update: dict[str, Any] = {"spec": spec}
        if index in reruns:
            notes = dict(task.metadata.annotations)
            notes[RESTARTED_AT] = f"{notes.get(RESTARTED_AT, '')}+{reruns[index]}"
            update["metadata"] = task.metadata.model_copy(update={"annotations": notes})
        out[element_name(name, index)] = task.model_copy(update=update)
    return out


def rerun_elements(task: Task) -> dict[int, str]:
    """The elements asked to run again, by index (the annotation RERUN_ELEMENTS); an
    unreadable annotation asks for none."""
    text = task.metadata.annotations.get(RERUN_ELEMENTS)
    if not text:
        return {}
    try:
        found = json.loads(text)
        return {int(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}
    except ValueError:
        return {}
