"""The real loop and store over the session's Ray head, with the API in front and team tokens,
driven pass by pass: what the tenancy tests that need a real job share."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from fastapi.testclient import TestClient

from api.app import create_app
from reconciler.shell.loop.runner import Reconciler
from reconciler.shell.raycluster.adapter import RayJobsAdapter
from specs.cluster import META_QUEUE, RayJob
from specs.folder.store import TaskStore
from specs.settings.process import Settings
from tests.api.conftest import BASE_URL


class RealLoop:
    """`until` runs passes until a condition holds; `after_pass`, when given, is called after
    each pass (to keep what a team could read at that moment)."""

    def __init__(self, reconciler: Reconciler, ray: RayJobsAdapter, api: TestClient) -> None:
        self.reconciler = reconciler
        self.ray = ray
        self.api = api
        self.after_pass: Callable[[], None] | None = None

    def until(self, done: Callable[[], Any], what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.reconciler.run_pass()
            if self.after_pass is not None:
                self.after_pass()
            if done():
                return
            time.sleep(0.2)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}")

    def status(self, name: str) -> dict[str, Any]:
        path = self.reconciler.store.status_path(name)
        try:
            document = yaml.safe_load(path.read_text())
        except FileNotFoundError:
            return {}
        return dict(document.get("status", {}))

    def ours(self) -> list[RayJob]:
        queue = self.reconciler.options.queue_id
        return [j for j in self.ray.list_jobs() if j.metadata.get(META_QUEUE) == queue]


@contextmanager
def real_loop(
    ray_head: str, tasks_dir: Path, tokens_file: Path, **settings: Any
) -> Iterator[RealLoop]:
    """team-a/ and team-b/ made, the loop and API over `ray_head` with `settings` added; on the
    way out no job of this queue is left holding the session head's CPUs."""
    for team in ("team-a", "team-b"):
        (tasks_dir / team).mkdir(exist_ok=True)
    configured = Settings(
        tasks_dir=tasks_dir,
        address=ray_head,
        queue_id=f"tenancy-{uuid.uuid4().hex[:8]}",
        team_tokens=tokens_file,
        api=True,
        **settings,
    )
    ray = RayJobsAdapter(ray_head, timeout_seconds=10)
    reconciler = Reconciler(configured, TaskStore(tasks_dir), ray)
    app = create_app(configured, reconciler=reconciler, ray=ray)
    with TestClient(app, base_url=BASE_URL) as api:
        loop = RealLoop(reconciler, ray, api)
        try:
            yield loop
        finally:
            for job in loop.ours():
                if not job.terminal:
                    ray.stop(job.submission_id)
