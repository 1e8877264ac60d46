"""GET /queues with a census: each queue's `observed` block (what its live runs declare, hold
in Ray and use) beside the fields it always had, unchanged; per queue only, so a team token
that reads only its own tasks sees the same totals and no other team's task."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from specs.cluster import RUNNING, Capacity, Usage
from specs.tenancy.access import hash_token
from tests.api.conftest import task_yaml

GIB = 2**30
CONFIG = """\
apiVersion: rayqueue/v1
kind: QueueConfig
spec:
  queues:
    - name: team-a
      nominalQuota: {cpu: 4}
    - name: team-b
      nominalQuota: {cpu: 2}
"""
OWN_READER = "tok-b-viewer-0123456789abcdef012345"


def tokens(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.yaml"
    entry = {"role": "read", "read": "own", "folders": ["team-b"]}
    entries = [{"name": "b-viewer", "sha256": hash_token(OWN_READER), **entry}]
    path.write_text(yaml.safe_dump({"tokens": entries}))
    path.chmod(0o600)
    return path


def fill(world: Any) -> None:
    (world.tasks / "_queues.yaml").write_text(CONFIG)
    for name, cpu in (("team-a/train", 3), ("team-b/eval", 1)):
        path = world.tasks / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(task_yaml(cpu=cpu))
    world.step()


def test_queues_show_what_their_runs_declare_hold_and_use(make_world, tmp_path: Path) -> None:
    plain, plain_api = make_world(Capacity(8, 0, 32 * GIB))
    fill(plain)
    before = {q["name"]: q for q in plain_api.get("/queues").json()["items"]}
    plain_api.close()

    # The same folder and Ray, with a census: a's run holds 1 of its 3 CPUs.
    for path in plain.tasks.rglob("*.status.yaml"):
        path.unlink()
    world, api = make_world(Capacity(8, 0, 32 * GIB), census=True, team_tokens=tokens(tmp_path))
    fill(world)
    by_task = {job.metadata["rayqueue.task"]: job.submission_id for job in world.our_jobs()}
    for sid in by_task.values():
        world.ray.set_status(sid, RUNNING)
    world.ray.hold(by_task["team-a/train"], actors=Capacity(1), usage=Usage(25, 3 * 2**29))
    world.ray.hold(by_task["team-b/eval"], tasks=Capacity(1))
    world.step()
    world.reconciler.census.take()
    world.step()

    headers = {"Authorization": f"Bearer {OWN_READER}"}
    body = api.get("/queues", headers=headers).json()
    items = {q["name"]: q for q in body["items"]}
    team_a = items["team-a"]["observed"]
    assert team_a["runs"] == 1 and team_a["complete"] is True
    assert team_a["declared"] == {"cpu": 3.0, "gpu": 0.0, "memory": "0"}
    assert team_a["held"]["cpu"] == 1.0
    assert team_a["used"] == {"cpu": 0.25, "memory": "1536Mi", "gpuMemory": "0"}
    assert items["team-b"]["observed"]["held"]["cpu"] == 1.0
    assert items["default"]["observed"]["runs"] == 0
    assert "observedAt" in body
    # Every field a queue had before is there, word for word.
    for name, entry in before.items():
        assert {k: v for k, v in items[name].items() if k != "observed"} == entry
    # Queue totals only: no task's name is in them, for a token that reads only its own.
    assert "team-a/train" not in json.dumps(body)
    assert api.get("/queues/team-a", headers=headers).json()["observed"] == team_a
