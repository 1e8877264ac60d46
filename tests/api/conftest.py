"""In-process API fixtures: a TestClient over a temporary tasks folder, optionally with a real
Reconciler driven pass by pass against FakeRay and a fake clock."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from starlette.exceptions import StarletteDeprecationWarning

with warnings.catch_warnings():
    # Starlette >= 1.0 prefers the httpx2 package and warns once, at import, when it finds
    # httpx (our test dependency) instead. The client works the same; the warning would
    # otherwise be an error under `filterwarnings = error`.
    warnings.simplefilter("ignore", StarletteDeprecationWarning)
    from fastapi.testclient import TestClient

from api.app import TOKEN_ENV, create_app
from reconciler.loop import Reconciler
from reconciler.raycluster.fake import FakeRay
from specs.cluster import Capacity
from specs.settings import Settings
from specs.store import TaskStore

SEED_BODY = {
    "name": "my_job",
    "entrypoint": "python examples/scheduler/test.py",
    "runtime_env": {"working_dir": "/home/ray/src/mlumina"},
    "priority": 1,
    "cpu": 2,
    "gpu": 0,
    "memory": 4,
    "timeout": 300,
}


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under root (hidden ones too), by relative path: to prove nothing changed."""
    out: dict[str, bytes] = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            out[str(path.relative_to(root))] = path.read_bytes()
    return out


def task_yaml(entrypoint: str = "echo hi", *, cpu: float = 1, **spec: Any) -> str:
    doc = {
        "apiVersion": "rayqueue/v1",
        "kind": "Task",
        "spec": {"entrypoint": entrypoint, "resources": {"cpu": cpu}, **spec},
    }
    return yaml.safe_dump(doc, sort_keys=False)


def task_json(entrypoint: str = "echo hi", *, cpu: float = 1, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "rayqueue/v1",
        "kind": "Task",
        "spec": {"entrypoint": entrypoint, "resources": {"cpu": cpu}, **spec},
    }


@pytest.fixture(autouse=True)
def _no_token_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # A token in the developer's shell must not turn every test into a 401.
    monkeypatch.delenv(TOKEN_ENV, raising=False)


@pytest.fixture
def tasks_dir(tmp_path: Path) -> Path:
    path = tmp_path / "tasks"
    path.mkdir()
    return path


@pytest.fixture
def settings(tasks_dir: Path) -> Settings:
    return Settings(tasks_dir=tasks_dir, queue_id="q-test", api=True)


@pytest.fixture
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as test_client:
        yield test_client


@dataclass
class World:
    """An app wired to a Reconciler over FakeRay; call `step()` to run one reconcile pass."""

    client: TestClient
    reconciler: Reconciler
    ray: FakeRay
    clock: Clock
    tasks: Path

    def step(self, passes: int = 1) -> None:
        for _ in range(passes):
            self.reconciler.run_pass()

    def status(self, name: str) -> dict[str, Any]:
        path = self.tasks / f"{name}.status.yaml"
        if not path.exists():
            return {}
        result: dict[str, Any] = yaml.safe_load(path.read_text())["status"]
        return result


@pytest.fixture
def make_world(tasks_dir: Path) -> Iterator[Callable[..., World]]:
    clients: list[TestClient] = []

    def factory(capacity: Capacity = Capacity(4, 0, 16 * 2**30), **options: Any) -> World:  # noqa: B008
        clock = Clock()
        ray = FakeRay(capacity, clock=clock)
        settings = Settings(tasks_dir=tasks_dir, queue_id="q-test", **options)
        reconciler = Reconciler(settings, TaskStore(tasks_dir), ray, clock=clock)
        test_client = TestClient(create_app(settings, reconciler=reconciler, ray=ray))
        clients.append(test_client)
        return World(test_client, reconciler, ray, clock, tasks_dir)

    yield factory
    for test_client in clients:
        test_client.close()
