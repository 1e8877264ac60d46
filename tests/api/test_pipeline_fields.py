"""The resource API validates spec.retry and spec.dependsOn with the same parser as the loop."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from specs.yamlio.parse import parse_task
from tests.api.conftest import snapshot

HEAD = "apiVersion: rayqueue/v1\nkind: Task\nspec:\n  entrypoint: a\n  resources: {cpu: 1}\n"


def put(client: TestClient, name: str, text: str):  # type: ignore[no-untyped-def]
    return client.put(f"/tasks/{name}", content=text, headers={"Content-Type": "application/yaml"})


@pytest.mark.parametrize(
    ("extra", "field", "line"),
    [
        ("  retry:\n    limit: -1\n", "spec.retry.limit", 7),
        ("  retry:\n    factor: 0.5\n", "spec.retry.factor", 7),
        ("  dependsOn:\n    - name: team-a/train\n", "spec.dependsOn[0].name", 7),
        ("  dependsOn:\n    - name: a\n      condition: Done\n", "spec.dependsOn[0].condition", 8),
    ],
)
def test_invalid_pipeline_fields_are_422_with_field_and_line(
    client: TestClient, tasks_dir: Path, extra: str, field: str, line: int
) -> None:
    response = put(client, "team-a/train", HEAD + extra)
    assert response.status_code == 422, response.text
    error = response.json()["detail"][0]
    assert (error["field"], error["line"]) == (field, line)
    assert snapshot(tasks_dir) == {}


def test_valid_pipeline_fields_are_written(client: TestClient, tasks_dir: Path) -> None:
    extra = "  retry:\n    limit: 2\n    on: [Failed]\n  dependsOn:\n    - name: prep\n"
    response = put(client, "train", HEAD + extra)
    assert response.status_code in (200, 201), response.text
    # Read back as the loop reads it (plain YAML 1.1 would take the unquoted `on` for True).
    written = parse_task((tasks_dir / "train.yaml").read_bytes(), file="train.yaml")
    assert written.spec.retry is not None
    assert (written.spec.retry.limit, written.spec.retry.on) == (2, ["Failed"])
    assert [d.name for d in written.spec.depends_on] == ["prep"]
