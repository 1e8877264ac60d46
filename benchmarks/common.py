"""Shared bits of the benchmarks: spec files, tables, JSON results, percentiles."""

from __future__ import annotations

import json
import math
import os
import platform
import resource
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from reconciler.app import assembly
from reconciler.cli.flags import settings_from_args
from reconciler.cli.main import build_parser
from reconciler.shell.loop.runner import Reconciler
from specs.cluster import RayAdapter
from specs.folder.atomic import write_atomic
from specs.settings.process import Settings

RESULTS = Path(__file__).parent / "results"


def spec_text(entrypoint: str = "true", cpu: float = 1, priority: int = 0) -> bytes:
    doc = {
        "apiVersion": "rayqueue/v1",
        "kind": "Task",
        "spec": {"entrypoint": entrypoint, "priority": priority, "resources": {"cpu": cpu}},
    }
    return yaml.safe_dump(doc).encode()


def serve_settings(folder: Path, *flags: str) -> Settings:
    """The Settings `RAYQUEUE_API=false rayqueue serve --dir FOLDER FLAGS` runs with (and no
    other RAYQUEUE_ variable): the real parser over the one declaration, so every default a
    user gets is the benchmark's default."""
    args = build_parser().parse_args(["serve", "--dir", str(folder), *flags])
    return settings_from_args(args, {"RAYQUEUE_API": "false"})


def serve_loop(
    settings: Settings, ray: RayAdapter, clock: Callable[[], float] = time.time
) -> Reconciler:
    """The loop `serve` builds for `settings` (tests/benchmarks check it is the same one)."""
    return assembly.build_reconciler(settings, ray, clock=clock)


def write_before_start(path: Path, data: bytes) -> None:
    """A spec that was in the folder before serve started: written in place, its time set a
    minute back. (Files younger than the settle time and written in place rightly hold serve's
    first pass until they settle: they may be mid-write.)"""
    path.write_bytes(data)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - 60 * 10**9))


def drop(folder: Path, name: str, data: bytes) -> None:
    """How a careful user or git-sync lands a file: whole, by rename."""
    write_atomic(folder / f"{name}.yaml", data)


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    index = min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[index]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def machine() -> dict[str, Any]:
    import os

    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(c) for c in header]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = [title, "  ".join(h.ljust(w) for h, w in zip(cells[0], widths, strict=True))]
    for row in cells[1:]:
        lines.append("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
    return "\n".join(lines)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


def save(name: str, payload: dict[str, Any], out: Path | None = None) -> Path:
    path = out or RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"machine": machine(), **payload}, indent=2) + "\n")
    return path
