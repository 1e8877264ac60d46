"""A reconcile loop on its own tasks folder and queue id, against the session's real Ray head."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.shell.loop.runner import Reconciler
from reconciler.shell.raycluster.adapter import RayJobsAdapter
from specs.cluster import META_QUEUE, Autoscaler, RayJob
from specs.folder.atomic import write_atomic
from specs.folder.store import TaskStore
from specs.settings.process import Settings
from tests.support.specs import read_status
from tests.support.waiting import wait_until


@dataclass
class Queue:
    settings: Settings
    ray: RayJobsAdapter
    reconciler: Reconciler | None = None
    stop_event: threading.Event | None = None
    thread: threading.Thread | None = None
    autoscaler: Autoscaler | None = None

    @property
    def dir(self) -> Path:
        return self.settings.tasks_dir

    def start(self) -> None:
        store = TaskStore(self.settings.tasks_dir, self.settings.status_dir)
        self.reconciler = Reconciler(self.settings, store, self.ray, autoscaler=self.autoscaler)
        self.stop_event = threading.Event()
        self.thread = threading.Thread(
            target=self.reconciler.run, args=(self.stop_event,), daemon=True
        )
        self.thread.start()

    def halt(self) -> None:
        if self.stop_event is not None and self.thread is not None:
            self.stop_event.set()
            assert self.reconciler is not None
            self.reconciler.wake.set()
            self.thread.join(timeout=30)
            assert not self.thread.is_alive(), "reconcile loop did not stop"

    def write(self, name: str, spec: dict[str, object], priority: int = 0) -> None:
        doc = {"apiVersion": "rayqueue/v1", "kind": "Task", "spec": {"priority": priority, **spec}}
        write_atomic(self.dir / f"{name}.yaml", yaml.safe_dump(doc).encode())

    def status(self, name: str) -> dict[str, object]:
        return read_status(self.dir, name)

    def wait_for(self, predicate: Callable[[], object], what: str, timeout: float = 60) -> None:
        wait_until(predicate, what, timeout)

    def wait_phase(self, name: str, phases: set[str], timeout: float = 60) -> dict[str, object]:
        self.wait_for(
            lambda: self.status(name).get("phase") in phases,
            f"{name} to reach {phases} (now {self.status(name)})",
            timeout,
        )
        return self.status(name)

    def jobs(self) -> list[RayJob]:
        return [
            j for j in self.ray.list_jobs() if j.metadata.get(META_QUEUE) == self.settings.queue_id
        ]


@pytest.fixture
def make_queue(ray_head: str, tmp_path: Path) -> Iterator[Callable[..., Queue]]:
    """Build queues; at teardown stop their loops and every job they left in Ray."""
    made: list[Queue] = []

    def factory(**overrides: Any) -> Queue:
        fields: dict[str, Any] = {
            "tasks_dir": tmp_path / f"tasks-{len(made)}",
            "address": ray_head,
            "queue_id": f"test-{uuid.uuid4().hex[:8]}",
            "interval_seconds": 0.2,
            "api": False,
        }
        settings = Settings(**(fields | overrides))
        settings.tasks_dir.mkdir(parents=True, exist_ok=True)
        queue = Queue(settings, RayJobsAdapter(ray_head, timeout_seconds=10))
        made.append(queue)
        return queue

    yield factory
    for queue in made:
        queue.halt()
        for job in queue.jobs():
            if not job.terminal:
                queue.ray.stop(job.submission_id)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(not j.terminal for j in queue.jobs()):
            time.sleep(0.2)
