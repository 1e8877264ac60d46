"""In-process CLI runs: `main([...])` against a temporary tasks folder, output captured, beside
the shared test World (a real Reconciler over FakeRay) to put tasks into known states."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from reconciler.cli.main import main
from tests.support.world import World

QUEUE_ID = "cli-test"


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # The user's shell must not leak a real cluster or folder into these tests.
    for var in ("RAY_DASHBOARD_ADDRESS", "RAY_ADDRESS", "RAYQUEUE_DIR"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    folder = tmp_path / "tasks"
    folder.mkdir()
    return folder


@pytest.fixture
def rq(capsys: pytest.CaptureFixture[str], tasks: Path) -> Callable[..., Result]:
    """rq("get", "-o", "wide") runs `rayqueue get -o wide --dir <tasks>`."""

    def run(*argv: str, folder: Path | None = tasks) -> Result:
        args = [*argv, "--dir", str(folder)] if folder is not None else list(argv)
        code = main(args)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def spec_text(
    entrypoint: str = "echo hi", cpu: float = 1, priority: int = 0, **extra: object
) -> str:
    """A valid spec as YAML text; `extra` adds spec fields (resources= replaces cpu=)."""
    spec = {"entrypoint": entrypoint, "priority": priority, "resources": {"cpu": cpu}, **extra}
    return yaml.safe_dump({"apiVersion": "rayqueue/v1", "kind": "Task", "spec": spec})


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file below `folder` with its bytes and mtime: to prove a command wrote nothing."""
    result = {}
    for root, _, files in os.walk(folder):
        for name in files:
            path = Path(root) / name
            result[str(path.relative_to(folder))] = (path.read_bytes(), path.stat().st_mtime_ns)
    return result


@pytest.fixture
def world(tasks: Path, tmp_path: Path) -> World:
    """The tasks folder under a Reconciler; `world.step()` runs a pass without moving the clock.

    The clock starts at the real time, because the CLI measures ages and timeouts against
    `time.time()`; tests move it by hand.
    """
    return World.build(
        tasks, start=time.time(), tick=0.0, queue_id=QUEUE_ID, state_dir=tmp_path / "state"
    )
