"""What the loop keeps between passes so that a pass costs what changed: its spec
inputs, each task's Version, the store's status view and the spec entries it hands out. After
any sequence of edits, deletions, arrays, job ends and passes driven by file events, each kept
value equals what a full read of the folder gives; a full walk reads everything again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from reconciler.shell.loop.changes import Version
from reconciler.shell.loop.inputs import scan_specs
from specs.cluster import Capacity
from specs.folder.store import TaskStore
from tests.support.specs import write_task
from tests.support.world import World

NAMES = ["a", "b", "c", "d"]

op = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(NAMES), st.integers(0, 3)),
    st.tuples(st.just("array"), st.sampled_from(NAMES), st.integers(1, 3)),
    st.tuples(st.just("broken"), st.sampled_from(NAMES), st.just(0)),
    st.tuples(st.just("delete"), st.sampled_from(NAMES), st.just(0)),
    st.tuples(st.just("end"), st.just(""), st.just(0)),
    st.tuples(st.just("walk"), st.just(""), st.just(0)),
    st.tuples(st.just("pass"), st.just(""), st.just(0)),
)


def _array(count: int) -> str:
    doc: dict[str, Any] = {
        "apiVersion": "rayqueue/v1",
        "kind": "Task",
        "spec": {"entrypoint": "true", "resources": {"cpu": 1}, "array": {"count": count}},
    }
    return yaml.safe_dump(doc)


def _apply(w: World, kind: str, name: str, n: int) -> None:
    path = w.tasks / f"{name}.yaml"
    rec = w.reconciler
    if kind == "write":
        write_task(w.tasks, name, f"python {name}.py", priority=n)
    elif kind == "array":
        path.write_text(_array(n))
    elif kind == "broken":
        path.write_text("spec: [")
    elif kind == "delete":
        path.unlink(missing_ok=True)
    elif kind == "end":
        live = [s for s, j in w.ray.jobs.items() if not j.terminal]
        if live:
            w.ray.set_status(live[0], "SUCCEEDED")
        return
    elif kind == "walk":
        rec.events.armed()  # events may have been lost: the next pass walks
        return
    else:
        w.step()
        return
    rec.events.add([str(path)])


def _checked(w: World) -> World:
    """Every pass of `w` checks, as it reads, that the kept statuses and versions equal a
    rebuild from everything the store holds."""
    rec = w.reconciler
    store = rec.store
    read, versions = store.read_status_changes, rec.changes.read

    def read_checked(*, cached: bool = False) -> Any:
        statuses, generations, changes = read(cached=cached)
        assert (statuses, generations) == store._statuses.all_statuses()
        return statuses, generations, changes

    def versions_checked(specs: Any, statuses: Any, *args: Any) -> dict[str, Version]:
        got = versions(specs, statuses, *args)
        source = rec._source_version if rec.revisions is not None else 0
        assert got == {
            name: Version(rec._specs.inputs[name].generation, source, statuses.get(name, 0))
            for name in specs
        }
        return got

    store.read_status_changes = read_checked  # type: ignore[method-assign]
    rec.changes.read = versions_checked  # type: ignore[method-assign]
    return w


def _check(w: World, shadow: TaskStore) -> None:
    """The kept spec inputs and entries equal a full read of the folder by `shadow`, a store
    that has read the folder at every pass, by full walks only (so it remembers the same last
    valid specs)."""
    rec = w.reconciler
    fresh = scan_specs(shadow)
    kept = rec._specs.inputs
    assert kept.keys() == fresh.keys()
    for name, got in kept.items():
        assert (got.task, got.error, got.spec_hash) == (
            fresh[name].task,
            fresh[name].error,
            fresh[name].spec_hash,
        ), name
    scanned = rec.store.scanned()
    assert scanned is not None and scanned.keys() == fresh.keys()


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(ops=st.lists(op, min_size=1, max_size=25))
# A waiting task's spec deleted after the loop wrote its status: its status stays changed.
@example(
    ops=[
        ("write", "c", 2),
        ("broken", "b", 0),
        ("end", "", 0),
        ("delete", "c", 0),
        ("delete", "a", 0),
        ("end", "", 0),
    ]
)
def test_what_the_loop_keeps_equals_a_full_read(tmp_path_factory: Any, ops: list[Any]) -> None:
    tasks: Path = tmp_path_factory.mktemp("tasks")
    w = _checked(World.build(tasks, Capacity(2, 0, 16 * 2**30), queue_id="q"))
    shadow = TaskStore(tasks)
    w.reconciler.events.armed()
    w.step()
    _check(w, shadow)
    for kind, name, n in ops:
        _apply(w, kind, name, n)
        if kind in ("pass", "end"):
            w.step()
            _check(w, shadow)
    w.step()
    _check(w, shadow)


def test_a_pass_of_events_reads_only_what_they_name(tmp_path: Path) -> None:
    for i in range(20):
        write_task(tmp_path, f"t{i:02d}", "true")
    w = _checked(World.build(tmp_path, Capacity(2, 0, 16 * 2**30), queue_id="q"))
    rec = w.reconciler
    shadow = TaskStore(tmp_path)
    rec.events.armed()
    w.step(3)
    built = []
    original = rec._specs.read

    def read(*args: Any) -> set[str]:
        changed = original(*args)
        built.append((changed, rec.changes.full))
        return changed

    rec._specs.read = read  # type: ignore[method-assign]
    path = write_task(tmp_path, "t05", "python edited.py")
    rec.events.add([str(path)])
    w.step()
    assert built[-1][0] == {"t05"}
    assert rec.changes.full is False  # versions updated for what changed, not rebuilt
    assert rec._specs.inputs["t05"].task.spec.entrypoint == "python edited.py"  # type: ignore[union-attr]
    _check(w, shadow)


def test_a_failed_pass_leaves_nothing_kept_behind(tmp_path: Path) -> None:
    """A pass that raises after the store handed out its changes: the next pass rebuilds the
    versions rather than miss them."""
    write_task(tmp_path, "a", "true")
    w = _checked(World.build(tmp_path, Capacity(2, 0, 16 * 2**30), queue_id="q"))
    rec = w.reconciler
    rec.events.armed()
    w.step(2)
    path = write_task(tmp_path, "a", "python edited.py")
    rec.events.add([str(path)])
    versions = rec.changes.read

    def fail(*args: Any) -> Any:
        raise RuntimeError("a bad pass")

    rec.changes.read = fail  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        w.step()
    rec.changes.read = versions  # type: ignore[method-assign]
    w.step()  # nothing new named: the edit must still reach the kept versions
    assert rec.changes.full is True
    assert rec.changes.versions["a"].spec == rec._specs.inputs["a"].generation
