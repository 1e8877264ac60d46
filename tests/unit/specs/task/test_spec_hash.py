"""Task.spec_hash: sidecars record it, so its text must stay what it was when it was written.

The reference below is the formula written plainly (model_dump of the resources, json.dumps
per call): a hash that changed would read as a new run of every task after an upgrade.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from specs.task.models import ARRAY_SIZE_VAR, RESTARTED_AT
from specs.task.records import Task


def _reference(task: Task) -> str:
    runtime_env = task.spec.runtime_env
    if task.spec.array is not None and runtime_env is not None:
        env = dict(runtime_env.get("env_vars") or {})
        env.pop(ARRAY_SIZE_VAR, None)
        runtime_env = {**runtime_env, "env_vars": env}
    defining = {
        "entrypoint": task.spec.entrypoint,
        "runtimeEnv": runtime_env,
        "resources": task.spec.resources.model_dump(by_alias=True, exclude={"bundles"}),
        "restartedAt": task.metadata.annotations.get(RESTARTED_AT),
    }
    blob = json.dumps(defining, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


# Amounts a request may hold: none, or at least the smallest that counts.
_amounts = st.one_of(st.integers(0, 64), st.just(0.0), st.floats(0.01, 1e6, allow_nan=False))
_memory = st.one_of(
    st.just(0), st.integers(2**20, 2**30), st.sampled_from(["4Gi", "512Mi", "2G", "1.5Gi"])
)


@st.composite
def _tasks(draw: st.DrawFn) -> Task:
    resources: dict[str, Any] = {"cpu": draw(_amounts) or 1}
    if draw(st.booleans()):
        resources["gpu"] = draw(_amounts)
    if draw(st.booleans()):
        resources["memory"] = draw(_memory)
    if draw(st.booleans()):
        resources["bundles"] = [dict(resources)]
    entrypoint = "run " + draw(st.text(max_size=20))  # never blank (the model refuses that)
    spec: dict[str, Any] = {"entrypoint": entrypoint, "resources": resources}
    if draw(st.booleans()):
        names = st.from_regex(r"[A-Z]{1,4}", fullmatch=True)
        env = draw(st.dictionaries(names, st.text(max_size=8), max_size=3))
        spec["runtimeEnv"] = {"env_vars": env}
    metadata: dict[str, Any] = {}
    if draw(st.booleans()):
        metadata["annotations"] = {RESTARTED_AT: "2026-01-02T03:04:05Z"}
    return _task(spec, metadata)


def _task(spec: dict[str, Any], metadata: dict[str, Any] | None = None) -> Task:
    document = {"apiVersion": "rayqueue/v1", "kind": "Task", "spec": spec}
    return Task.model_validate({**document, "metadata": metadata or {}})


@settings(max_examples=300, deadline=None)
@given(_tasks())
def test_spec_hash_is_the_recorded_formula(task: Task) -> None:
    assert task.spec_hash() == _reference(task)


def test_a_known_hash_stays() -> None:
    # A hash sidecars already hold (tests/unit/specs/yamlio/test_dump.py's sidecar has it too).
    task = _task({"entrypoint": "true", "resources": {"cpu": 1}})
    assert task.spec_hash() == "0c3e567b8830fde8"
    assert _task({"entrypoint": "true", "resources": {"cpu": 2}}).spec_hash() != task.spec_hash()
    big = _task({"entrypoint": "true", "resources": {"cpu": 1, "memory": "4Gi"}})
    assert big.spec_hash() == _reference(big) != task.spec_hash()
