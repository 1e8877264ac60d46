"""CPU per spec and per sidecar parsed, with the fast path (specs/yamlio/fastyaml.py) and without.

python -m benchmarks.parsing                 # 2,000 parses a round, 10 rounds, ABBA

A cold start parses every spec and sidecar of the folder once, so this is its main cost. The
slow path alone is the baseline the fast path must beat: each round times both, in the
order A B B A, by this thread's CPU time (a loaded machine stretches wall time, less so CPU).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from unittest import mock

from benchmarks.common import save, spec_text, table
from reconciler.core.task import lifecycle
from specs.task.models import Metadata
from specs.task.status import TaskStatus
from specs.yamlio import fastyaml
from specs.yamlio.parse import dump_status, parse_status, parse_task


def _cpu_us(parse: Callable[[], object], count: int) -> float:
    started = time.thread_time()
    for _ in range(count):
        parse()
    return (time.thread_time() - started) / count * 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000, help="parses per side and round")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    spec = spec_text("python train.py --epochs 3", cpu=2, priority=5)
    body = lifecycle.first_queued("0123abcd", "f" * 64, datetime(2026, 1, 1, tzinfo=UTC))
    sidecar = dump_status(TaskStatus(metadata=Metadata(name="t"), status=body)).encode()
    kinds: dict[str, Callable[[], object]] = {
        "spec": lambda: parse_task(spec, file="t.yaml", expected_name="t"),
        "sidecar": lambda: parse_status(sidecar, file="t.status.yaml"),
    }
    rows = []
    for kind, parse in kinds.items():
        fast: list[float] = []
        slow: list[float] = []
        for r in range(args.rounds):
            for side in ("fast", "slow") if r % 2 == 0 else ("slow", "fast"):
                if side == "fast":
                    fast.append(_cpu_us(parse, args.count))
                else:
                    with mock.patch.object(fastyaml, "load", lambda text: None):
                        slow.append(_cpu_us(parse, args.count))
        rows.append(
            {
                "file": kind,
                "fast_us_median": statistics.median(fast),
                "slow_us_median": statistics.median(slow),
                "fast_over_slow": statistics.median(fast) / statistics.median(slow),
                "fast_us_min": min(fast),
                "slow_us_min": min(slow),
            }
        )
    print(table("CPU per parse (us)", list(rows[0]), [list(r.values()) for r in rows]))
    print(f"results: {save('parsing', {'rows': rows}, args.out)}")


if __name__ == "__main__":
    main()
