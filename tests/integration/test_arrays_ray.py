"""Task arrays on a real Ray head: a small task array with maxParallel; Ray's own start and end
times never show more than maxParallel of its elements at once, and each runs exactly once."""

from __future__ import annotations

import json

import pytest

from specs.cluster import META_RUN, META_TASK
from specs.task import arraystatus

pytestmark = pytest.mark.ray

SIZE, CAP = 6, 2


def test_a_small_array_never_runs_more_than_max_parallel(make_queue) -> None:  # type: ignore[no-untyped-def]
    q = make_queue()
    q.write(
        "sweep",
        {
            "entrypoint": "python -c 'import os, time; time.sleep(1); print(os.environ[\"X\"])'",
            "resources": {"cpu": 0.5},
            "array": {"matrix": {"X": list(range(SIZE))}, "maxParallel": CAP},
        },
    )
    q.start()
    sidecar = q.dir / f"sweep{arraystatus.SUFFIX}"

    def counts() -> dict[str, int]:
        try:
            return dict(json.loads(sidecar.read_bytes())["counts"])
        except (OSError, ValueError):
            return {}

    q.wait_for(lambda: counts() == {"Succeeded": SIZE}, "every element succeeded", timeout=180)
    jobs = [j for j in q.jobs() if str(j.metadata.get(META_TASK, "")).startswith("sweep[")]
    assert sorted((j.metadata[META_TASK], j.metadata[META_RUN]) for j in jobs) == sorted(
        (f"sweep[{i}]", "1") for i in range(SIZE)
    )
    assert all(j.status == "SUCCEEDED" for j in jobs)
    # Ray's clock: +1 at each start, -1 at each end (ends first when equal).
    edges = sorted(
        [(j.end_time, -1) for j in jobs if j.end_time is not None]
        + [(j.start_time, 1) for j in jobs if j.start_time is not None]
    )
    live = most = 0
    for _, step in edges:
        live += step
        most = max(most, live)
    print(f"most elements at once in Ray: {most} (maxParallel {CAP})")  # pytest -s
    assert most <= CAP
