"""Bytes a task holds, by where they were allocated (tracemalloc): the parsed specs alone, and
the loop's whole state after a start (every sidecar written, five more passes).

    python -m benchmarks.specmemory --size 5000 [--top 12]

The figures are bytes a task, traced (Python's allocations only, not the allocator's slack):
the RSS goal is met by cutting the largest lines here.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import tempfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from benchmarks import bigfolder, common


def _traced(build: Callable[[], object], size: int, top: int) -> list[str]:
    gc.collect()
    tracemalloc.start(1)
    before = tracemalloc.take_snapshot()
    kept = build()
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    stats = after.compare_to(before, "lineno")
    lines = [f"total {sum(s.size_diff for s in stats) / size:.0f} B a task"]
    for stat in stats[:top]:
        frame = stat.traceback[0]
        where = f"{frame.filename.rsplit('/', 2)[-2:][-1]}:{frame.lineno}"
        per = stat.size_diff / size
        lines.append(f"{per:7.0f} B {stat.count_diff / size:5.2f} blocks  {where}")
    del kept
    return lines


def parsed(size: int, top: int) -> list[str]:
    from specs.yamlio.parse import parse_task

    texts = [bigfolder.template(i % 10, i) for i in range(size)]

    def build() -> object:
        tasks = [
            parse_task(text, file=f"t{i:05d}.yaml", expected_name=f"t{i:05d}")
            for i, text in enumerate(texts)
        ]
        return tasks, [task.spec_hash() for task in tasks]

    return _traced(build, size, top)


def loop_state(size: int, top: int) -> list[str]:
    from reconciler.shell.raycluster.fake import FakeRay
    from specs.cluster import Capacity

    root = Path(tempfile.mkdtemp(prefix="rq-specmemory-"))
    try:
        folder = bigfolder.copy_of(size, root / "tasks")

        def build() -> object:
            ray = FakeRay(Capacity(8, 0, 2**40))
            loop = common.serve_loop(common.serve_settings(folder, "--queue-id", "bench"), ray)
            loop.run_pass()
            while True:  # the backlog of sidecars, as serve drains it
                loop.run_pass()
                if not loop.store.deferred_statuses:
                    break
            for _ in range(5):
                loop.run_pass()
            return loop

        return _traced(build, size, top)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=5000)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args(argv)
    print("parsed specs (parse_task and spec_hash):")
    print("\n".join(parsed(args.size, args.top)))
    print("the loop after a start:")
    print("\n".join(loop_state(args.size, args.top)))


if __name__ == "__main__":
    main()
