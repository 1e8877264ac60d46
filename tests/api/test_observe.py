"""/metrics and the web view's endpoints, in process, over a Reconciler on FakeRay."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from api.app import create_app
from api.ports import Observability
from reconciler.shell.loop.runner import Reconciler
from reconciler.shell.ops.history import HistoryView
from reconciler.shell.ops.metrics import CountingRayAdapter, QueueMetrics
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import Capacity
from specs.folder.store import TaskStore
from specs.settings.process import Settings
from tests.api.conftest import BASE_URL, TestClient, task_yaml
from tests.support.clock import FakeClock

TOKEN = "s3cret-0123456789abcdef-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def build(tasks: Path, **options: object) -> tuple[TestClient, Reconciler, FakeClock]:
    clock = FakeClock()
    metrics = QueueMetrics("9.9.9")
    ray = CountingRayAdapter(FakeRay(Capacity(4, 0, 16 * 2**30), clock=clock), metrics)
    settings = Settings(tasks_dir=tasks, queue_id="q-test", api_token=TOKEN, **options)  # type: ignore[arg-type]
    rec = Reconciler(settings, TaskStore(tasks), ray, clock=clock, metrics=metrics)
    observability = Observability(
        metrics=metrics.exposition,
        history=HistoryView(rec.history.path, buckets=60).window,
        dashboard="http://127.0.0.1:8265",
    )
    app = create_app(settings, reconciler=rec, ray=ray, observability=observability)
    return TestClient(app, base_url=BASE_URL), rec, clock


@pytest.fixture
def world(tasks_dir: Path) -> tuple[TestClient, Reconciler, FakeClock]:
    (tasks_dir / "big.yaml").write_text(task_yaml("echo big", cpu=3, priority=1))
    (tasks_dir / "long.yaml").write_text(task_yaml("sleep 100", cpu=3, priority=9))
    (tasks_dir / "broken.yaml").write_text(task_yaml("x").replace("resources", "resorces"))
    client, rec, clock = build(tasks_dir)
    for _ in range(2):
        clock.now += 1
        rec.run_pass()
    return client, rec, clock


def test_metrics_need_no_token_and_show_the_queue(world) -> None:
    client, _, _ = world
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    values = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }
    assert values[("rayqueue_build_info", (("version", "9.9.9"),))] == 1
    assert values[("rayqueue_running_tasks", (("queue", "default"),))] == 1  # long: Starting
    pending = (("queue", "default"), ("reason", "WaitingForResources"))
    assert values[("rayqueue_pending_tasks", pending)] == 1  # big waits
    assert values[("rayqueue_cluster_reserved", (("resource", "cpu"),))] == 3
    assert values[("rayqueue_ray_calls_total", (("call", "submit"), ("result", "ok")))] == 1
    assert values[("rayqueue_pass_duration_seconds_count", ())] == 2
    assert client.get("/tasks").status_code == 401  # the rest of the API still needs it


def test_metrics_auth_makes_metrics_need_the_token(tasks_dir: Path) -> None:
    client, _, _ = build(tasks_dir, metrics_auth=True)
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers=AUTH).status_code == 200


def test_page_and_script_load_without_token_data_needs_it(world) -> None:
    client, _, _ = world
    redirect = client.get("/ui", follow_redirects=False)
    assert redirect.status_code == 308 and redirect.headers["location"] == "ui/"
    page = client.get("/ui/")
    assert page.status_code == 200 and 'src="ui.js"' in page.text
    script = client.get("/ui/ui.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert not re.search(r"\.(innerHTML|outerHTML)\s*=|insertAdjacentHTML", script.text)
    for path in ("/ui/api/tasks", "/ui/api/overview", "/ui/api/history"):
        assert client.get(path).status_code == 401, path


def test_tasks_rows_in_queue_order(world) -> None:
    client, _, clock = world
    body = client.get("/ui/api/tasks", headers=AUTH).json()
    assert body["now"] == clock.now
    rows = {row["name"]: row for row in body["tasks"]}
    assert [row["name"] for row in body["tasks"]] == ["long", "big", "broken"]
    assert rows["long"]["phase"] == "Starting" and rows["long"]["jobUrl"].startswith(
        "http://127.0.0.1:8265/#/jobs/"
    )
    assert rows["big"]["reason"] == "WaitingForResources" and rows["big"]["position"] == 1
    assert "CPU" in rows["big"]["message"]
    assert rows["broken"]["phase"] == "Invalid"
    assert body["finished24h"] == 0


def test_overview_counts_and_capacity(world) -> None:
    client, _, _ = world
    body = client.get("/ui/api/overview", headers=AUTH).json()
    assert body["counts"] == {"running": 0, "starting": 1, "queued": 1}
    assert body["capacity"]["cpu"] == 4 and body["reserved"]["cpu"] == 3
    assert body["rayAvailable"] is True and body["queueId"] == "q-test"


def test_history_is_downsampled_per_window(world) -> None:
    client, _, _ = world
    body = client.get("/ui/api/history?window=1h", headers=AUTH).json()
    assert len(body["time"]) == 60
    assert body["end"] - body["start"] == 3600
    assert max(v for v in body["max"]["cpu"] if v is not None) == 3
    assert max(v for v in body["max"]["queued"] if v is not None) == 1
    assert client.get("/ui/api/history?window=1y", headers=AUTH).status_code == 422


def test_without_observability_metrics_are_404(tasks_dir: Path) -> None:
    client = TestClient(create_app(Settings(tasks_dir=tasks_dir)), base_url=BASE_URL)
    assert client.get("/metrics").status_code == 404
    assert client.get("/ui/").status_code == 200
    assert client.get("/ui/api/tasks").json()["tasks"] == []


QUEUES = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
      nominalQuota: {cpu: 1}
    - name: team-b
      nominalQuota: {cpu: 2}
      weight: 2
      lendingLimit: {cpu: 1}
"""


