"""Every benchmark, one after the other, then the plot and the summary table.

python -m benchmarks             # the full set at the documented sizes (an hour or more)
python -m benchmarks --quick     # small sizes, a few minutes: checks the set runs
python -m benchmarks --only scale latency

Each benchmark runs in a process of its own, so that one's memory and threads do not count
against the next (scale's peak RSS is the process's own). Results go to benchmarks/results/.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import RESULTS
from benchmarks.plot import DOCS

REPO = Path(__file__).resolve().parent.parent

# name -> (full arguments, quick arguments); the full ones are the benchmarks' defaults.
RUNS: dict[str, tuple[list[str], list[str]]] = {
    "throughput": ([], ["--jobs", "4", "--rounds", "1"]),
    "latency": ([], ["--drops", "10", "--real-drops", "5"]),
    "scale": ([], ["--sizes", "100", "1000", "--serve-window", "10"]),
    "history": ([], ["--history", "0", "1000"]),
    "gitrev": ([], ["--size", "100"]),
    "parsing": ([], ["--count", "200", "--rounds", "2"]),
    "churn": ([], ["--sizes", "1000"]),
    "arrays": ([], ["--size", "1000"]),
    "arrays_head": ([], ["--size", "20"]),
    "busy": ([], ["--ray", "fake", "--sizes", "500", "--window", "10"]),
    "census": ([], ["--jobs", "100", "--polls", "2"]),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a check, not figures")
    parser.add_argument("--only", nargs="+", choices=sorted(RUNS), default=list(RUNS))
    parser.add_argument("--results", type=Path, default=RESULTS, help="folder of the JSON results")
    parser.add_argument("--plot", type=Path, default=DOCS / "scale.svg", help="the SVG to write")
    args = parser.parse_args(argv)
    failed = []
    for name in args.only:
        full, quick = RUNS[name]
        command = [sys.executable, "-m", f"benchmarks.{name}", *(quick if args.quick else full)]
        command += ["--out", str(args.results / f"{name}.json")]
        print(f"\n$ {' '.join(command[1:])}", flush=True)
        started = time.monotonic()
        if subprocess.run(command, cwd=REPO, check=False).returncode != 0:
            failed.append(name)
        print(f"({name}: {time.monotonic() - started:.0f} s)", flush=True)
    if "scale" in args.only and "scale" not in failed:
        note = "quick run (python -m benchmarks --quick)" if args.quick else "python -m benchmarks"
        plot = [sys.executable, "-m", "benchmarks.plot", "--note", note, "--out", str(args.plot)]
        plot += ["--results", str(args.results / "scale.json")]
        plot += ["--busy", str(args.results / "busy.json")]
        if subprocess.run(plot, cwd=REPO, check=False).returncode != 0:
            failed.append("plot")
    print()
    summary = [sys.executable, "-m", "benchmarks.summary", "--results", str(args.results)]
    subprocess.run(summary, cwd=REPO, check=False)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
