"""A real Prometheus scrapes a real `rayqueue serve` on the real Ray fixture, with the shipped
scrape configuration; then every query of the shipped Grafana dashboard is evaluated through
Prometheus' own HTTP API, and the values are the ones a person reading the dashboard expects.

Tasks: one succeeds in each team queue, one fails twice (one retry), one is too big for the
cluster and waits. Prometheus is running and has scraped before the first task is written, as
it would be in production, so the first event of every label set must show in rate() and
increase(). `RAYQUEUE_DASHBOARD_VALUES=path` writes the panels' values there as JSON.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.shell.ops.metrics import CALLS, RESULTS
from specs.folder.atomic import write_atomic
from tests.support.net import answers, free_port
from tests.support.waiting import wait_until

pytestmark = pytest.mark.ray

ROOT = Path(__file__).parents[2]
MONITORING = ROOT / "examples" / "monitoring"
CLUSTER = "local"  # the label the shipped scrape config adds
QUEUES = {
    "apiVersion": "rayqueue/v1",
    "kind": "QueueConfig",
    "spec": {
        "queues": [
            {
                "name": "team-a",
                "nominalQuota": {"cpu": 2, "memory": "1Gi"},
                "borrowingLimit": {"cpu": 1, "memory": "512Mi"},
            },
            {
                "name": "team-b",
                "nominalQuota": {"cpu": 2},
                "lendingLimit": {"cpu": 1, "memory": "2Gi"},
            },
        ]
    },
}
TASKS: dict[str, dict[str, Any]] = {
    "team-a/ok": {"entrypoint": "python -c pass", "resources": {"cpu": 1}},
    "team-a/fails": {
        "entrypoint": "python -c 'import sys; sys.exit(3)'",
        "resources": {"cpu": 1},
        "retry": {"limit": 1, "backoffSeconds": 0, "on": ["Failed"]},
        "priority": 5,
    },
    "team-b/ok": {"entrypoint": "python -c pass", "resources": {"cpu": 1}},
    "team-b/too-big": {"entrypoint": "python -c pass", "resources": {"cpu": 64}},
}
FINAL = {"team-a/ok": "Succeeded", "team-a/fails": "Failed", "team-b/ok": "Succeeded"}

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
needs_prometheus = pytest.mark.skipif(
    PROMETHEUS is None or PROMTOOL is None,
    reason="prometheus and promtool are not installed (Debian package `prometheus`; "
    ".ci/run installs it when apt-get can)",
)


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a process we started in its own group, and everything it started."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture
def serve(ray_head: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """`rayqueue serve` on the Ray fixture: its base URL and its tasks folder."""
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    write_atomic(tasks / "_queues.yaml", yaml.safe_dump(QUEUES).encode())
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_DASHBOARD_ADDRESS")}
    env["PYTHONPATH"] = str(ROOT)
    log = tmp_path / "serve.log"
    command = [sys.executable, "-m", "reconciler.cli.main", "serve", "--dir", str(tasks)]
    command += ["--address", ray_head, "--port", str(port)]
    with log.open("w") as out:
        proc = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: proc.poll() is not None or answers(f"{base}/healthz"), "serve", 90)
        assert proc.poll() is None, log.read_text()
        yield base, tasks
    finally:
        _stop(proc)


@pytest.fixture
def prometheus(serve: tuple[str, Path], tmp_path: Path) -> Iterator[str]:
    """A Prometheus scraping serve every second with the shipped scrape configuration."""
    base = serve[0]
    config = yaml.safe_load((MONITORING / "prometheus.yml").read_text())
    config["global"]["scrape_interval"] = "1s"
    (job,) = config["scrape_configs"]
    job["static_configs"][0]["targets"] = [base.removeprefix("http://")]
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    port = free_port()
    assert PROMETHEUS is not None
    command = [PROMETHEUS, f"--config.file={path}", f"--storage.tsdb.path={tmp_path / 'tsdb'}"]
    command += [f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"]
    log = tmp_path / "prometheus.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: proc.poll() is not None or answers(f"{url}/-/ready"), "prometheus", 60)
        assert proc.poll() is None, log.read_text()
        yield url
    finally:
        _stop(proc)


class Prom:
    def __init__(self, url: str) -> None:
        self.url = url

    def instant(self, expr: str) -> dict[str, float]:
        """{legend-less series key: value} of an instant query now."""
        query = urllib.parse.urlencode({"query": expr})
        answer = _get(f"{self.url}/api/v1/query?{query}")
        assert answer["status"] == "success", answer
        return {_key(r["metric"]): float(r["value"][1]) for r in answer["data"]["result"]}

    def range(self, expr: str, start: float, end: float) -> dict[str, list[float]]:
        query = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": 1})
        answer = _get(f"{self.url}/api/v1/query_range?{query}")
        assert answer["status"] == "success", answer
        return {
            _key(r["metric"]): [float(v) for _, v in r["values"]] for r in answer["data"]["result"]
        }


def _key(metric: dict[str, str]) -> str:
    hidden = ("__name__", "instance", "job", "cluster")
    labels = {k: v for k, v in metric.items() if k not in hidden}
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "-"


def _expr(target: dict[str, Any]) -> str:
    return target["expr"].replace("$cluster", CLUSTER).replace("$resource", "cpu")


def _status(tasks: Path, name: str) -> dict[str, Any]:
    path = tasks / f"{name}.status.yaml"
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return {}
    return dict(document.get("status") or {})


@needs_prometheus
def test_every_dashboard_query_shows_what_happened(
    serve: tuple[str, Path], prometheus: str, tmp_path: Path
) -> None:
    base, tasks = serve
    prom = Prom(prometheus)
    scrape = f'rayqueue_build_info{{cluster="{CLUSTER}"}}'
    # Prometheus has scraped serve (with its zeros) before anything happens.
    wait_until(lambda: prom.instant(scrape), "the first scrape", 60, poll=0.5)
    start = time.time() - 5
    for name, spec in TASKS.items():
        document = {"apiVersion": "rayqueue/v1", "kind": "Task", "spec": spec}
        (tasks / name).parent.mkdir(exist_ok=True)
        write_atomic(tasks / f"{name}.yaml", yaml.safe_dump(document).encode())
    for name, phase in FINAL.items():
        wait_until(lambda n=name, p=phase: _status(tasks, n).get("phase") == p, name, 120, 0.5)
    # Two more scrapes see the last counts.
    wait_until(lambda: prom.instant("sum(rayqueue_finished_tasks_total)") == {"-": 3.0}, "3", 30)
    time.sleep(2.5)
    end = time.time()

    # promtool on a real scrape: no lint problems.
    with urllib.request.urlopen(f"{base}/metrics", timeout=10) as response:
        text = response.read()
    assert PROMTOOL is not None
    check = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True)
    assert check.returncode == 0 and not check.stdout and not check.stderr, check
    assert b"_created" not in text

    dashboard = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    values: dict[str, dict[str, dict[str, float]]] = {}
    for panel in dashboard["panels"]:
        shown: dict[str, dict[str, float]] = {}
        for target in panel["targets"]:
            expr = _expr(target)
            if target.get("instant"):
                shown[target["refId"]] = prom.instant(expr)
            else:
                series = prom.range(expr, start, end)
                shown[target["refId"]] = {key: points[-1] for key, points in series.items()}
        values[panel["title"]] = shown
    if os.environ.get("RAYQUEUE_DASHBOARD_VALUES"):
        Path(os.environ["RAYQUEUE_DASHBOARD_VALUES"]).write_text(json.dumps(values, indent=1))

    def one(title: str, ref: str = "A") -> float:
        (value,) = values[title][ref].values()
        return value

    def by(title: str, ref: str = "A") -> dict[str, float]:
        return values[title][ref]

    def count(title: str, ref: str = "A") -> dict[str, int]:
        # increase() extrapolates to the window's edge: 1 may read 1.02
        return {key: round(value) for key, value in by(title, ref).items()}

    assert one("Running") == 0
    assert one("Pending") == 1
    assert one("Finished (24 h)") == 3
    assert one("Ray reachable") == 1
    assert by("Version") == {f"version={_version(text)}": 1}
    assert one("Preempted (24 h)") == 0
    assert by("CPU: declared use vs. capacity", "B") == {"resource=cpu": 4}
    assert by("CPU: declared use vs. capacity", "A") == {"resource=cpu": 0}
    assert by("GPU: declared use vs. capacity", "B") == {"resource=gpu": 0}
    assert by("Memory: declared use vs. capacity", "B") == {"resource=memory": 8 * 2**30}
    assert sum(by("Pending tasks by reason").values()) == 1
    wait = values["Admission wait (queuedAt to submission)"]
    # p50 and p95 are numbers, not NaN: most runs were admitted in the pass that first saw
    # them (a wait near 0); the retry keeps its task's queuedAt, so its wait spans the first run.
    (p50,) = wait["A"].values()
    (p95,) = wait["B"].values()
    assert 0 <= p50 <= 1 and p50 <= p95, wait
    assert {k for k, v in wait["C"].items() if not math.isnan(v)} == {"priority=0", "priority=5"}
    finished = count("Finished runs by phase (per hour)")
    others = {"phase=TimedOut": 0, "phase=Stopped": 0, "phase=Lost": 0}
    assert finished == {"phase=Succeeded": 2, "phase=Failed": 1, **others}
    for ref in ("A", "B"):
        (pass_time,) = by("Reconcile pass duration", ref).values()
        assert not math.isnan(pass_time) and pass_time > 0
    failed_calls = by("Ray calls that failed (per second)")
    failures = [result for result in RESULTS if result != "ok"]
    assert len(failed_calls) == len(CALLS) * len(failures)  # each at 0 until it happens
    # Nothing fails: the failed run's log tail is asked for under its own id, not the retry's.
    assert not {k for k, v in failed_calls.items() if v}, failed_calls
    calls = by("Ray calls (per second)")
    assert calls["call=list_jobs"] > 0 and calls["call=submit"] > 0
    retries = count("Runs queued again by a retry policy (per hour)")
    assert retries == {"queue=team-a": 1, "queue=team-b": 0, "queue=default": 0}
    preempted = count("Preempted runs by queue and reason (per hour)")
    # every queue x reason (WithinQueue, Reclaim, InCohortFairSharing, Overusing), at 0 until
    # it happens
    reasons = {k.split(",")[1] for k in preempted}
    assert len(preempted) == 12 and set(preempted.values()) == {0}, preempted
    assert reasons == {
        "reason=WithinQueue",
        "reason=Reclaim",
        "reason=InCohortFairSharing",
        "reason=Overusing",
    }
    admitted = count("Admitted and evicted runs (per hour)")
    assert admitted == {"queue=team-a": 3, "queue=team-b": 1, "queue=default": 0}
    evicted = count("Admitted and evicted runs (per hour)", "B")
    assert len(evicted) == 12 and set(evicted.values()) == {0}, evicted
    assert by("Pending tasks by team queue")["queue=team-b"] == 1
    assert set(by("Running tasks by team queue").values()) == {0}
    assert set(by("Team queue weighted share").values()) == {0}
    usage = "Team queue usage vs. nominal quota ($resource)"
    assert set(by(usage, "A").values()) == {0}
    nominal = by(usage, "B")
    assert nominal["queue=team-a,resource=cpu"] == 2 and nominal["queue=team-b,resource=cpu"] == 2
    limits = "Team queue borrowing and limits ($resource)"
    assert set(by(limits, "A").values()) == {0}
    assert by(limits, "B") == {"queue=team-a,resource=cpu": 1}
    assert by(limits, "C") == {"queue=team-b,resource=cpu": 1}
    memory = "Team queue memory vs. nominal quota"
    assert by(memory, "B")["queue=team-a,resource=memory"] == 2**30
    memory_limits = "Team queue memory borrowing and limits"
    assert by(memory_limits, "B") == {"queue=team-a,resource=memory": 2**29}
    assert by(memory_limits, "C") == {"queue=team-b,resource=memory": 2 * 2**30}
    # Every query answered something: no panel of this run is empty.
    assert all(series for panel in values.values() for series in panel.values()), values


def _version(text: bytes) -> str:
    line = next(x for x in text.decode().splitlines() if x.startswith("rayqueue_build_info{"))
    return line.split('version="')[1].split('"')[0]