def test_queues_reach_metrics_and_the_web_view(tasks_dir: Path) -> None:
    (tasks_dir / "team-a").mkdir()
    (tasks_dir / "_queues.yaml").write_text(QUEUES)
    (tasks_dir / "team-a" / "x.yaml").write_text(task_yaml("sleep 100", cpu=2, priority=9))
    (tasks_dir / "team-a" / "y.yaml").write_text(task_yaml("sleep 100", cpu=2, priority=1))
    (tasks_dir / "loose.yaml").write_text(task_yaml("sleep 100", cpu=1))
    client, rec, clock = build(tasks_dir)
    for _ in range(2):
        clock.now += 1
        rec.run_pass()

    values = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(client.get("/metrics").text)
        for s in family.samples
    }
    assert values[("rayqueue_running_tasks", (("queue", "team-a"),))] == 1
    assert values[("rayqueue_running_tasks", (("queue", "default"),))] == 1
    pending = [k for k, v in values.items() if k[0] == "rayqueue_pending_tasks" and v]
    assert [dict(labels)["queue"] for _, labels in pending] == ["team-a"]
    cpu = (("queue", "team-a"), ("resource", "cpu"))
    assert values[("rayqueue_queue_nominal_quota", cpu)] == 1
    assert values[("rayqueue_queue_usage", cpu)] == 2
    assert values[("rayqueue_queue_borrowed", cpu)] == 1
    assert values[("rayqueue_queue_weighted_share", (("queue", "team-a"),))] > 0
    assert ("rayqueue_queue_usage", (("queue", "team-b"), ("resource", "cpu"))) in values
    assert values[("rayqueue_queue_resource_usage", cpu)] == 2
    team_b_cpu = (("queue", "team-b"), ("resource", "cpu"))
    assert values[("rayqueue_queue_lending_limit", team_b_cpu)] == 1
    # The loop's wiring: both runs were submitted in the pass that first saw their tasks, and
    # are counted and timed; team-b, with no task yet, has its zeros from the config.
    assert values[("rayqueue_admitted_tasks_total", (("queue", "team-a"),))] == 1
    assert values[("rayqueue_admitted_tasks_total", (("queue", "default"),))] == 1
    wait = (("priority", "9"), ("queue", "team-a"))
    assert values[("rayqueue_admission_wait_time_seconds_count", wait)] == 1
    failed_b = (("phase", "Failed"), ("queue", "team-b"))
    assert values[("rayqueue_finished_tasks_total", failed_b)] == 0

    panel = client.get("/ui/api/queues", headers=AUTH).json()
    # The panel's queues are GET /queues' with their readable text beside the numbers.
    items = client.get("/queues", headers=AUTH).json()["items"]
    assert [{k: v for k, v in q.items() if k != "text"} for q in panel["queues"]] == items
    team_a = next(q for q in panel["queues"] if q["name"] == "team-a")
    assert (team_a["pending"], team_a["admitted"], team_a["borrowed"]["cpu"]) == (1, 1, 1)
    assert team_a["text"]["usage"] == "2 CPU" and team_a["text"]["nominalQuota"] == "1 CPU"
    rows = client.get("/ui/api/tasks", headers=AUTH).json()["tasks"]
    assert {r["name"]: r["queue"] for r in rows} == {
        "team-a/x": "team-a",
        "team-a/y": "team-a",
        "loose": "default",
    }

    # The config goes: the panel hides and the queue series vanish.
    (tasks_dir / "_queues.yaml").unlink()
    clock.now += 1
    rec.run_pass()
    assert client.get("/ui/api/queues", headers=AUTH).json()["queues"] is None
    assert "rayqueue_queue_usage{" not in client.get("/metrics").text
    assert "rayqueue_queue_lending_limit{" not in client.get("/metrics").text


def test_queue_panel_is_empty_without_a_config(world) -> None:
    client, _, _ = world
    assert client.get("/ui/api/queues").status_code == 401
    assert client.get("/ui/api/queues", headers=AUTH).json()["queues"] is None


def test_the_task_table_comes_in_pages(tasks_dir: Path) -> None:
    for i in range(7):
        (tasks_dir / f"t{i}.yaml").write_text(task_yaml(f"echo {i}", cpu=1, priority=i))
    client, rec, clock = build(tasks_dir)
    clock.now += 1
    rec.run_pass()
    whole = client.get("/ui/api/tasks", headers=AUTH).json()
    assert whole["total"] == 7 and whole["continue"] is None and len(whole["tasks"]) == 7
    names, after, pages = [], None, 0
    while True:
        query = {"limit": 3} | ({"continue": after} if after is not None else {})
        page = client.get("/ui/api/tasks", params=query, headers=AUTH).json()
        assert page["total"] == 7 and len(page["tasks"]) <= 3
        names += [row["name"] for row in page["tasks"]]
        pages += 1
        after = page["continue"]
        if after is None:
            break
    assert pages == 3
    assert names == [row["name"] for row in whole["tasks"]]  # the same rows, in the same order
    for bad in ("x", "-1", "1e3", "٣"):
        refused = client.get("/ui/api/tasks", params={"continue": bad}, headers=AUTH)
        assert refused.status_code == 400, bad
    for limit in (0, 5001):
        assert client.get(f"/ui/api/tasks?limit={limit}", headers=AUTH).status_code in (400, 422)
    assert client.get("/ui/api/tasks?continue=99", headers=AUTH).json()["tasks"] == []
