"""The busy steady state: `rayqueue serve` with N waiting 1-CPU tasks and a job ending about every
second. What does serve cost while the queue drains one job at a time?
Run at several N (fake Ray: 1,000, 10,000 and 50,000 by default), so the plot shows a line.

Two Rays, each behind `python -m reconciler.cli serve` run as a user runs it (the CLI's serve
entry, the real loop, watcher, store and HTTP API), in a process of its own:

- `fake`: Ray in serve's own process (reconciler/shell/raycluster/fake.py), whose jobs run
  `--job-seconds` each on `--cpus` CPUs (4 s on 4: one ends every second). Serve's CPU is the
  loop's alone, nothing of Ray's.
- `head`: a private real Ray head of `--cpus` CPUs, the tasks `sleep 3`.

The specs are written as a user would: into a staging folder, then `cp` into the watched one
before serve starts. Once every task is accounted for and every first sidecar is written (the
cold start), a `--window` of seconds is measured from outside the process: CPU (utime + stime
from /proc), RSS, and the runs that ended (serve's own /metrics: rayqueue_finished_tasks).

python -m benchmarks.busy                     # fake at 1k, 10k, 50k; a private 4-CPU head at 10k
python -m benchmarks.busy --ray fake --sizes 10000 --window 60
python -m benchmarks.busy --ray fake --profile  # cProfile of serve's passes in the window
python -m benchmarks.busy --ray head --profile  # the same against a real head
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from benchmarks import procstat
from benchmarks.common import save, spec_text, table
from benchmarks.served import free_port, wait
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import PENDING, RUNNING, SUCCEEDED, Capacity, RayJob

REPO = Path(__file__).resolve().parent.parent
GOAL_PCT = 5.0  # the goal for serve's CPU in the busy steady state, % of one core


class TimedFakeRay(FakeRay):
    """The fake Ray, whose jobs run for `seconds` once they start, and never more than
    `cpus` at once (each 1 CPU): so, on a full queue, cpus / seconds jobs end per second."""

    def __init__(self, cpus: int, seconds: float) -> None:
        super().__init__(Capacity(cpus, 0, 2**40))
        self.seconds = seconds
        self.cpus = cpus
        self._started: dict[str, float] = {}

    def list_jobs(self) -> Sequence[RayJob]:
        with self._lock:
            now = time.time()
            running = 0
            for sid, job in list(self.jobs.items()):
                if job.status == RUNNING and now - self._started[sid] >= self.seconds:
                    self.set_status(sid, SUCCEEDED)
                elif job.status == RUNNING:
                    running += 1
            for sid, job in list(self.jobs.items()):
                if job.status == PENDING and running < self.cpus:
                    self.jobs[sid] = replace(job, status=RUNNING, message="Job is running.")
                    self._started[sid] = now
                    running += 1
            return super().list_jobs()


def serve_fake(argv: list[str]) -> int:
    """`rayqueue serve ARGV` in this process, with a TimedFakeRay for Ray (the child of a
    `--ray fake` run). RQ_BUSY_PROFILE=PATH: cProfile every pass once the file RQ_BUSY_MARK
    exists, written to PATH when serve exits."""
    from reconciler.app import daemon
    from reconciler.cli import main as cli
    from reconciler.shell.raycluster import adapter

    cpus = int(os.environ["RQ_BUSY_CPUS"])
    seconds = float(os.environ["RQ_BUSY_JOB_SECONDS"])
    fake = TimedFakeRay(cpus, seconds)
    adapter.RayJobsAdapter = lambda *a, **k: fake  # type: ignore[assignment,misc]
    daemon.autoscaler_for = lambda *a, **k: None  # type: ignore[attr-defined,assignment]
    profile_to = os.environ.get("RQ_BUSY_PROFILE")
    if profile_to:
        _profile_passes(Path(profile_to), Path(os.environ["RQ_BUSY_MARK"]))
    return cli.main(argv)


def serve_profiled(argv: list[str]) -> int:
    """`rayqueue serve ARGV` against a real Ray, its passes profiled (a `--profile` head run)
    or traced (`--trace`: benchmarks/busytrace.py)."""
    from reconciler.cli import main as cli

    mark = Path(os.environ["RQ_BUSY_MARK"])
    if os.environ.get("RQ_BUSY_PROFILE"):
        _profile_passes(Path(os.environ["RQ_BUSY_PROFILE"]), mark)
    if os.environ.get("RQ_BUSY_TRACE"):
        from benchmarks import busytrace

        busytrace.install(Path(os.environ["RQ_BUSY_TRACE"]), mark)
    return cli.main(argv)


def _profile_passes(out: Path, mark: Path) -> None:
    import cProfile

    from reconciler.shell.loop.runner import Reconciler

    # The loop thread's CPU time, not the wall clock: waits on Ray and the disk are not cost.
    prof = cProfile.Profile(time.thread_time)
    original = Reconciler.run_pass
    count = [0]

    def profiled(self: Reconciler) -> Any:
        if not mark.exists():
            return original(self)
        count[0] += 1
        prof.enable()
        try:
            return original(self)
        finally:
            prof.disable()
            if count[0] % 50 == 0:
                prof.dump_stats(str(out))

    Reconciler.run_pass = profiled  # type: ignore[method-assign]
    import atexit

    atexit.register(lambda: prof.dump_stats(str(out)))


def write_folder(root: Path, size: int, entrypoint: str) -> Path:
    """`size` 1-CPU specs written to a staging folder, then `cp` into the watched one."""
    staging, folder = root / "staging", root / "tasks"
    staging.mkdir()
    folder.mkdir()
    for i in range(size):
        (staging / f"t{i:05d}.yaml").write_bytes(spec_text(entrypoint, cpu=1, priority=i % 10))
    subprocess.run(["cp", "-r", f"{staging}/.", str(folder)], check=True)
    return folder


def metrics(url: str) -> dict[str, float] | None:
    try:
        with urllib.request.urlopen(f"{url}/metrics", timeout=30) as response:
            text = response.read().decode()
    except OSError:
        return None  # busy with the cold start: ask again
    sums: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            sums[sample.name] = sums.get(sample.name, 0.0) + sample.value
    return sums


def _ready(url: str, folder: Path, size: int) -> dict[str, float] | None:
    """Every task accounted for and every first sidecar on disk (a busy queue's positions
    keep changing, so the write-behind is seldom empty: it is not waited for)."""
    m = metrics(url)
    if m is None:
        return None
    counted = m.get("rayqueue_pending_tasks", 0) + m.get("rayqueue_running_tasks", 0)
    counted += m.get("rayqueue_finished_tasks_total", 0)
    if counted < size:
        return None
    sidecars = sum(
        1 for e in os.scandir(folder) if e.name.endswith(".status.yaml") and e.name[0] != "_"
    )
    return m if sidecars >= size else None


def measure(
    ray_kind: str,
    size: int,
    cpus: int,
    job_seconds: float,
    window: float,
    profile: Path | None,
    trace: Path | None = None,
) -> dict[str, Any]:
    from reconciler.shell.raycluster.local_head import LocalRayHead

    head = LocalRayHead() if ray_kind == "head" else None
    with tempfile.TemporaryDirectory(prefix="rq-bench-busy-") as tmp:
        root = Path(tmp)
        entrypoint = "true" if head is None else f"sleep {job_seconds:g}"
        folder = write_folder(root, size, entrypoint)
        port = free_port()
        flags = ["serve", "--dir", str(folder), "--port", str(port)]
        flags += ["--queue-id", f"busy-{uuid.uuid4().hex[:6]}"]
        env = {k: v for k, v in os.environ.items() if k != "RAYQUEUE_API_TOKEN"}
        mark = root / "steady"
        if head is None:
            command = [sys.executable, "-m", "benchmarks.busy", "--child", "--", *flags]
            command.append("--address=http://fake.invalid:8265")
            env.update(RQ_BUSY_CPUS=str(cpus), RQ_BUSY_JOB_SECONDS=str(job_seconds))
            if profile is not None:
                env.update(RQ_BUSY_PROFILE=str(profile), RQ_BUSY_MARK=str(mark))
        else:
            address = head.start(num_cpus=cpus)
            command = [sys.executable, "-m", "reconciler.cli", *flags, "--address", address]
            if profile is not None or trace is not None:
                command[1:3] = ["-m", "benchmarks.busy", "--child-real", "--"]
                env.update(RQ_BUSY_PROFILE=str(profile or ""), RQ_BUSY_MARK=str(mark))
                env.update(RQ_BUSY_TRACE=str(trace or ""))
        log = (root / "serve.log").open("wb")
        started = time.monotonic()
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        url = f"http://127.0.0.1:{port}"
        try:
            patience = 300 + 0.1 * size
            wait(
                lambda: _ready(url, folder, size) if proc.poll() is None else {},
                patience,
                "cold start",
                every=0.5,
            )
            if proc.poll() is not None:
                raise RuntimeError(f"serve exited:\n{(root / 'serve.log').read_text()[-3000:]}")
            cold_wall, cold_cpu = time.monotonic() - started, procstat.cpu_seconds(proc.pid)
            time.sleep(5)  # past the first positions' write-behind
            mark.touch()
            before, cpu0, t0 = metrics(url), procstat.cpu_seconds(proc.pid), time.monotonic()
            load0 = os.getloadavg()
            time.sleep(window)
            after, cpu1, t1 = metrics(url), procstat.cpu_seconds(proc.pid), time.monotonic()
            memory = procstat.memory(proc.pid)
            load1 = os.getloadavg()
        finally:
            proc.terminate()
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
            log.close()
            if head is not None:
                head.stop()
    assert before is not None and after is not None, "serve's /metrics stopped answering"
    ended = after.get("rayqueue_finished_tasks_total", 0) - before.get(
        "rayqueue_finished_tasks_total", 0
    )
    passes = after.get("rayqueue_pass_duration_seconds_count", 0) - before.get(
        "rayqueue_pass_duration_seconds_count", 0
    )
    cpu, span = cpu1 - cpu0, t1 - t0
    if trace is not None and trace.exists():
        from benchmarks import busytrace

        print(busytrace.summary(trace, ended), flush=True)
    return {
        "ray": ray_kind,
        "specs": size,
        "cpus": cpus,
        "job_s": job_seconds,
        "cold_start_s": cold_wall,
        "cold_start_cpu_s": cold_cpu,
        "window_s": span,
        "cpu_pct_of_core": 100 * cpu / span,
        "jobs_ended_per_s": ended / span,
        "cpu_s_per_ended_job": cpu / ended if ended else float("nan"),
        "passes_per_s": passes / span,
        "rss_mb": memory.rss_mb,
        "peak_rss_mb": memory.peak_rss_mb,
        "load_1min": (load0[0] + load1[0]) / 2,
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return serve_fake(argv[2:] if argv[1:2] == ["--"] else argv[1:])
    if argv[:1] == ["--child-real"]:
        return serve_profiled(argv[2:] if argv[1:2] == ["--"] else argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ray", choices=("fake", "head"), nargs="+", default=["fake", "head"])
    parser.add_argument(
        "--sizes",
        "--size",
        type=int,
        nargs="+",
        default=[1_000, 10_000, 50_000],
        help="specs in the folder, one run each, with the fake Ray (default 1,000 10,000 50,000)",
    )
    parser.add_argument(
        "--head-sizes", type=int, nargs="+", default=[10_000], help="the same, on the real head"
    )
    parser.add_argument("--cpus", type=int, default=4)
    parser.add_argument("--fake-job-seconds", type=float, default=4.0)
    parser.add_argument("--head-job-seconds", type=float, default=3.0)
    parser.add_argument("--window", type=float, default=60.0, help="seconds measured per run")
    parser.add_argument("--runs", type=int, default=1, help="runs per Ray; the median is kept")
    parser.add_argument("--profile", action="store_true", help="cProfile serve's passes")
    parser.add_argument(
        "--trace", action="store_true", help="why each pass planned (head only; per ended job)"
    )
    parser.add_argument("--out", type=Path, default=None, help="JSON result file")
    args = parser.parse_args(argv)
    rows = []
    cases = [(k, n) for k in args.ray for n in (args.sizes if k == "fake" else args.head_sizes)]
    for kind, size in cases:
        seconds = args.fake_job_seconds if kind == "fake" else args.head_job_seconds
        profile = None
        if args.profile:
            profile = Path(tempfile.gettempdir()) / f"rq-busy-{os.getpid()}-{kind}-{size}.prof"
        trace = None
        if args.trace and kind == "head":
            trace = Path(tempfile.gettempdir()) / f"rq-busy-{os.getpid()}-{kind}-{size}.trace"
        runs = [
            measure(kind, size, args.cpus, seconds, args.window, profile, trace)
            for _ in range(args.runs)
        ]
        for run in runs:
            print(
                {k: round(v, 3) if isinstance(v, float) else v for k, v in run.items()}, flush=True
            )
        runs.sort(key=lambda r: r["cpu_pct_of_core"])
        row = dict(runs[len(runs) // 2])
        row["cpu_pct_runs"] = [round(r["cpu_pct_of_core"], 2) for r in runs]
        rows.append(row)
        if profile is not None and profile.exists():
            import pstats

            pstats.Stats(str(profile)).sort_stats("cumulative").print_stats(40)
            pstats.Stats(str(profile)).sort_stats("tottime").print_stats(25)
    header = [h for h in rows[0] if h != "cpu_pct_runs"]
    print(
        table("busy steady state, rayqueue serve", header, [[r[h] for h in header] for r in rows])
    )
    print(f"goal: <= {GOAL_PCT:g} % of a core; median of {args.runs} run(s) per Ray and size")
    print(f"results: {save('busy', {'rows': rows}, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
