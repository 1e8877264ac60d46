"""Plain specs built directly: the common fields with plain values in range, checked by hand,
become the lean Task without pydantic (a cold start parses every spec, and the model's
validation is most of a plain spec's cost). Anything else gives None, and the caller validates
it with the model, so every invalid spec keeps its exact message.
tests/unit/specs/task/test_task_records_match_models.py checks, for random texts, that this
gives exactly what the model gives."""

from __future__ import annotations

import math
from typing import Any, Final

from pydantic import ValidationError

from specs.task import submission_ids
from specs.task.models import (
    API_VERSION,
    NO_DEPENDENCIES,
    NO_METADATA,
    Metadata,
    Resources,
    below_minimum,
    known_resources,
    shared_resources,
)
from specs.task.quantity import parse_memory
from specs.task.records import Task, TaskSpec

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
    version, kind = data.get("apiVersion"), data.get("kind")
    if type(version) is not str or version != API_VERSION or type(kind) is not str:
        return None
    if kind != "Task" or not data.keys() <= _TOP:
        return None
    metadata = _metadata(data["metadata"]) if "metadata" in data else NO_METADATA
    spec = data.get("spec")
    if metadata is None or type(spec) is not dict:
        return None
    built = _spec(spec)
    if built is None:
        return None
    return Task.unchecked((API_VERSION, "Task", metadata, built))


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
    suspend = spec.get("suspend", False)
    preemptible = spec.get("preemptible", True)
    resumable = spec.get("resumable", False)
    if type(suspend) is not bool or type(preemptible) is not bool or type(resumable) is not bool:
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
    return TaskSpec.unchecked(
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
            NO_DEPENDENCIES,
            preemptible,
            resumable,
            None,
        )
    )


def _number(value: object) -> float | None:
    """A float field's value (ge=0, le=1e9, finite) as the model gives it; None if not plain."""
    if type(value) is int:
        return float(value) if 0 <= value <= _MAX_NUMBER else None
    if type(value) is float and math.isfinite(value) and 0 <= value <= _MAX_NUMBER:
        return value
    return None


def _resources(value: object) -> Resources | None:
    """The shared Resources of plain resources (no bundles), built by the model only the
    first time a value is seen (specs/task/models.py keeps one object per distinct value)."""
    if type(value) is not dict or not value or not value.keys() <= _RESOURCES:
        return None
    # By the repr of what the file gave (1, 1.0, -0.0 and "1" each their own): most specs
    # of a folder write their resources alike, and then nothing is checked twice.
    raw = repr(tuple(value.items()))
    known = _BY_TEXT.get(raw)
    if known is None:
        known = _checked_resources(value)
        if known is not None and len(_BY_TEXT) < _BY_TEXT_KEPT:
            _BY_TEXT[raw] = known
    return known


# The shared Resources of plain resources, by the repr of their items as read (bounded: past
# that, each is checked again).
_BY_TEXT: dict[str, Resources] = {}
_BY_TEXT_KEPT: Final = 4096


def _checked_resources(value: dict[str, Any]) -> Resources | None:
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
    if below_minimum(cpu, gpu, memory) is not None:
        return None  # the model's message names the resource and its minimum
    shared = known_resources(frozenset(value), cpu, gpu, memory)
    if shared is not None:
        return shared
    try:
        return shared_resources(Resources.model_validate(value))
    except ValidationError:
        return None
