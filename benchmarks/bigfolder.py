"""A folder of N waiting task specs, made fast and reused between runs.

The files are written from a text template with plain writes, as a user's script or `cp`
would make them (not through the models or rayqueue's writer), once per size into a cache
folder; each run gets its own copy by `cp -a`, which keeps the files' times, so every spec
reads as written before serve started. Plain writes and a copy, because a large folder made
through the models would take longer to set up than the benchmark takes to run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

CACHE = Path(os.environ.get("RQ_BENCH_CACHE", tempfile.gettempdir())) / "rq-bench-folders"
# Each spec has lines of its own (its entrypoint, its seed, its timeout), as a sweep a user
# generated would: caches keyed by line or file must not see ten files repeated.
_TEMPLATE = """apiVersion: rayqueue/v1
kind: Task
spec:
  entrypoint: python train.py --config configs/run-{index}.yaml --seed {index}
  priority: {priority}
  timeoutSeconds: {timeout}
  resources:
    cpu: 1
    memory: 512Mi
  runtimeEnv:
    env_vars:
      RUN_ID: run-{index}
"""
_VERSION = 2  # bump when the template changes: the cached folders are made again


def template(priority: int, index: int = 0) -> bytes:
    return _TEMPLATE.format(priority=priority, index=index, timeout=3600 + index % 997).encode()


def prepared(size: int, levels: int = 10) -> Path:
    """The cached folder of `size` specs (t00000.yaml ...; spec i has priority i % levels),
    made once; do not write into it."""
    name = f"v{_VERSION}-{size}" if levels == 10 else f"v{_VERSION}-{size}-{levels}"
    folder = CACHE / name
    if folder.is_dir():
        return folder
    CACHE.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".building-{size}-", dir=CACHE))
    old = 0  # a minute back: written well before serve starts, nothing to settle
    for i in range(size):
        path = building / f"t{i:05d}.yaml"
        with open(path, "wb") as out:
            out.write(template(i % levels, i))
        if not old:
            old = os.stat(path).st_mtime_ns - 60 * 10**9
        os.utime(path, ns=(old, old))
    os.replace(building, folder)
    return folder


def copy_of(size: int, dest: Path, levels: int = 10) -> Path:
    """A private copy of the prepared folder at `dest` (which must not exist)."""
    subprocess.run(["cp", "-a", str(prepared(size, levels)), str(dest)], check=True)
    return dest


def remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
