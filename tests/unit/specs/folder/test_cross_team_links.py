"""A symlink committed into team-a/ that points into team-b/ must not make B's spec run as A's
task, both sharing one status file. A spec reached through a link from one
team folder (top-level folder) into another is Invalid, never read, and no sidecar is written
through such a link; a link within one team folder stays fine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import Capacity
from specs.folder.store import TaskStore
from tests.support.world import World

SPEC = yaml.safe_dump(
    {
        "apiVersion": "rayqueue/v1",
        "kind": "Task",
        "spec": {"entrypoint": "echo b", "resources": {"cpu": 1}},
    }
)


@pytest.fixture
def tasks(tmp_path: Path) -> Path:
    root = tmp_path / "tasks"
    for team in ("team-a", "team-b"):
        (root / team).mkdir(parents=True)
    (root / "team-b" / "train.yaml").write_text(SPEC)
    return root


def test_a_file_link_into_another_team_is_invalid(tasks: Path) -> None:
    (tasks / "team-a" / "evil.yaml").symlink_to("../team-b/train.yaml")
    entries = TaskStore(tasks).scan()
    assert entries["team-b/train"].task is not None
    evil = entries["team-a/evil"]
    assert evil.task is None and evil.error is not None
    assert str(evil.error) == (
        "team-a/evil.yaml: reached through a symlink from team-a/ into team-b/ "
        "(team-a/evil.yaml -> team-b/train.yaml); a spec is never followed into another "
        "team's folder: copy it instead"
    )


def test_a_folder_link_into_another_team_is_invalid(tasks: Path) -> None:
    (tasks / "team-a" / "lib").symlink_to("../team-b")
    entries = TaskStore(tasks).scan()
    assert entries["team-a/lib/train"].task is None
    assert "from team-a/ into team-b/" in str(entries["team-a/lib/train"].error)
    assert entries["team-b/train"].task is not None


def test_a_link_from_the_top_into_a_team_is_invalid(tasks: Path) -> None:
    (tasks / "shortcut.yaml").symlink_to("team-b/train.yaml")
    (tasks / "everything").symlink_to("team-b")
    entries = TaskStore(tasks).scan()
    assert "from the top folder into team-b/" in str(entries["shortcut"].error)
    assert "from everything/ into team-b/" in str(entries["everything/train"].error)


def test_a_link_within_one_team_stays_fine(tasks: Path) -> None:
    (tasks / "team-b" / "alias.yaml").symlink_to("train.yaml")
    (tasks / "team-b" / "sub").mkdir()
    (tasks / "team-b" / "sub" / "up").symlink_to("..")  # a loop, skipped
    (tasks / "team-b" / "nested").symlink_to("sub")
    (tasks / "team-b" / "sub" / "deep.yaml").write_text(SPEC)
    entries = TaskStore(tasks).scan()
    assert entries["team-b/alias"].task is not None
    assert entries["team-b/nested/deep"].task is not None
    assert all(e.error is None for e in entries.values()), entries


def test_the_fast_paths_give_what_a_full_walk_gives(tasks: Path) -> None:
    store = TaskStore(tasks)
    store.scan()
    (tasks / "team-a" / "evil.yaml").symlink_to("../team-b/train.yaml")
    changed = [os.path.join(os.path.realpath(tasks), "team-a", "evil.yaml")]
    by_events = store.scan(changed)
    assert by_events["team-a/evil"].task is None
    assert not store.still()  # a tree with a link never skips a pass
    again = store.scan([])
    assert {n: (e.task is None, str(e.error)) for n, e in again.items()} == {
        n: (e.task is None, str(e.error)) for n, e in TaskStore(tasks).scan().items()
    }


def test_the_loop_runs_b_once_and_never_writes_through_the_link(tasks: Path) -> None:
    (tasks / "team-a" / "evil.yaml").symlink_to("../team-b/train.yaml")
    (tasks / "team-a" / "lib").symlink_to("../team-b")
    world = World.build(tasks, Capacity(8, 0, 2**34), ray=FakeRay(Capacity(8, 0, 2**34)))
    world.step(3)
    assert [r.entrypoint for r in world.ray.submitted] == ["echo b"]
    assert world.status("team-a/evil")["phase"] == "Invalid"
    sidecar = yaml.safe_load((tasks / "team-b" / "train.status.yaml").read_text())
    assert sidecar["metadata"]["name"] == "team-b/train"
    assert sidecar["status"]["phase"] in ("Starting", "Running")
    # team-a/lib/train's status would land in team-b/ through the link: it is never written.
    statuses = world.reconciler.store.read_statuses()
    assert "team-a/lib/train" not in statuses
    assert statuses["team-b/train"].status.phase.value == sidecar["status"]["phase"]
