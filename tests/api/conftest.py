"""In-process API fixtures: a TestClient over a temporary tasks folder, optionally wired to the
shared test World (a real Reconciler driven pass by pass against FakeRay and a fake clock)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import starlette.exceptions
import yaml

with warnings.catch_warnings():
    # Starlette >= 1.0 prefers the httpx2 package and warns once, at import, when it finds
    # httpx (our test dependency) instead. The client works the same; the warning would
    # otherwise be an error under `filterwarnings = error`.
    # (Starlette before 1.0, which our lower bound allows, has neither the class nor the warning.)
    warnings.simplefilter(
        "ignore",
        getattr(starlette.exceptions, "StarletteDeprecationWarning", DeprecationWarning),
    )
    from fastapi.testclient import TestClient

from api.app import TOKEN_ENV, create_app
from specs.cluster import Capacity
from specs.settings.process import Settings
from tests.support.world import DEFAULT_CAPACITY, World

# TestClient's own default, http://testserver, is not an allowed Host (DNS-rebinding check).
BASE_URL = "http://localhost"

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
    with TestClient(create_app(settings), base_url=BASE_URL) as test_client:
        yield test_client


@pytest.fixture
def make_world(tasks_dir: Path) -> Iterator[Callable[..., tuple[World, TestClient]]]:
    """`world, api = make_world(capacity, **settings)`: the app wired to a World's Reconciler
    and FakeRay. `world.step()` runs a pass without moving the clock; tests move it."""
    clients: list[TestClient] = []

    def factory(capacity: Capacity = DEFAULT_CAPACITY, **options: Any) -> tuple[World, TestClient]:
        world = World.build(tasks_dir, capacity, tick=0.0, api=True, **options)
        app = create_app(world.reconciler.settings, reconciler=world.reconciler, ray=world.ray)
        test_client = TestClient(app, base_url=BASE_URL)
        clients.append(test_client)
        return world, test_client

    yield factory
    for test_client in clients:
        test_client.close()
