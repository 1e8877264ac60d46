"""An N-element task array on a real Ray head through `serve`, against N task files.

A private Ray head (LocalRayHead: free loopback ports, its own temp dir, stopped by process
group) with 4 CPUs, and `python -m reconciler.cli.main serve` as a child process (serve's own
code path) on a fresh folder and queue id per case:

- array: one file, `array: {count: N, maxParallel: 4}`, each element asking 0.5 CPU, so the
  cluster would take 8 at once and only the cap holds them to 4;
- files: N files of 1 CPU each, so the cluster's 4 CPUs hold them to 4 at once.

Both run the same trivial entrypoint. Checked from Ray's own job list: each element (or file)
ran exactly once and succeeded, and the most jobs live at once (from Ray's start and end
times: a job's interval covers PENDING and RUNNING, what maxParallel caps). Reported: wall
seconds from the drop until Ray reports all ended, elements per second.

python -m benchmarks.arrays_head --size 1000
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from benchmarks.common import drop, save, table
from benchmarks.served import free_port, wait
from reconciler.shell.raycluster.adapter import RayJobsAdapter
from reconciler.shell.raycluster.local_head import LocalRayHead
from specs.cluster import META_QUEUE, META_TASK, SUCCEEDED, RayJob

REPO = Path(__file__).resolve().parent.parent
CPUS = 4
MAX_PARALLEL = 4


def _spec(entrypoint: str, cpu: float, array: dict[str, int] | None) -> bytes:
    spec: dict[str, Any] = {"entrypoint": entrypoint, "resources": {"cpu": cpu}}
    if array is not None:
        spec["array"] = array
    return yaml.safe_dump({"apiVersion": "rayqueue/v1", "kind": "Task", "spec": spec}).encode()


def most_at_once(jobs: list[RayJob]) -> int:
    """The most jobs whose [start_time, end_time] overlap; an end at the very instant of a
    start counts first (the next job was submitted after the last one was seen ending)."""
    events = []
    for job in jobs:
        assert job.start_time is not None and job.end_time is not None, job
        events += [(job.start_time, 1), (job.end_time, -1)]
    live = peak = 0
    for _, delta in sorted(events):
        live += delta
        peak = max(peak, live)
    return peak


def _serve(address: str, folder: Path, queue: str, log: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "reconciler.cli.main", "serve", "--dir", str(folder)]
    command += ["--address", address, "--queue-id", queue, "--port", str(free_port())]
    env = {k: v for k, v in os.environ.items() if k != "RAYQUEUE_API_TOKEN"}
    with log.open("wb") as out:
        return subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO,
            start_new_session=True,  # its own process group, stopped as one
        )  # fmt: skip


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(10)


def run_case(
    ray: RayJobsAdapter, address: str, root: Path, kind: str, size: int, entrypoint: str
) -> dict[str, Any]:
    folder = root / kind
    folder.mkdir()
    queue = f"arr-{kind}-{uuid.uuid4().hex[:6]}"
    proc = _serve(address, folder, queue, root / f"{kind}.serve.log")
    try:
        time.sleep(3)  # serve's first pass over an empty folder
        if proc.poll() is not None:
            raise RuntimeError((root / f"{kind}.serve.log").read_text()[-3000:])
        started = time.monotonic()
        if kind == "array":
            array = {"count": size, "maxParallel": MAX_PARALLEL}
            drop(folder, "sweep", _spec(entrypoint, CPUS / MAX_PARALLEL / 2, array))
        else:
            for i in range(size):
                drop(folder, f"t{i:05d}", _spec(entrypoint, 1, None))

        def done() -> list[RayJob] | None:
            ours = [j for j in ray.list_jobs() if j.metadata.get(META_QUEUE) == queue]
            return ours if len(ours) >= size and all(j.terminal for j in ours) else None

        jobs = wait(done, 3600, f"{size} jobs of {kind} to end", every=0.5)
        wall = time.monotonic() - started
    finally:
        _stop(proc)
    runs = Counter(j.metadata.get(META_TASK) for j in jobs)
    names = {f"sweep[{i}]" for i in range(size)} if kind == "array" else None
    return {
        "case": kind,
        "size": size,
        "jobs_in_ray": len(jobs),
        "each_ran_once": len(runs) == size
        and set(runs.values()) == {1}
        and (names is None or set(runs) == names),
        "all_succeeded": all(j.status == SUCCEEDED for j in jobs),
        "most_at_once": most_at_once(jobs),
        "wall_s": round(wall, 1),
        "per_s": round(size / wall, 2),
        "ray_span_s": round(
            (max(j.end_time or 0 for j in jobs) - min(j.start_time or 0 for j in jobs)) / 1, 1
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--entrypoint", default="true")
    parser.add_argument(
        "--cases", nargs="+", choices=("array", "files"), default=["array", "files"]
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    head = LocalRayHead()
    root = Path(tempfile.mkdtemp(prefix="rq-arrays-head-"))
    rows = []
    try:
        address = head.start(num_cpus=CPUS)
        ray = RayJobsAdapter(address, timeout_seconds=30)
        for kind in args.cases:
            rows.append(run_case(ray, address, root, kind, args.size, args.entrypoint))
            print(rows[-1], flush=True)
    finally:
        head.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(
        table(
            "array vs files on a real head, through serve",
            list(rows[0]),
            [list(r.values()) for r in rows],
        )
    )
    print(
        f"results: {save('arrays_head', {'rows': rows, 'entrypoint': args.entrypoint}, args.out)}"
    )
    ok = all(r["each_ran_once"] and r["all_succeeded"] for r in rows)
    ok = ok and all(r["most_at_once"] <= MAX_PARALLEL for r in rows if r["case"] == "array")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
