"""A private Ray head on loopback: free ports, its own temp dir, stopped by process group.

This module runs the `ray` CLI as a subprocess and never imports `ray` itself, so that only
`reconciler.shell.raycluster.adapter` depends on the Ray SDK.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Self

# Each head takes one "slot" of consecutive ports: the named ports first, then the workers'.
# A slot is claimed with an flock, so two LocalRayHeads on one machine never share ports,
# not even worker ports that happen to be unbound at the moment the second one starts.
_SLOT_SIZE = 128
_NAMED_PORTS = (
    "port",
    "dashboard-port",
    "dashboard-agent-listen-port",
    "dashboard-agent-grpc-port",
    "ray-client-server-port",
    "node-manager-port",
    "object-manager-port",
    "metrics-export-port",
    "runtime-env-agent-port",
)
_WORKER_OFFSET = 16
_WORKER_PORTS = 100
_PORT_RANGE = (20000, 59000)
_LOCK_DIR = Path("/tmp/rq-ray-ports")

# Set in the head's environment; every Ray process and job driver inherits it, even those
# that Ray puts into sessions of their own, so stop() can find them all.
_MARKER_ENV = "RAYQUEUE_LOCAL_HEAD"

# Every job of the head inherits the head's environment, so the head gets only what Ray and
# a job's Python need from the caller's; anything else (an API token, cloud keys) reaches
# the jobs only when the caller names it.
_NEEDED_ENV = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TZ",
        "VIRTUAL_ENV",
        "PYTHONPATH",
        "PYTHONHOME",
        "LD_LIBRARY_PATH",
        "CUDA_VISIBLE_DEVICES",
        "CONDA_EXE",
        "CONDA_PREFIX",
    }
)
_NEEDED_PREFIXES = ("LC_", "RAY_")
# Ray's own settings pass, but not one whose name says it holds a secret.
_SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "KEY", "AUTH", "PRIVATE")
# The private head must not be steered towards another cluster by the caller's environment.
_STEERING_ENV = ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")


@dataclass(frozen=True)
class _Extra:
    """What a head starts with besides its sizes (see LocalRayHead.start): an autoscaling
    head's resources and config, and the environment taken from the caller's."""

    resources: dict[str, float]
    autoscaling_config: Callable[[Path, Mapping[str, int]], Path] | None
    environment: dict[str, str]


class LocalRayError(RuntimeError):
    """The local Ray head failed to start."""


class LocalRayHead:
    """One `ray start --head --block` process group, owned by this object.

    The caller must call stop() (or use the object as a context manager); there is no
    atexit hook and no __del__, so ownership stays explicit.
    """

    def __init__(self, *, ray_executable: str | None = None) -> None:
        self._ray_executable = ray_executable
        self._proc: subprocess.Popen[bytes] | None = None
        self._temp_dir: Path | None = None
        self._log_path: Path | None = None
        self._lock_file: IO[bytes] | None = None
        self._address: str | None = None
        self.ports: dict[str, int] = {}
        self.worker_ports: tuple[int, int] | None = None

    @property
    def dashboard_address(self) -> str:
        if self._address is None:
            raise RuntimeError("the local Ray head is not running")
        return self._address

    @property
    def gcs_address(self) -> str:
        """host:port of the head's GCS (what Ray's autoscaler SDK and `ray start` take)."""
        if self._address is None:
            raise RuntimeError("the local Ray head is not running")
        return f"127.0.0.1:{self.ports['port']}"

    @property
    def pid(self) -> int | None:
        """Pid of `ray start`, which is also the id of the head's process group."""
        return self._proc.pid if self._proc is not None else None

    @property
    def temp_dir(self) -> Path | None:
        return self._temp_dir

    @property
    def log_path(self) -> Path | None:
        return self._log_path

    def start(
        self,
        *,
        num_cpus: float | None = None,
        num_gpus: float | None = None,
        memory_bytes: int | None = None,
        timeout_seconds: float = 90,
        resources: Mapping[str, float] | None = None,
        autoscaling_config: Callable[[Path, Mapping[str, int]], Path] | None = None,
        env: Mapping[str, str] | None = None,
        passed_env: Collection[str] = (),
    ) -> str:
        """Start the head and wait until its jobs API answers; return the dashboard address.

        `autoscaling_config(temp_dir, ports)` writes the autoscaler's cluster config (it is
        called once the temp dir and the ports are known) and returns its path: the head then
        runs Ray's autoscaler (`ray start --autoscaling-config`). The head, and so every job,
        gets only the part of this process's environment that Ray needs (head_environment),
        plus the variables named in `passed_env`; `env` is added on top (e.g.
        RAY_FAKE_CLUSTER=1 for Ray's fake node provider)."""
        if self._proc is not None:
            raise RuntimeError("the local Ray head is already started")
        ray = self._find_ray()
        base = head_environment(os.environ, passed_env)
        extra = _Extra(dict(resources or {}), autoscaling_config, base | dict(env or {}))
        try:
            self._start(ray, num_cpus, num_gpus, memory_bytes, timeout_seconds, extra)
        except BaseException:
            self.stop(grace_seconds=2)
            raise
        return self.dashboard_address

    def _start(
        self,
        ray: str,
        num_cpus: float | None,
        num_gpus: float | None,
        memory_bytes: int | None,
        timeout_seconds: float,
        extra: _Extra,
    ) -> None:
        deadline = time.monotonic() + timeout_seconds
        # Short path on purpose: Ray's unix socket paths live below it (~107-char limit).
        self._temp_dir = Path(tempfile.mkdtemp(prefix="rq-ray-", dir="/tmp"))
        self._log_path = self._temp_dir / "ray-start.log"
        base = self._claim_slot()
        self.ports = {name: base + i for i, name in enumerate(_NAMED_PORTS)}
        low = base + _WORKER_OFFSET
        self.worker_ports = (low, low + _WORKER_PORTS - 1)

        cmd = [
            ray,
            "start",
            "--head",
            "--block",
            "--node-ip-address",
            "127.0.0.1",
            "--dashboard-host",
            "127.0.0.1",
            "--disable-usage-stats",
            "--include-dashboard",
            "true",
            "--temp-dir",
            str(self._temp_dir),
            "--min-worker-port",
            str(self.worker_ports[0]),
            "--max-worker-port",
            str(self.worker_ports[1]),
        ]
        for name, port in self.ports.items():
            cmd += [f"--{name}", str(port)]
        if num_cpus is not None:
            cmd += ["--num-cpus", str(_whole(num_cpus, "num_cpus"))]
        if num_gpus is not None:
            cmd += ["--num-gpus", str(_whole(num_gpus, "num_gpus"))]
        if memory_bytes is not None:
            # Hidden in `ray start --help`, but supported: bytes of memory for scheduling.
            cmd += ["--memory", str(int(memory_bytes))]
        if extra.resources:
            cmd += ["--resources", json.dumps(extra.resources)]
        if extra.autoscaling_config is not None:
            config = extra.autoscaling_config(self._temp_dir, dict(self.ports))
            cmd += ["--autoscaling-config", str(config)]

        env = dict(extra.environment)
        env["RAY_USAGE_STATS_ENABLED"] = "0"
        # On SIGTERM, Ray 2.60 first drains the node for up to 30 s, waiting for running
        # jobs; a private head has nobody to drain for, so tear down at once.
        env["RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"] = "0"
        env[_MARKER_ENV] = str(self._temp_dir)
        # Python's own temp files (the dashboard's multiprocessing `pymp-*` dirs, which a
        # killed process leaves behind) then land in our temp dir and go with it.
        env["TMPDIR"] = str(self._temp_dir)

        with open(self._log_path, "wb") as log:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self._temp_dir,
                start_new_session=True,
            )
        self._address = f"http://127.0.0.1:{self.ports['dashboard-port']}"
        self._wait_ready(deadline, timeout_seconds)

    def _wait_ready(self, deadline: float, timeout_seconds: float) -> None:
        assert self._proc is not None and self._address is not None
        # The jobs API answers a few seconds before the raylet registers; until then the
        # cluster reports no capacity, so also wait for an alive node.
        checks: list[tuple[str, Callable[[bytes], bool]]] = [
            ("/api/version", lambda body: True),
            ("/api/jobs/", lambda body: True),
            ("/api/v0/nodes?detail=1", _has_alive_node),
        ]
        while checks:
            if self._proc.poll() is not None:
                raise LocalRayError(
                    f"`ray start` exited with code {self._proc.returncode} before the "
                    f"dashboard was ready; log tail:\n{self.log_tail()}"
                )
            path, ready = checks[0]
            if time.monotonic() > deadline:
                raise LocalRayError(
                    f"the Ray dashboard at {self._address} was not ready ({path}) within "
                    f"{timeout_seconds:g} s; log tail:\n{self.log_tail()}"
                )
            body = _http_get(self._address + path)
            if body is not None and ready(body):
                checks.pop(0)
            else:
                time.sleep(0.25)

    def log_tail(self, lines: int = 40) -> str:
        if self._log_path is None:
            return ""
        try:
            text = self._log_path.read_text(errors="replace")
        except OSError as exc:
            return f"(log unreadable: {exc})"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, grace_seconds: float = 10) -> None:
        """Kill the head's process group (TERM, then KILL after the grace) and clean up.

        Idempotent, lock-free and tolerant of a half-finished earlier call, so a signal
        handler may call it even while another stop() is under way.
        """
        # Nothing is cleared until the end: a stop() from a signal handler that interrupts
        # this one must still find the process and wait for it, not return early.
        proc = self._proc
        marker = str(self._temp_dir) if self._temp_dir is not None else None
        if proc is not None:
            pgid = proc.pid  # start_new_session made the child its group's leader
            # TERM to `ray start` alone: it tears the head down in order, while TERM to the
            # whole group leaves the raylet hanging on its dead GCS.
            # Whatever is left after the grace gets KILL, group-wide.
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + max(grace_seconds, 0)
            orphans_told = False
            while time.monotonic() < deadline:
                # Reap the leader, or it lingers as a zombie group member.
                if proc.poll() is not None and not orphans_told:
                    _signal_group(pgid, signal.SIGTERM)
                    orphans_told = True
                if not _group_alive(pgid):
                    break
                time.sleep(0.1)
            _signal_group(pgid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        if marker is not None:
            # Workers and job drivers that Ray moved to sessions of their own.
            _kill_marked(marker)
        if self._lock_file is not None:
            with contextlib.suppress(OSError):
                self._lock_file.close()  # releases the port slot's flock
            self._lock_file = None
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
        self._proc = None
        self._address = None
        self._temp_dir = None

    def __enter__(self) -> Self:
        if self._proc is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _find_ray(self) -> str:
        if self._ray_executable is not None:
            return self._ray_executable
        found = find_ray_executable()
        if found is None:
            raise LocalRayError("the `ray` executable was not found; install 'ray[default]'")
        return found

    def _claim_slot(self) -> int:
        _LOCK_DIR.mkdir(exist_ok=True)
        low, high = _slot_range()
        slots = list(range(low, high - _SLOT_SIZE, _SLOT_SIZE))
        random.shuffle(slots)
        for base in slots:
            try:
                lock = open(_LOCK_DIR / f"{base}.lock", "ab")  # noqa: SIM115 - held until stop()
            except OSError:  # e.g. another user's lock file
                continue
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                lock.close()
                continue
            ports = [base + i for i in range(len(_NAMED_PORTS))]
            ports += range(base + _WORKER_OFFSET, base + _WORKER_OFFSET + _WORKER_PORTS)
            if all(_port_free(p) for p in ports):
                self._lock_file = lock
                return base
            lock.close()
        raise LocalRayError(f"no free block of {_SLOT_SIZE} ports in {low}-{high}")


def head_environment(environ: Mapping[str, str], passed: Collection[str]) -> dict[str, str]:
    """The part of `environ` a private head starts with: what Ray and a job's Python need
    (the search paths, the locale, the virtualenv, Ray's own `RAY_*` settings but those named
    like a secret), and every variable named in `passed`. Never the variables that would
    point the head at another cluster."""
    kept = {}
    for name, value in environ.items():
        if name in passed or _needed(name):
            kept[name] = value
    for name in _STEERING_ENV:
        kept.pop(name, None)
    return kept


def _needed(name: str) -> bool:
    if name in _NEEDED_ENV:
        return True
    if not name.startswith(_NEEDED_PREFIXES):
        return False
    return not any(word in name.upper() for word in _SECRET_WORDS)


def find_ray_executable() -> str | None:
    """The `ray` CLI beside this interpreter first (the same install), then on PATH."""
    beside = Path(sys.executable).parent / "ray"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("ray")


def _whole(value: float, name: str) -> int:
    # `ray start` takes whole numbers for --num-cpus and --num-gpus.
    if value < 0 or not float(value).is_integer():
        raise ValueError(f"{name} must be a whole number >= 0 for `ray start`, got {value}")
    return int(value)


def _slot_range() -> tuple[int, int]:
    """Prefer ports below the kernel's ephemeral range, where outgoing connections don't land."""
    low, high = _PORT_RANGE
    try:
        eph_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return low, high
    if eph_low - low >= 20 * _SLOT_SIZE:
        return low, min(high, eph_low)
    return low, high


def _port_free(port: int) -> bool:
    # Binding the wildcard address fails if anyone holds the port on any local address.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def _http_get(url: str) -> bytes | None:
    """The body of a 200 answer, or None."""
    # No proxies: a loopback dashboard must never be reached through HTTP(S)_PROXY.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=2) as resp:
            return resp.read() if resp.status == 200 else None
    except (OSError, ValueError):
        return None


def _has_alive_node(body: bytes) -> bool:
    try:
        nodes = json.loads(body)["data"]["result"]["result"]
        return any(node.get("state") == "ALIVE" for node in nodes)
    except (ValueError, KeyError, TypeError, AttributeError):
        return False


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    """True while the group has a member that is not a zombie."""
    proc_dir = Path("/proc")
    if not proc_dir.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for entry in proc_dir.iterdir():
        if not entry.name.isdigit():
            continue
        stat = _proc_stat(entry)
        if stat is not None and stat[1] == pgid and stat[0] != "Z":
            return True
    return False


def _proc_stat(entry: Path) -> tuple[str, int] | None:
    """(state, pgid) from /proc/PID/stat, or None if the process is gone."""
    try:
        raw = (entry / "stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may contain spaces; fields follow the last ')'.
    fields = raw.rsplit(")", 1)[-1].split()
    try:
        return fields[0], int(fields[2])
    except (IndexError, ValueError):
        return None


def _marked_pids(marker: str) -> list[int]:
    needle = f"{_MARKER_ENV}={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            stat = _proc_stat(entry)
            if stat is not None and stat[0] != "Z":
                found.append(int(entry.name))
    return found


def _kill_marked(marker: str, wait_seconds: float = 5) -> None:
    if not Path("/proc").is_dir():
        return
    deadline = time.monotonic() + wait_seconds
    while pids := _marked_pids(marker):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            return
        time.sleep(0.1)
