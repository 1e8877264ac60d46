"""examples/sweep/, copied into a team folder and run by the loop over the fake Ray: six
elements, never more than two at once, then the report once all have succeeded."""

from __future__ import annotations

import shutil
from pathlib import Path

from specs.cluster import META_TASK, SUCCEEDED, Capacity
from tests.support.world import World

SWEEP = Path(__file__).resolve().parents[2] / "examples" / "sweep"


def test_the_sweep_runs_two_at_a_time_then_the_report(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    shutil.copytree(SWEEP, tasks / "team-b")
    world = World.build(tasks, Capacity(8, 0, 64 * 2**30), queue_id="q")
    done: set[str] = set()
    most = 0
    for _ in range(20):
        world.step()
        live = {j.metadata[META_TASK]: j.submission_id for j in world.our_jobs() if not j.terminal}
        most = max(most, sum(1 for n in live if n.startswith("team-b/sweep[")))
        if "team-b/report" in live:  # only once every element has succeeded
            assert {f"team-b/sweep[{i}]" for i in range(6)} <= done
        for name, sid in live.items():
            world.ray.set_status(sid, SUCCEEDED)
            done.add(name)
        if "team-b/report" in done:
            break
    assert most == 2
    assert done == {f"team-b/sweep[{i}]" for i in range(6)} | {"team-b/report"}
