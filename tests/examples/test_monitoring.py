"""examples/monitoring: the Grafana dashboard asks only for metrics rayqueue exposes."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from reconciler.shell.ops.metrics import CountingRayAdapter, QueueMetrics
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import Capacity
from specs.queues.config import QueueConfig
from specs.task.models import Metadata, Phase
from specs.task.status import TaskStatus, TaskStatusBody

FOLDER = Path(__file__).parents[2] / "examples" / "monitoring"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Figures:
    nominal: Capacity
    usage: Capacity
    borrowed: Capacity
    share: float


def exposed_names() -> set[str]:
    m = QueueMetrics("0.1.0")

    def status(phase: Phase, **body: object) -> TaskStatus:
        return TaskStatus(metadata=Metadata(), status=TaskStatusBody(phase=phase, **body))

    queued = status(Phase.QUEUED, reason="WaitingForResources", queued_at=T0)
    running = status(Phase.RUNNING, queued_at=T0, submitted_at=T0 + timedelta(seconds=3), run=1)
    done = status(Phase.SUCCEEDED, run=1, lost_restarts=1)
    passes = [({}, queued), (queued, running), (running, done)]
    for before, after in passes:
        old = {"a": before} if isinstance(before, TaskStatus) else {}
        m.observe_pass(
            old, {"a": after}, capacity=Capacity(1), reserved=Capacity(), ray_available=True
        )
    share = Figures(Capacity(2), Capacity(3), Capacity(1), 0.5)
    m.observe_queues({"team-a": share})
    limits = {"borrowingLimit": {"cpu": 1}, "lendingLimit": {"cpu": 1}}
    m.observe_config(
        QueueConfig.model_validate(
            {
                "apiVersion": "rayqueue/v1",
                "kind": "QueueConfig",
                "spec": {"queues": [{"name": "team-a", **limits}]},
            }
        )
    )
    with m.time_pass():
        CountingRayAdapter(FakeRay(), m).list_jobs()
    text = m.exposition().body.decode()
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line[:1].isalpha()}


def test_dashboard_queries_name_only_exposed_metrics() -> None:
    dashboard = json.loads((FOLDER / "grafana-dashboard.json").read_text())
    names = exposed_names()
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) >= 15
    used = {name for expr in exprs for name in re.findall(r"\brayqueue_[a-z_]+", expr)}
    assert used - names == set()
    # Every metric the issue asks for is on the dashboard.
    for metric in (
        "rayqueue_pending_tasks",
        "rayqueue_running_tasks",
        "rayqueue_admission_wait_time_seconds_bucket",
        "rayqueue_finished_tasks_total",
        "rayqueue_cluster_capacity",
        "rayqueue_cluster_reserved",
        "rayqueue_pass_duration_seconds_bucket",
        "rayqueue_ray_calls_total",
        "rayqueue_ray_available",
        "rayqueue_build_info",
        "rayqueue_queue_nominal_quota",
        "rayqueue_queue_resource_usage",
        "rayqueue_queue_borrowed",
        "rayqueue_queue_borrowing_limit",
        "rayqueue_queue_lending_limit",
        "rayqueue_queue_weighted_share",
        "rayqueue_preempted_tasks_total",
        "rayqueue_admitted_tasks_total",
        "rayqueue_evicted_tasks_total",
        "rayqueue_retries_total",
    ):
        assert metric in used, metric
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def test_scrape_config_points_at_metrics() -> None:
    config = yaml.safe_load((FOLDER / "prometheus.yml").read_text())
    (job,) = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"][0]["targets"] == ["127.0.0.1:8264"]


def panels() -> list[dict]:
    return json.loads((FOLDER / "grafana-dashboard.json").read_text())["panels"]


def test_dashboard_works_by_import_and_by_file_provisioning() -> None:
    dashboard = json.loads((FOLDER / "grafana-dashboard.json").read_text())
    # No `__inputs` (which only Import fills in): a datasource variable with a default instead.
    assert "__inputs" not in dashboard
    assert "DS_PROMETHEUS" not in json.dumps(dashboard)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert "cluster" in variables["cluster"]["definition"]
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}"
        for target in panel["targets"]:
            # two serves scraped by one Prometheus are never summed together
            names = re.findall(r"\brayqueue_[a-z_]+\{?", target["expr"])
            assert names and all(n.endswith("{") for n in names), target["expr"]
            assert target["expr"].count('cluster="$cluster"') == len(names), target["expr"]


def test_dashboard_units_and_titles_say_what_the_panels_show() -> None:
    by_title = {p["title"]: p for p in panels()}
    for panel in panels():
        exprs = " ".join(t["expr"] for t in panel["targets"])
        if 'resource="memory"' in exprs:
            assert panel["fieldConfig"]["defaults"]["unit"] == "bytes", panel["title"]
        if "$resource" in exprs:  # the picker offers cpu and gpu only: memory has its panels
            assert panel["fieldConfig"]["defaults"]["unit"] == "short"
    assert not any("after Lost" in title for title in by_title)
    retries = by_title["Runs queued again by a retry policy (per hour)"]
    assert "rayqueue_retries_total" in retries["targets"][0]["expr"]
    preempted = by_title["Preempted runs by queue and reason (per hour)"]
    assert "rayqueue_preempted_tasks_total" in preempted["targets"][0]["expr"]


@pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool (Debian: prometheus) is not installed"
)
def test_promtool_accepts_the_scrape_config() -> None:
    done = subprocess.run(
        ["promtool", "check", "config", str(FOLDER / "prometheus.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
