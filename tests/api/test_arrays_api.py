"""Task arrays in the HTTP API: GET /tasks/NAME sums an array up, /tasks/NAME/elements lists its
elements, an element's log is /tasks/NAME[i]/logs; a plain task reads as a plain task."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from specs.cluster import FAILED, META_TASK, SUCCEEDED
from tests.api.conftest import task_yaml


def _jobs(world) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {j.metadata[META_TASK]: j.submission_id for j in world.our_jobs()}


def test_an_array_and_its_elements(make_world, tasks_dir: Path) -> None:
    world, api = make_world()
    (tasks_dir / "sweep.yaml").write_text(task_yaml(array={"count": 3, "maxParallel": 2}))
    (tasks_dir / "plain.yaml").write_text(task_yaml())
    world.step()
    jobs = _jobs(world)
    world.ray.set_status(jobs["sweep[0]"], SUCCEEDED)
    world.ray.set_logs(jobs["sweep[1]"], "line 1\nboom\n")
    world.ray.set_status(jobs["sweep[1]"], FAILED, exit_code=7)
    world.step()
    body = api.get("/tasks/sweep").json()
    assert body["spec"]["array"] == {"count": 3, "maxParallel": 2}
    status = body["status"]
    assert status["progress"] == "1/3 done, 1 running, 1 failed"
    assert status["counts"] == {"Failed": 1, "Starting": 1, "Succeeded": 1}
    assert [(f["index"], f["exitCode"]) for f in status["failed"]] == [(1, 7)]
    elements = api.get("/tasks/sweep/elements").json()["items"]
    assert [(e["name"], e["phase"]) for e in elements] == [
        ("sweep[0]", "Succeeded"),
        ("sweep[1]", "Failed"),
        ("sweep[2]", "Starting"),
    ]
    assert api.get("/tasks/sweep[1]/logs").text == "line 1\nboom\n"
    assert api.get("/tasks/plain/elements").status_code == 404
    listed = [row["name"] for row in api.get("/tasks").json()["items"]]
    assert listed == ["plain", "sweep[0]", "sweep[1]", "sweep[2]"]
    # the old API: a plain task as before
    assert api.get("/tasks/plain").json()["status"]["phase"] == "Starting"


def test_elements_without_a_loop_are_read_from_the_one_sidecar(
    make_world, client: TestClient, tasks_dir: Path
) -> None:
    world, _ = make_world()
    (tasks_dir / "sweep.yaml").write_text(task_yaml(array={"count": 2}))
    world.step()
    items = client.get("/tasks/sweep/elements").json()["items"]
    assert [e["phase"] for e in items] == ["Starting", "Starting"]


def test_the_web_view_shows_an_array_as_one_row_with_a_bar(make_world, tasks_dir: Path) -> None:
    world, api = make_world()
    (tasks_dir / "sweep.yaml").write_text(task_yaml(array={"count": 4, "maxParallel": 2}))
    world.step()
    jobs = _jobs(world)
    world.ray.set_status(jobs["sweep[0]"], SUCCEEDED)
    world.step()
    rows = api.get("/ui/api/tasks").json()["tasks"]
    assert [r["name"] for r in rows] == ["sweep"]
    row = rows[0]
    assert row["phase"] == "Running" and row["message"] == "1/4 done, 2 running, 1 queued"
    assert row["array"] == {"size": 4, "succeeded": 1, "running": 2, "failed": 0}
    assert "array-bar" in api.get("/ui/ui.js").text
