"""`rayqueue serve` as a user runs it: a child process on a real Ray head, fed by file or HTTP.

The latency of a task is Ray's own job `start_time` (set when the job is submitted) minus the
moment the user began the write, for each way users write (WRITERS): rayqueue's own writer
(`rename`, specs/folder/atomic.py), `mv` of a finished file, a temporary file and os.replace from
Python, `cp`, `git pull` of a pushed commit, an editor's save (vim `:wq`), and an HTTP PUT.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

import yaml

from benchmarks.common import drop, spec_text
from reconciler.shell.raycluster.adapter import RayJobsAdapter
from specs.cluster import JobNotFound, RayJob

METHODS = ("rename", "mv", "os.replace", "cp", "git pull", "vim :wq", "http")
T = TypeVar("T")
_SLUG = re.compile(r"[^a-z]+")
REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Served:
    url: str  # its HTTP API
    pid: int


@contextlib.contextmanager
def serve_process(
    address: str,
    folder: Path,
    log: Path,
    *flags: str,
    queue_id: str | None = None,
    ready_timeout: float = 120,
) -> Iterator[Served]:
    """`python -m reconciler.cli serve` on `folder` against `address`, as a user starts it."""
    port = free_port()
    command = [sys.executable, "-m", "reconciler.cli", "serve", "--dir", str(folder)]
    command += ["--address", address, "--queue-id", queue_id or f"lat-{uuid.uuid4().hex[:8]}"]
    command += ["--port", str(port), *flags]
    env = {k: v for k, v in os.environ.items() if k != "RAYQUEUE_API_TOKEN"}  # no auth here
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    url = f"http://127.0.0.1:{port}"
    try:
        wait(
            lambda: _answers(f"{url}/healthz") or _died(proc, log) or None,
            ready_timeout,
            "serve's API",
        )
        yield Served(url, proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _died(proc: subprocess.Popen[bytes], log: Path) -> bool:
    if proc.poll() is not None:
        raise RuntimeError(f"serve exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
    return False


def wait(probe: Callable[[], T | None], timeout: float, what: str, every: float = 0.01) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value is not None:
            return value
        time.sleep(every)
    raise RuntimeError(f"timed out after {timeout:g}s waiting for {what}")


def put_task(url: str, name: str, data: bytes) -> None:
    request = urllib.request.Request(
        f"{url}/tasks/{name}",
        data=data,
        method="PUT",
        headers={"Content-Type": "application/yaml"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        if response.status not in (200, 201):
            raise RuntimeError(f"PUT {name}: HTTP {response.status}")


def submission_id(folder: Path, name: str) -> str | None:
    try:
        doc = yaml.safe_load((folder / f"{name}.status.yaml").read_bytes())
    except (FileNotFoundError, yaml.YAMLError):
        return None
    status = doc.get("status") if isinstance(doc, dict) else None
    sid = status.get("submissionId") if isinstance(status, dict) else None
    return sid if isinstance(sid, str) else None


def job(ray: RayJobsAdapter, sid: str) -> RayJob | None:
    try:
        return ray.job_info(sid)
    except JobNotFound:
        return None  # the sidecar is written before the submit


def ended(ray: RayJobsAdapter, sid: str) -> bool | None:
    found = job(ray, sid)
    return True if found is not None and found.terminal else None


_GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]


def _git(cwd: Path, *args: str) -> None:
    subprocess.run([*_GIT, *args], cwd=cwd, check=True, capture_output=True)


class Writers:
    """Each way of writing, as a user runs it. `prepare` does what comes before the user's
    action (a finished file elsewhere, a pushed commit); `write` is the action, timed."""

    def __init__(self, root: Path, folder: Path) -> None:
        self.folder = folder
        self.staging = root / "staging"  # same filesystem: mv is a rename
        self.staging.mkdir()
        self.upstream = root / "upstream.git"
        self.author = root / "author"
        _git(root, "init", "-q", "--bare", str(self.upstream))
        _git(root, "clone", "-q", str(self.upstream), str(self.author))
        (self.author / "README.md").write_text("tasks\n")
        _git(self.author, "add", "README.md")
        _git(self.author, "commit", "-q", "-m", "start")
        _git(self.author, "push", "-q", "origin", "HEAD")
        _git(root, "clone", "-q", str(self.upstream), str(folder))  # the watched folder

    def prepare(self, method: str, name: str, data: bytes) -> None:
        if method in ("mv", "cp", "vim :wq"):
            (self.staging / f"{name}.yaml").write_bytes(data)
        elif method == "git pull":
            (self.author / f"{name}.yaml").write_bytes(data)
            _git(self.author, "add", f"{name}.yaml")
            _git(self.author, "commit", "-q", "-m", name)
            _git(self.author, "push", "-q", "origin", "HEAD")

    def write(self, method: str, name: str, data: bytes, url: str) -> None:
        target = self.folder / f"{name}.yaml"
        source = self.staging / f"{name}.yaml"
        if method == "rename":
            drop(self.folder, name, data)
        elif method == "mv":
            subprocess.run(["mv", str(source), str(target)], check=True)
        elif method == "os.replace":
            with tempfile.NamedTemporaryFile(dir=self.folder, delete=False) as tmp:
                tmp.write(data)
            os.replace(tmp.name, target)
        elif method == "cp":
            subprocess.run(["cp", str(source), str(target)], check=True)
        elif method == "git pull":
            _git(self.folder, "pull", "-q", "--ff-only")
        elif method == "vim :wq":
            command = ["vim", "-u", "NONE", "-N", "-n", "-es", "-c", f"0r {source}", "-c", "wq"]
            subprocess.run([*command, str(target)], check=True)
        else:
            put_task(url, name, data)


def measure(
    address: str, drops: int, root: Path, methods: Sequence[str] = METHODS
) -> dict[str, list[float]]:
    """Each way of writing in turn, one at a time, each into an idle cluster. The first drop
    after serve starts (with the first way) is reported on its own line: it pays serve's and
    Ray's first-job start-up, which in a long-running serve happens once, and which would
    otherwise always land in the first way's tail."""
    folder = root / "served"
    writers = Writers(root, folder)
    ray = RayJobsAdapter(address)
    first = f"{methods[0]}, the first drop after serve starts"
    latencies: dict[str, list[float]] = {method: [] for method in methods}
    with serve_process(address, folder, root / "serve.log") as served:
        url = served.url

        def one(method: str, name: str) -> float:
            data = spec_text(cpu=0.01)
            writers.prepare(method, name, data)
            written = time.time()  # Ray's start_time is wall-clock time on this machine
            writers.write(method, name, data, url)
            sid = wait(partial(submission_id, folder, name), 60, f"{name}'s submission")
            started = wait(partial(job, ray, sid), 60, f"{sid} in Ray", every=0.05)
            assert started.start_time is not None
            # Let it end, so that the next write meets an idle cluster.
            wait(partial(ended, ray, sid), 60, f"{sid} to end", every=0.1)
            return started.start_time - written

        if drops and methods:
            latencies[first] = [one(methods[0], f"{_SLUG.sub('-', methods[0])}-first")]
        for i in range(drops):
            for method in methods:
                latencies[method].append(one(method, f"{_SLUG.sub('-', method)}{i:04d}"))
    return latencies
