"""The cost of a pass with one N-element task array waiting, against N task files.

Each case runs in a process of its own (peak RSS is the process's): the loop over the fake
Ray with room for one job, so all but one wait. Reported: CPU seconds of the first pass (cold:
parse, plan, write every status), of a pass after a full walk of the folder with nothing
changed, peak RSS, and the bytes of status files on disk.

python -m benchmarks.arrays --size 10000
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks.common import save
from specs.cluster import Capacity


def _spec(array: dict[str, object] | None) -> str:
    spec: dict[str, object] = {"entrypoint": "python -c 'print(1)'", "resources": {"cpu": 1}}
    if array is not None:
        spec["array"] = array
    return yaml.safe_dump({"apiVersion": "rayqueue/v1", "kind": "Task", "spec": spec})


def _case(kind: str, size: int) -> dict[str, float]:
    from tests.support.world import World

    with tempfile.TemporaryDirectory() as tmp:
        tasks = Path(tmp) / "tasks"
        tasks.mkdir()
        if kind == "array":
            (tasks / "sweep.yaml").write_text(_spec({"count": size}))
        else:
            text = _spec(None)
            for i in range(size):
                (tasks / f"t{i:05d}.yaml").write_text(text)
        world = World.build(tasks, Capacity(1, 0, 2**30), queue_id="bench")
        started = time.process_time()
        world.step()
        cold = time.process_time() - started
        world.step()  # Ray now says PENDING: settle
        world.reconciler.force_full_pass()
        started = time.process_time()
        world.step()
        walk = time.process_time() - started
        statuses = sum(p.stat().st_size for p in tasks.rglob("*.status.yaml"))
        rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return {
            "cold_cpu_s": round(cold, 3),
            "walk_pass_cpu_s": round(walk, 3),
            "peak_rss_mib": round(rss_kib / 1024, 1),
            "status_bytes": statuses,
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--case", choices=["array", "files"], help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None, help="the JSON results file")
    args = parser.parse_args(argv)
    if args.case is not None:
        print(json.dumps(_case(args.case, args.size)))
        return 0
    results = {}
    for case in ("array", "files"):
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.arrays", "--size", str(args.size), "--case", case],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        results[case] = json.loads(out.strip().splitlines()[-1])
    print(json.dumps({"size": args.size, **results}, indent=2))
    if args.out is not None:
        print(f"results: {save('arrays', {'size': args.size, **results}, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
