"""Where a Ray head's CPU goes over a window, per kind of process, read from /proc (Linux).

The throughput benchmark's two sides run on the same cores as Ray's own processes, so what
one side makes the dashboard or serve burn slows every job of that side. A sampler thread
reads utime + stime of each process of the head (found by the marker in its environment that
LocalRayHead sets) and of the extra pids it is given (serve), every `period` seconds, and keeps
the most each has used. A process that lives shorter than a period is missed, and one that
ends loses at most its last period: the same bias on both sides of a comparison.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable
from pathlib import Path

from benchmarks.procstat import cpu_seconds

PROC = Path("/proc")
_MARKER_ENV = "RAYQUEUE_LOCAL_HEAD"  # reconciler/shell/raycluster/local_head.py sets it

# The kinds: Ray's binaries by their program's name, the rest by a piece of the command line
# (first match wins; a worker's command line names the raylet's socket, so workers first).
BINARIES = {"gcs_server": "gcs", "raylet": "raylet"}
KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("serve", re.compile(r"reconciler\.cli\b.*\bserve\b")),
    # One kind for all workers: a worker first seen idle may become a job's supervisor (it
    # renames itself), and a pid's kind is read once.
    ("Ray workers", re.compile(r"^ray::|default_worker\.py")),
    ("dashboard agent", re.compile(r"dashboard/agent\.py")),
    ("runtime env agent", re.compile(r"runtime_env/agent")),
    ("dashboard", re.compile(r"dashboard")),
    ("monitors", re.compile(r"log_monitor|monitor\.py|ray start")),
)


def kind_of(cmdline: str) -> str:
    program = cmdline.split(" ", 1)[0].rsplit("/", 1)[-1]
    if program in BINARIES:
        return BINARIES[program]
    for kind, pattern in KINDS:
        if pattern.search(cmdline):
            return kind
    return "job driver / other"


def _cmdline(pid: int) -> str | None:
    try:
        return (
            (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return None


def _marked(pid: int, needle: bytes) -> bool:
    try:
        return needle in (PROC / str(pid) / "environ").read_bytes().split(b"\0")
    except OSError:
        return False


class CpuShare:
    """Samples a head's processes (and `extra` pids) until stopped; `totals()` then gives CPU
    seconds per kind over the window, counting only what each process used inside it."""

    def __init__(self, marker: str, extra: Iterable[int] = (), period: float = 0.1) -> None:
        self.needle = f"{_MARKER_ENV}={marker}".encode()
        self.extra = set(extra)
        self.period = period
        self.kinds: dict[int, str | None] = {}  # pid -> kind, None: not the head's
        self.first: dict[int, float] = {}  # CPU at the first sample (0 for one born since)
        self.last: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._sample(baseline=True)

    def __enter__(self) -> CpuShare:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample(baseline=False)

    def totals(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for pid, last in self.last.items():
            kind = self.kinds.get(pid)
            if kind is not None:
                out[kind] = out.get(kind, 0.0) + last - self.first.get(pid, 0.0)
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self._sample(baseline=False)

    def _sample(self, *, baseline: bool) -> None:
        for entry in os.listdir(PROC):
            if not entry.isdigit():
                continue
            pid = int(entry)
            if pid not in self.kinds:
                line = _cmdline(pid)
                mine = pid in self.extra or _marked(pid, self.needle)
                self.kinds[pid] = kind_of(line) if mine and line is not None else None
                if pid in self.extra and line is not None and self.kinds[pid] != "serve":
                    self.kinds[pid] = "serve"
            if self.kinds[pid] is None:
                continue
            try:
                used = cpu_seconds(pid)
            except (OSError, IndexError, ValueError):
                continue
            if baseline:
                self.first[pid] = used
            self.last[pid] = max(used, self.last.get(pid, 0.0))
