"""Plain specs built directly: the common fields with plain values in range, checked by hand,
become the lean Task without pydantic (a cold start parses every spec; the model's validation
was ~40 µs of a spec's ~70). Anything else gives None, and the caller validates it with the
model as before, so every invalid spec keeps its exact message. tests/unit/test_lean_task.py
checks, for random texts, that this gives exactly what the model gives."""

from __future__ import annotations

import math
from typing import Any, Final

from pydantic import ValidationError

from specs import submission_ids
from specs.models import (
    _NO_DEPENDENCIES,
    _NO_METADATA,
    _SHARED_RESOURCES,
    API_VERSION,
    Metadata,
    Resources,
    Task,
    TaskSpec,
    _shared_resources,
)
from specs.quantity import parse_memory

_TOP: Final = frozenset({"apiVersion", "kind", "metadata", "spec"})
# The spec's fields taken here, as written in files (the model also takes the snake_case
# names: those, and every other field, go to the model).
_SPEC: Final = frozenset(
    {
        "entrypoint",
        "runtimeEnv",
        "priority",
        "resources",
        "timeoutSeconds",
        "suspend",
        "submissionId",
        "preemptible",
        "resumable",
    }
)
_RESOURCES: Final = frozenset({"cpu", "gpu", "memory"})
_MAX_NUMBER: Final = 1e9  # Finite's and timeoutSeconds's bound


def task_of(data: dict[str, Any]) -> Task | None:
    """The task of a plain document, as the model would validate it; None if it is not plain
    (or not valid): the model decides."""
    if not data.keys() <= _TOP or not _is_text(data.get("apiVersion"), API_VERSION):
        return None
    if not _is_text(data.get("kind"), "Task"):
        return None
    metadata = _metadata(data["metadata"]) if "metadata" in data else _NO_METADATA
    spec = data.get("spec")
    if metadata is None or type(spec) is not dict:
        return None
    built = _spec(spec)
    if built is None:
        return None
    return Task._of((API_VERSION, "Task", metadata, built))


def _is_text(value: object, expected: str) -> bool:
    return type(value) is str and value == expected


def _metadata(value: object) -> Metadata | None:
    if type(value) is not dict:
        return None
    try:
        return Metadata.model_validate(value)  # a small model; labels and annotations as ever
    except ValidationError:
        return None


def _spec(spec: dict[str, Any]) -> TaskSpec | None:
    if not spec.keys() <= _SPEC:
        return None
    entrypoint = spec.get("entrypoint")
    if type(entrypoint) is not str or not entrypoint.strip():
        return None
    runtime_env = spec.get("runtimeEnv")
    if runtime_env is not None and (
        type(runtime_env) is not dict or not all(type(k) is str for k in runtime_env)
    ):
        return None
    priority = spec.get("priority", 0)
    if type(priority) is not int or not 0 <= priority <= 9:
        return None
    timeout = spec.get("timeoutSeconds", 0)  # the model's default is the int 0, as given
    if "timeoutSeconds" in spec:
        timeout = _number(timeout)
        if timeout is None:
            return None
    flags = [spec.get(name, default) for name, default in _FLAGS]
    if any(type(flag) is not bool for flag in flags):
        return None
    submission_id = spec.get("submissionId")
    if submission_id is not None and (
        type(submission_id) is not str
        or not 1 <= len(submission_id) <= submission_ids.MAX_LENGTH
        or submission_ids.problem(submission_id) is not None
    ):
        return None
    resources = _resources(spec.get("resources"))
    if resources is None:
        return None
    suspend, preemptible, resumable = flags
    return TaskSpec._of(
        (
            entrypoint,
            runtime_env,
            priority,
            resources,
            timeout,
            suspend,
            submission_id,
            None,
            None,
            _NO_DEPENDENCIES,
            preemptible,
            resumable,
            None,
        )
    )


_FLAGS: Final = (("suspend", False), ("preemptible", True), ("resumable", False))


def _number(value: object) -> float | None:
    """A float field's value (ge=0, le=1e9, finite) as the model gives it; None if not plain."""
    if type(value) is int:
        return float(value) if 0 <= value <= _MAX_NUMBER else None
    if type(value) is float and math.isfinite(value) and 0 <= value <= _MAX_NUMBER:
        return value
    return None


def _resources(value: object) -> Resources | None:
    """The shared Resources of plain resources (no bundles), built by the model only the
    first time a value is seen (specs/models.py keeps one object per distinct value)."""
    if type(value) is not dict or not value or not value.keys() <= _RESOURCES:
        return None
    cpu = _number(value["cpu"]) if "cpu" in value else 0.0
    gpu = _number(value["gpu"]) if "gpu" in value else 0.0
    memory: int | None = 0
    if "memory" in value:
        try:
            memory = parse_memory(value["memory"])
        except (ValueError, OverflowError):
            return None
    if cpu is None or gpu is None or type(memory) is not int:
        return None
    if cpu == 0 and gpu == 0 and memory == 0:
        return None  # the model's message: at least one resource
    key = (frozenset(value), repr(cpu), repr(gpu), repr(memory))
    shared = _SHARED_RESOURCES.get(key)
    if shared is not None:
        return shared
    try:
        return _shared_resources(Resources.model_validate(value))
    except ValidationError:
        return None
