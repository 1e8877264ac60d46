"""A pass that reads nothing new in the tasks folder is handed the very inputs map the last
pass got, not one more copy of 10,000 entries (reconciler/shell/loop/inputs.py
`SpecInputs.handed`); one that reads a change gets a new map, and the map handed before is
left as it was (the planner's memo and the read-back keep what they were handed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.shell.loop.runner import Reconciler
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import Capacity
from specs.folder.store import TaskStore
from specs.settings.process import Settings
from tests.support.clock import FakeClock
from tests.support.specs import write_task


@pytest.mark.parametrize("git_revision", [False, True])
def test_the_same_inputs_are_handed_until_one_changes(tmp_path: Path, git_revision: bool) -> None:
    clock = FakeClock()
    settings = Settings(
        tasks_dir=tmp_path,
        queue_id="q",
        api=False,
        rescan_seconds=3600,
        git_revision=git_revision,
    )
    ray = FakeRay(Capacity(1, 0, 2**34), clock=clock)
    rec = Reconciler(settings, TaskStore(tmp_path, clock=clock), ray, clock=clock)
    rec.events.armed()
    for name in ("a", "b"):
        write_task(tmp_path, name, priority=1)
    first = rec.read_specs()
    assert first is not None and set(first) == {"a", "b"}
    again = rec.read_specs(set())  # events named nothing
    assert again is first
    rec.events.add([str(tmp_path / "a.yaml")])  # named, but not changed: the same inputs
    assert rec.read_specs(rec._changed_paths()) is first
    before = dict(first)
    write_task(tmp_path, "a", "echo edited", priority=1)
    rec.events.add([str(tmp_path / "a.yaml")])
    edited = rec.read_specs(rec._changed_paths())
    assert edited is not None and edited is not first
    assert edited["a"] is not before["a"] and edited["b"] is before["b"]
    assert first == before  # the map handed before is left as it was
    (tmp_path / "b.yaml").unlink()
    rec.events.add([str(tmp_path / "b.yaml")])
    gone = rec.read_specs(rec._changed_paths())
    assert gone is not None and set(gone) == {"a"} and set(edited) == {"a", "b"}
