"""Shared pieces of the reliability suite: its figures, a FakeRay world, and `rayqueue serve`
run as a real subprocess that can be killed. Spec files, the world, the clock and wait_until
are in tests.support."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from reconciler.shell.loop.faults import ENV as CRASH_ENV
from reconciler.shell.raycluster.adapter import RayJobsAdapter
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import META_QUEUE, Capacity
from tests.support.world import GIB, World

REPO = Path(__file__).resolve().parents[2]

# --- the suite's own figures ------------------------------------------------------------------

_figures_key = pytest.StashKey[Counter[str]]()
# The order they are printed in; anything else a test counts follows.
FIGURE_ORDER = (
    "crash points tried",
    "crash points hit in process",
    "crash points by external SIGKILL",
    "serve restarts",
    "Ray jobs checked",
    "duplicates found",
    "tasks lost",
    "final statuses not matching Ray",
    "inputs tried",
    "parser crashes",
    "files touched outside the folder",
    "schemathesis cases",
    "HTTP 500s",
)


@pytest.fixture(scope="session")
def figures(request: pytest.FixtureRequest) -> Counter[str]:
    """Counters a test adds to; printed at the end of the session."""
    stash = request.config.stash
    if _figures_key not in stash:
        stash[_figures_key] = Counter()
    return stash[_figures_key]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    counts = terminalreporter.config.stash.get(_figures_key, None)
    if not counts:
        return
    terminalreporter.section("reliability figures")
    names = [n for n in FIGURE_ORDER if n in counts] + sorted(
        n for n in counts if n not in FIGURE_ORDER
    )
    width = max(len(n) for n in names)
    for name in names:
        terminalreporter.write_line(f"{name:<{width}}  {counts[name]}")


# --- a Reconciler over FakeRay, pass by pass, with a fake clock -------------------------------


@pytest.fixture
def make_world(tmp_path: Path) -> Callable[..., World]:
    """A Reconciler on its own folder over FakeRay; `settle_seconds` goes to the store."""
    count = 0

    def factory(
        capacity: Capacity = Capacity(4, 0, 16 * GIB),  # noqa: B008 - frozen
        *,
        tasks: Path | None = None,
        settle_seconds: float = 0.0,
        ray: FakeRay | None = None,
        **options: Any,
    ) -> World:
        nonlocal count
        count += 1
        folder = tasks if tasks is not None else tmp_path / f"tasks-{count}"
        folder.mkdir(parents=True, exist_ok=True)
        fields: dict[str, Any] = {"queue_id": "q-rel", "interval_seconds": 1.0}
        return World.build(
            folder, capacity, ray=ray, settle_seconds=settle_seconds, **(fields | options)
        )

    return factory


# --- `rayqueue serve` as a subprocess ---------------------------------------------------------


@dataclass
class ServeProcess:
    """`python -m reconciler.cli serve --no-api ...` that can be started, killed and restarted."""

    tasks: Path
    address: str | None
    queue_id: str
    logs: Path
    args: tuple[str, ...] = ("--interval", "0.2")
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    log_paths: list[Path] = field(default_factory=list)

    def start(self, crash_at: str | None = None, *extra: str) -> subprocess.Popen[bytes]:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
        env["PYTHONUNBUFFERED"] = "1"
        if crash_at:
            env[CRASH_ENV] = crash_at
        command = [sys.executable, "-m", "reconciler.cli", "serve", "--no-api"]
        command += ["--dir", str(self.tasks), "--queue-id", self.queue_id]
        if self.address:
            command += ["--address", self.address]
        command += [*self.args, *extra]
        self.starts += 1
        self.logs.mkdir(parents=True, exist_ok=True)
        log_path = self.logs / f"serve-{self.starts:03d}.log"
        self.log_paths.append(log_path)
        with log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO
            )
        return self.proc

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait(self, timeout: float) -> int | None:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        if self.alive:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def terminate(self, timeout: float = 30) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.wait(timeout)
        if code is None:
            self.kill()
            raise AssertionError("serve did not stop on SIGTERM")
        return code

    def wait_ready(self, timeout: float = 60) -> None:
        """Until the loop runs (its "watching ..." line), or fail if the process died."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "watching " in self.log_text():
                return
            if not self.alive:
                raise AssertionError(f"serve exited early:\n{self.log_text()[-3000:]}")
            time.sleep(0.1)
        raise AssertionError(f"serve not ready after {timeout:g}s:\n{self.log_text()[-3000:]}")

    def log_text(self, index: int = -1) -> str:
        try:
            return self.log_paths[index].read_text(errors="replace")
        except (IndexError, FileNotFoundError):
            return ""


def stop_queue_jobs(ray: RayJobsAdapter, queue_id: str, timeout: float = 30) -> None:
    """Leave the shared Ray head as we found it: every job of this queue ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        live = [
            j for j in ray.list_jobs() if j.metadata.get(META_QUEUE) == queue_id and not j.terminal
        ]
        if not live:
            return
        for job in live:
            # Best effort: teardown must not mask the test's own failure.
            with contextlib.suppress(Exception):
                ray.stop(job.submission_id)
        time.sleep(0.3)


@pytest.fixture
def make_serve(ray_head: str, tmp_path: Path) -> Iterator[Callable[..., ServeProcess]]:
    """Serve processes on the shared Ray head, each with its own queue id; all killed, and
    all their jobs stopped, at teardown."""
    made: list[ServeProcess] = []

    def factory(tasks: Path | None = None, **kwargs: Any) -> ServeProcess:
        folder = tasks if tasks is not None else tmp_path / f"tasks-{len(made)}"
        folder.mkdir(parents=True, exist_ok=True)
        serve = ServeProcess(
            tasks=folder,
            address=ray_head,
            queue_id=kwargs.pop("queue_id", f"rel-{uuid.uuid4().hex[:8]}"),
            logs=tmp_path / f"logs-{len(made)}",
            **kwargs,
        )
        made.append(serve)
        return serve

    yield factory
    adapter = RayJobsAdapter(ray_head, timeout_seconds=10)
    for serve in made:
        serve.kill()
    for queue in {s.queue_id for s in made}:
        stop_queue_jobs(adapter, queue)
