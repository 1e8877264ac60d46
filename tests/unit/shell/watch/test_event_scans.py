"""Scans driven by file events agree with a full walk; what events miss, a full walk catches."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from reconciler.shell.watch.events import FileEvents
from specs.folder.store import TaskStore
from specs.task.inputs import TaskInput
from tests.support.clock import FakeClock
from tests.support.specs import task_yaml, write_task


def view(entries: dict[str, TaskInput]) -> dict[str, str | None]:
    return {n: e.task.spec.entrypoint if e.task else str(e.error) for n, e in entries.items()}


def test_named_paths_give_what_a_full_walk_gives(tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        write_task(tmp_path, name, f"python {name}.py")
    (tmp_path / "team").mkdir()
    write_task(tmp_path / "team", "d", "python d.py")
    store = TaskStore(tmp_path)
    store.scan()
    changed = {
        write_task(tmp_path, "a", "python a2.py"),
        write_task(tmp_path, "new", "python new.py"),
        write_task(tmp_path / "team", "d", "python d2.py"),
        tmp_path / "c.yaml",
    }
    (tmp_path / "c.yaml").unlink()
    (tmp_path / "broken.yaml").write_text("spec: [")
    changed.add(tmp_path / "broken.yaml")
    incremental = store.scan({str(p) for p in changed})
    assert view(incremental) == view(TaskStore(tmp_path).scan())
    assert view(incremental)["a"] == "python a2.py" and "c" not in incremental


def test_what_events_missed_waits_for_the_full_walk(tmp_path: Path) -> None:
    store = TaskStore(tmp_path)
    store.scan()
    write_task(tmp_path, "missed", "python m.py")
    assert "missed" not in store.scan(set())  # no event named it
    assert "missed" in store.scan()  # the periodic full walk


def test_a_folder_event_falls_back_to_a_full_walk(tmp_path: Path) -> None:
    store = TaskStore(tmp_path)
    store.scan()
    source = tmp_path.parent / f"{tmp_path.name}-src"
    source.mkdir()
    write_task(source, "x", "python x.py")
    shutil.move(str(source), tmp_path / "team")  # one event, for the folder only
    assert "team/x" in store.scan({str(tmp_path / "team")})


def test_a_settling_file_is_looked_at_again_without_a_new_event(tmp_path: Path) -> None:
    clock = FakeClock()
    store = TaskStore(tmp_path, settle_seconds=1.0, clock=clock)
    write_task(tmp_path, "a", "python one.py")
    store.scan()
    (tmp_path / "a.yaml").write_text(task_yaml("python two.py"))  # in place: it settles
    assert view(store.scan({str(tmp_path / "a.yaml")}))["a"] == "python one.py"
    clock.advance(1.0)
    assert view(store.scan(set()))["a"] == "python two.py"
    (tmp_path / "a.yaml").unlink()
    assert "a" in store.scan({str(tmp_path / "a.yaml")})  # gone for a moment is not gone
    clock.advance(1.0)
    assert "a" not in store.scan(set())


def test_a_symlink_in_the_tree_means_full_walks(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    store = TaskStore(tmp_path)
    store.scan()
    write_task(tmp_path / "real", "x", "python x.py")
    # The event names real/x.yaml only; link/x is the same file under another name.
    assert {"real/x", "link/x"} <= set(store.scan({str(tmp_path / "real" / "x.yaml")}))


def test_events_are_trusted_only_while_a_watcher_is_armed() -> None:
    events = FileEvents(threading.Event())
    events.add(["/t/a.yaml"])
    assert events.take() is None  # no watcher: walk
    events.armed()
    assert events.take() is None  # the walk that covers the watcher's set-up
    events.add(["/t/b.yaml"])
    assert events.take() == {"/t/b.yaml"}
    assert events.take() == set()
    events.lost()
    events.add(["/t/c.yaml"])
    assert events.take() is None


def test_the_loop_walks_again_when_the_rescan_is_due(tmp_path: Path) -> None:
    from reconciler.shell.loop.runner import Reconciler
    from reconciler.shell.raycluster.fake import FakeRay
    from specs.cluster import Capacity
    from specs.settings.process import Settings

    def loop(rescan: float) -> Reconciler:
        settings = Settings(tasks_dir=tmp_path, queue_id="q", api=False, rescan_seconds=rescan)
        rec = Reconciler(settings, TaskStore(tmp_path), FakeRay(Capacity(4, 0, 2**34)))
        rec.events.armed()
        rec.run_pass()  # the walk after arming
        return rec

    trusting, walking = loop(30.0), loop(0.0)
    for rec in (trusting, walking):
        write_task(tmp_path, "late", "python late.py")  # no event reaches the loop
        rec.run_pass()
    assert "late" not in trusting.store.scan(set())
    assert "late" in walking.store.scan(set())


def test_a_costly_walk_stretches_the_rescan_interval_to_its_cpu_share(tmp_path: Path) -> None:
    from reconciler.shell.loop.runner import Reconciler
    from reconciler.shell.raycluster.fake import FakeRay
    from specs.cluster import Capacity
    from specs.settings.process import Settings
    from tests.support.clock import FakeClock

    monotonic = FakeClock(0.0)

    def loop(share: float) -> Reconciler:
        settings = Settings(
            tasks_dir=tmp_path, queue_id="q", api=False, rescan_seconds=0.2, rescan_cpu_share=share
        )
        cpu = FakeClock(0.0)

        def cpu_clock() -> float:
            cpu.advance(0.1)  # each reading 100 ms later: as if a walk cost 100 ms of CPU
            return cpu()

        rec = Reconciler(
            settings,
            TaskStore(tmp_path),
            FakeRay(Capacity(4, 0, 2**34)),
            monotonic=monotonic,
            cpu_clock=cpu_clock,
        )
        rec.events.armed()
        rec.run_pass()  # the walk after arming
        assert rec.walk_cpu_seconds == pytest.approx(0.1)
        return rec

    capped, plain = loop(0.01), loop(0.0)
    assert capped.rescan_interval() == pytest.approx(10.0)  # 0.1 s is 1 % of 10 s
    assert plain.rescan_interval() == 0.2
    monotonic.advance(0.3)  # past rescan_seconds, well inside the stretched interval
    for rec in (capped, plain):
        write_task(tmp_path, f"late-{id(rec)}", "python late.py")  # no event reaches the loop
        rec.run_pass()
    assert f"late-{id(capped)}" not in capped.store.scan(set())
    assert f"late-{id(plain)}" in plain.store.scan(set())
