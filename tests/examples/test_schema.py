"""The committed JSON Schema is the generated one, and it agrees with the parser on examples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specs.task.schema import render_schema, task_schema

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "specs" / "task.schema.json"

jsonschema = pytest.importorskip("jsonschema")  # ships with ray[default]


def test_committed_schema_is_not_stale() -> None:
    assert COMMITTED.read_text() == render_schema(), (
        "specs/task.schema.json is stale: run `rayqueue schema > specs/task.schema.json`"
    )


def test_schema_is_a_valid_draft7_schema() -> None:
    schema = json.loads(COMMITTED.read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    assert schema == task_schema()


def _errors(document: object) -> list[str]:
    validator = jsonschema.Draft7Validator(task_schema())
    return [e.message for e in validator.iter_errors(document)]


def _task(**spec: object) -> dict[str, object]:
    return {"apiVersion": "rayqueue/v1", "kind": "Task", "spec": spec}


@pytest.mark.parametrize("memory", ["512Mi", "4Gi", "2G", "1024B", 4, 0.5, "1.5"])
def test_memory_takes_quantities_and_gib(memory: object) -> None:
    assert _errors(_task(entrypoint="x", resources={"memory": memory})) == []


@pytest.mark.parametrize(
    "document",
    [
        _task(entrypoint="x", resources={"cpu": 1}, priorty=3),  # the typo is caught
        _task(entrypoint="x", resources={"cpu": 1}, priority=10),
        _task(entrypoint="x", resources={"memory": "4 lots"}),
        _task(entrypoint="x"),  # no resources at all
        _task(entrypoint="x", resources={}),
        _task(entrypoint="   ", resources={"cpu": 1}),
        {**_task(entrypoint="x", resources={"cpu": 1}), "kind": "Job"},
    ],
)
def test_schema_rejects_what_the_parser_rejects(document: dict[str, object]) -> None:
    assert _errors(document)
