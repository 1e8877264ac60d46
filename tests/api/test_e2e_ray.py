"""End to end: a real uvicorn server and a real reconcile loop against the session's Ray head.

Each test has its own tasks folder and queue id. The Ray cluster is shared by the whole
session, so teardown deletes the test's specs and waits until every job of its queue is
terminal (stopping stragglers through the adapter).
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
import uvicorn

from api.app import create_app
from reconciler.shell.loop.runner import Reconciler
from reconciler.shell.raycluster.adapter import RayJobsAdapter
from specs.cluster import META_QUEUE, RUNNING, STOPPED, SUCCEEDED, JobNotFound, RayJob
from specs.folder.store import TaskStore
from specs.settings.process import Settings

pytestmark = pytest.mark.ray

SLEEP_FOREVER = 'python -c "import time; time.sleep(300)"'


@dataclass
class Served:
    base: str
    settings: Settings
    ray: RayJobsAdapter
    http: httpx.Client

    @property
    def tasks(self) -> Path:
        return self.settings.tasks_dir

    def wait(self, predicate: Callable[[], Any], what: str, timeout: float = 60) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = predicate()
            if result:
                return result
            time.sleep(0.1)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}")

    def job(self, submission_id: str) -> RayJob | None:
        try:
            return self.ray.job_info(submission_id)
        except JobNotFound:
            return None

    def wait_job(self, submission_id: str, statuses: set[str], timeout: float = 60) -> RayJob:
        def reached() -> RayJob | None:
            job = self.job(submission_id)
            return job if job is not None and job.status in statuses else None

        job: RayJob = self.wait(reached, f"Ray job {submission_id} to be {statuses}", timeout)
        return job

    def status(self, name: str) -> dict[str, Any]:
        response = self.http.get(f"/tasks/{name}")
        if response.status_code != 200:
            return {}
        status: dict[str, Any] = response.json()["status"]
        return status

    def our_jobs(self) -> list[RayJob]:
        queue = self.settings.resolved_queue_id
        return [j for j in self.ray.list_jobs() if j.metadata.get(META_QUEUE) == queue]


def _free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))  # bound here and handed to uvicorn: no port race
    return sock


@pytest.fixture
def served(ray_head: str, tmp_path: Path) -> Iterator[Served]:
    sock = _free_socket()
    port = sock.getsockname()[1]
    settings = Settings(
        tasks_dir=tmp_path / "tasks",
        address=ray_head,
        queue_id=f"api-e2e-{uuid.uuid4().hex[:8]}",
        interval_seconds=0.2,
        host="127.0.0.1",
        port=port,
    )
    settings.tasks_dir.mkdir()
    ray = RayJobsAdapter(ray_head, timeout_seconds=10)
    reconciler = Reconciler(settings, TaskStore(settings.tasks_dir), ray)
    stop = threading.Event()
    loop = threading.Thread(target=reconciler.run, args=(stop,), name="e2e-loop", daemon=True)
    loop.start()
    app = create_app(settings, reconciler=reconciler, ray=ray)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    api = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    api.start()
    base = f"http://127.0.0.1:{port}"
    http = httpx.Client(base_url=base, timeout=30)
    served = Served(base, settings, ray, http)
    try:
        served.wait(lambda: _healthy(http), "the API to answer /healthz", timeout=30)
        yield served
    finally:
        # Leave nothing running on the shared cluster: remove the specs, let the loop stop
        # its jobs, and stop any straggler directly.
        for path in settings.tasks_dir.rglob("*.y*ml"):
            if not path.name.endswith(".status.yaml"):
                path.unlink()
        reconciler.wake.set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(not j.terminal for j in served.our_jobs()):
            time.sleep(0.2)
        stop.set()
        reconciler.wake.set()
        loop.join(timeout=30)
        for job in served.our_jobs():
            if not job.terminal:
                ray.stop(job.submission_id)
        server.should_exit = True
        api.join(timeout=30)
        http.close()
        sock.close()
        assert all(j.terminal for j in served.our_jobs()), "a job of this test is still running"


def _healthy(http: httpx.Client) -> bool:
    try:
        return http.get("/healthz").status_code == 200
    except httpx.TransportError:
        return False


def add_task(served: Served, **body: Any) -> dict[str, Any]:
    payload = {"runtime_env": {}, "priority": 1, "cpu": 1, "gpu": 0, "memory": 0, "timeout": 0}
    response = served.http.post("/add_task", json={**payload, **body})
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def test_add_task_runs_a_ray_job_whose_submission_id_is_the_task_id(
    served: Served, tmp_path: Path
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "hello.py").write_text("print('hello from rayqueue')\n")
    body = add_task(
        served,
        name="hello",
        entrypoint="python hello.py",
        runtime_env={"working_dir": str(workdir)},
        cpu=1,
        memory=1,
        timeout=120,
    )
    task_id = body["task_id"]
    job = served.wait_job(task_id, {SUCCEEDED, "FAILED", STOPPED})
    assert job.status == SUCCEEDED, job.message
    assert job.submission_id == task_id
    status = served.wait(
        lambda: (
            served.status(body["task"]).get("phase") == "Succeeded" and served.status(body["task"])
        ),
        "the sidecar to say Succeeded",
    )
    assert status["submissionId"] == task_id
    logs = served.http.get(f"/tasks/{body['task']}/logs")
    assert logs.status_code == 200
    assert "hello from rayqueue" in logs.text


def test_seed_example_call_verbatim(served: Served) -> None:
    url = served.base  # the seed's http://127.0.0.1:8264, on this test's free port
    response = requests.post(
        f"{url}/add_task",
        json={
            "name": "my_job",
            "entrypoint": "python examples/scheduler/test.py",
            "runtime_env": {"working_dir": "/home/ray/src/mlumina"},
            "priority": 1,
            "cpu": 2,
            "gpu": 0,
            "memory": 4,
            "timeout": 300,
        },
        timeout=60,
    )
    assert response.status_code == 200
    task_id = response.json()["task_id"]
    assert task_id.startswith("mlumina-my_job-priority-1-2cpu-0gpu-4memory-")
    name = response.json()["task"]
    assert (served.tasks / f"{name}.yaml").is_file()
    # /home/ray/src/mlumina exists only in the old Docker stack; the loop must record the
    # outcome of its run (whatever it is) and keep going.
    served.wait(lambda: served.status(name).get("phase") not in (None, "Queued"), "a decision")
    assert served.http.get("/readyz").status_code == 200


def test_change_priority_reorders_a_contended_queue(served: Served, tmp_path: Path) -> None:
    release = tmp_path / "release"
    hold = f"python -c \"import os, time\nwhile not os.path.exists('{release}'): time.sleep(0.05)\""
    filler = served.http.put(
        "/tasks/filler",
        json={
            "apiVersion": "rayqueue/v1",
            "kind": "Task",
            "spec": {"entrypoint": hold, "resources": {"cpu": 4}, "timeoutSeconds": 120},
        },
    )
    assert filler.status_code == 201
    served.wait(
        lambda: served.status("filler").get("phase") in ("Starting", "Running"),
        "the filler to hold the cluster",
    )
    quick = "python -c \"print('done')\""
    first = add_task(served, name="first", entrypoint=quick, cpu=4)
    served.wait(lambda: served.status(first["task"]).get("queuePosition") == 1, "first queued")
    second = add_task(served, name="second", entrypoint=quick, cpu=4)
    served.wait(lambda: served.status(second["task"]).get("queuePosition") == 2, "second queued")

    response = served.http.post(
        "/change_task_priority", json={"task_id": second["task_id"], "priority": 5}
    )
    assert response.status_code == 200
    assert response.json()["priority"] == 5
    served.wait(
        lambda: served.status(second["task"]).get("queuePosition") == 1,
        "the loop to put second ahead",
    )
    release.write_text("go")

    a = served.wait_job(first["task_id"], {SUCCEEDED})
    b = served.wait_job(second["task_id"], {SUCCEEDED})
    assert b.start_time is not None and a.start_time is not None
    assert b.start_time < a.start_time, (b.start_time, a.start_time)


def test_cancel_stops_a_running_job(served: Served) -> None:
    body = add_task(served, name="sleeper", entrypoint=SLEEP_FOREVER, cpu=1)
    task_id = body["task_id"]
    served.wait_job(task_id, {RUNNING})
    response = served.http.post("/cancel_task", params={"task_id": task_id})
    assert response.status_code == 200
    assert response.json()["suspend"] is True
    served.wait_job(task_id, {STOPPED}, timeout=30)
    served.wait(lambda: served.status(body["task"]).get("phase") == "Suspended", "Suspended")


def test_put_then_delete_starts_then_stops_a_job(served: Served) -> None:
    spec = (
        "apiVersion: rayqueue/v1\nkind: Task\n"
        "spec:\n"
        f"  entrypoint: '{SLEEP_FOREVER}'  # sleeps until stopped\n"
        "  resources: {cpu: 1}\n"
    )
    created = served.http.put(
        "/tasks/team/sleeper", content=spec, headers={"content-type": "application/yaml"}
    )
    assert created.status_code == 201, created.text
    sid = served.wait(lambda: served.status("team/sleeper").get("submissionId"), "a submission")
    served.wait_job(sid, {RUNNING})
    deleted = served.http.delete(
        "/tasks/team/sleeper", headers={"If-Match": created.headers["etag"]}
    )
    assert deleted.status_code == 200
    served.wait_job(sid, {STOPPED}, timeout=30)
