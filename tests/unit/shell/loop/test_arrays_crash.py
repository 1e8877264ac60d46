"""Task arrays' crash safety with the fake Ray: the loop dies at every crash point of a pass while
an array runs (and is then deleted), a new loop over the same folder and Ray takes over, and
still every element runs exactly once and every run is stopped when the file goes."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from reconciler.shell.loop.faults import POINTS
from specs.cluster import META_RUN, META_TASK, RUNNING, STOPPED, SUCCEEDED, Capacity
from tests.support.world import World


class _Killed(BaseException):
    """Stands for SIGKILL: nothing in the loop catches it."""


def _spec() -> str:
    doc = {
        "apiVersion": "rayqueue/v1",
        "kind": "Task",
        "spec": {
            "entrypoint": "python train.py",
            "resources": {"cpu": 1},
            "array": {"count": 6, "maxParallel": 2},
        },
    }
    return yaml.safe_dump(doc)


def _world(tasks: Path, ray: object | None, point: str | None, nth: int) -> World:
    world = World.build(tasks, Capacity(8, 0, 64 * 2**30), ray=ray, queue_id="q")  # type: ignore[arg-type]
    if point is not None:
        seen = Counter[str]()

        def crash_point(name: str) -> None:
            if name == point:
                seen[name] += 1
                if seen[name] == nth:
                    raise _Killed(name)

        world.reconciler.faults.crash_point = crash_point  # type: ignore[method-assign]
    return world


@pytest.mark.parametrize("nth", [1, 3])
@pytest.mark.parametrize("point", sorted(POINTS - {"before_preempt_stop", "after_preempt_stop"}))
def test_every_element_runs_once_through_a_crash(tmp_path: Path, point: str, nth: int) -> None:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "sweep.yaml").write_text(_spec())
    world = _world(tasks, None, point, nth)
    ray = world.ray
    crashed = False
    for step in range(40):
        try:
            world.step()
        except _Killed:
            crashed = True
            world = _world(tasks, ray, None, 0)  # a new process: store and loop from disk
            continue
        live = [j for j in world.our_jobs() if not j.terminal]
        assert len(live) <= 2  # maxParallel, also across the crash
        for job in live:
            ray.set_status(job.submission_id, SUCCEEDED if job.status == RUNNING else RUNNING)
        if step == 12:
            (tasks / "sweep.yaml").unlink()  # then every element's status must go
    runs = Counter((j.metadata[META_TASK], j.metadata[META_RUN]) for j in world.our_jobs())
    assert set(runs) == {(f"sweep[{i}]", "1") for i in range(6)}
    assert set(runs.values()) == {1}  # no element submitted twice
    assert len(ray.submitted) == 6
    assert not (tasks / "sweep.array.status.yaml").exists()
    assert crashed or point in {"before_stop", "after_stop"}


@pytest.mark.parametrize("nth", [1, 2])
@pytest.mark.parametrize("point", ["before_stop", "after_stop", "before_delete_status"])
def test_deleting_a_running_array_stops_it_through_a_crash(
    tmp_path: Path, point: str, nth: int
) -> None:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "sweep.yaml").write_text(_spec())
    world = _world(tasks, None, point, nth)
    ray = world.ray
    crashed = False
    for step in range(20):
        if step == 3:
            (tasks / "sweep.yaml").unlink()
        try:
            world.step()
        except _Killed:
            crashed = True
            world = _world(tasks, ray, None, 0)
            continue
        for job in world.our_jobs():
            if not job.terminal and job.submission_id not in ray.stop_requested:
                ray.set_status(job.submission_id, RUNNING)
        for sid in list(ray.stop_requested):
            ray.set_status(sid, STOPPED)
    assert crashed
    jobs = world.our_jobs()
    assert len(jobs) == 2 and all(j.terminal for j in jobs)  # the two running were stopped
    assert len({(j.metadata[META_TASK], j.metadata[META_RUN]) for j in jobs}) == len(jobs)
    assert not (tasks / "sweep.array.status.yaml").exists()
