"""The loop tells the planner which tasks' versions changed since the pass before
(`plan_incremental(changed=...)`), and the memo what changed in the passes that stood since
the plan it holds, so that a pass does not compare every version; it says None (the planner
compares) whenever it cannot know: a full walk, a failed pass."""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping
from pathlib import Path
from typing import Any

import pytest

from reconciler.core import incremental
from reconciler.shell.loop import runner as loop
from reconciler.shell.loop.runner import Reconciler
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import SUCCEEDED, Capacity
from specs.folder.store import TaskStore
from specs.settings.process import Settings
from tests.support.clock import FakeClock
from tests.support.specs import write_task

_PLAN = incremental.plan_incremental


class Calls:
    """Each plan_incremental call's `changed`, checked against the truth: every name whose
    version differs from the versions of the plan the memo holds must be named."""

    def __init__(self) -> None:
        self.changed: list[set[str] | None] = []
        self.fail_next = False

    def __call__(self, memo: incremental.Memo, *args: Any, **kwargs: Any) -> Any:
        given: Collection[str] | None = kwargs["changed"]
        # The loop names what changed since the pass before; the memo keeps what changed in
        # the passes that stood since its plan (Memo.unplanned): together, since that plan.
        if given is not None:
            given = None if memo.unplanned is None else set(given) | memo.unplanned
        versions: Mapping[str, Hashable] = kwargs["versions"]
        if given is not None and memo.order is not None:
            before = memo.order.versions
            differ = {
                n for n in versions.keys() | before.keys() if versions.get(n) != before.get(n)
            }
            assert differ <= set(given), f"unnamed changes: {differ - set(given)}"
            # A sidecar without a spec is named too, unless its spec was just deleted or it
            # was one last pass too (keptorder.orphans_of looks at no other).
            specs, statuses = args[0], args[1]
            deleted = memo.order.statuses.keys() - specs.keys()
            new = {n for n in statuses if n not in specs} - memo.order.orphans - deleted
            assert new <= set(given), f"unnamed sidecars without a spec: {new - set(given)}"
        self.changed.append(None if given is None else set(given))
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("a pass that fails after reading")
        return _PLAN(memo, *args, **kwargs)


@pytest.fixture
def loop_with_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Reconciler, FakeRay, Calls]:
    clock = FakeClock()
    ray = FakeRay(Capacity(1, 0, 2**34), clock=clock)
    settings = Settings(
        tasks_dir=tmp_path, queue_id="q", api=False, rescan_seconds=3600, git_revision=False
    )
    rec = Reconciler(settings, TaskStore(tmp_path, clock=clock), ray, clock=clock)
    rec.events.armed()  # as with a watcher: passes trust events between rescans
    calls = Calls()
    monkeypatch.setattr(loop.incremental, "plan_incremental", calls)
    for name in ("a", "b", "c"):
        write_task(tmp_path, name, priority=1)
    return rec, ray, calls


def settle(rec: Reconciler) -> None:
    before = rec.skipped
    for _ in range(6):
        rec.run_pass()
        if rec.skipped > before:
            return
    raise AssertionError("no pass was ever still")


def test_an_edit_names_only_the_task_edited(loop_with_calls, tmp_path: Path) -> None:
    rec, _, calls = loop_with_calls
    rec.run_pass()
    assert calls.changed[0] is None  # the first pass walks: nothing to compare with
    settle(rec)
    write_task(tmp_path, "c", "echo edited", priority=1)
    rec.events.add([str(tmp_path / "c.yaml")])
    rec.run_pass()
    assert calls.changed[-1] is not None and "c" in calls.changed[-1]
    # b waits, untouched: its version is not compared. (a's is: the status that moved it to
    # Running was written by a pass whose read-back stood (core/incremental/standing.py), so the
    # plan the memo holds predates it.)
    assert "b" not in calls.changed[-1]


def test_a_job_that_ends_and_a_deletion_are_named(loop_with_calls, tmp_path: Path) -> None:
    rec, ray, calls = loop_with_calls
    settle(rec)
    (running,) = ray.jobs
    ray.set_status(running, SUCCEEDED)
    rec.run_pass()  # the end: the task's status changes and is written
    rec.run_pass()  # ... and read back
    (tmp_path / "b.yaml").unlink()
    rec.events.add([str(tmp_path / "b.yaml")])
    rec.run_pass()
    assert calls.changed[-1] is not None and "b" in calls.changed[-1]
    # The check in Calls ran at every pass: no pass left a change unnamed.


def test_a_full_walk_and_a_failed_pass_say_none(loop_with_calls, tmp_path: Path) -> None:
    rec, _, calls = loop_with_calls
    settle(rec)
    rec.events.lost()  # the watcher restarts: the next pass walks the folder and rereads
    rec.events.armed()  # every sidecar
    write_task(tmp_path, "c", "echo edited", priority=1)
    rec.run_pass()
    assert calls.changed[-1] is None
    write_task(tmp_path, "a", "echo edited", priority=1)
    rec.events.add([str(tmp_path / "a.yaml")])
    calls.fail_next = True
    with pytest.raises(RuntimeError):
        rec.run_pass()
    rec.run_pass()  # the failed pass's read is not what the memo was planned from
    assert calls.changed[-1] is None
    write_task(tmp_path, "b", "echo edited", priority=1)
    rec.events.add([str(tmp_path / "b.yaml")])
    rec.run_pass()
    assert calls.changed[-1] is not None and "b" in calls.changed[-1]


def test_a_sidecar_without_a_spec_is_named_and_removed(loop_with_calls, tmp_path: Path) -> None:
    """A sidecar that appears by hand without a spec is read at the next walk of the folder,
    which tells the planner nothing (None): every sidecar is then looked at for a spec, and
    the orphan goes. (Calls checks that no pass told something leaves a new one unnamed.)"""
    rec, _, calls = loop_with_calls
    settle(rec)
    orphan = tmp_path / "z.status.yaml"
    orphan.write_bytes((tmp_path / "b.status.yaml").read_bytes().replace(b"name: b", b"name: z"))
    rec.events.add([str(orphan)])
    for _ in range(3):
        rec.run_pass()
    rec.events.lost()  # a walk reads every sidecar, this one too
    rec.events.armed()
    for _ in range(3):
        rec.run_pass()
    assert not orphan.exists()
    assert None in calls.changed[1:]
