"""A dropped file counts when it is complete, however it was written: the inotify
watcher marks a file renamed into place or closed after a write as whole, so the loop reads it
without waiting out the settle time, in team sub-folders too."""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from inotify_simple import Event, INotify, flags

from reconciler.shell.watch.watcher import WATCH_MASK, Batch, Watcher, read_events
from specs.cluster import Capacity
from specs.folder.atomic import replace_file
from tests.support.specs import task_yaml
from tests.support.waiting import wait_until
from tests.support.world import GIB, World

SETTLE = 30.0  # on the world's fake clock, which these tests never move past it

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify: Linux"),
    pytest.mark.world(
        capacity=Capacity(4, 0, 16 * GIB),
        queue_id="q-test",
        settle_seconds=SETTLE,
        tick=0.0,
        # A write and a rename in the same clock tick leave ctime == mtime: file times say
        # nothing, as here for every file.
        store_options={"is_whole": lambda key, after: False},
    ),
]


@pytest.fixture
def world(world: World) -> Iterator[World]:
    """The shared world with a watcher on its folder, armed, and the walk after arming done."""
    world.reconciler.run_pass()  # the first walk: the folder is empty, nothing is held
    stop = threading.Event()
    watcher = Watcher(world.tasks, world.reconciler.wake, stop, world.reconciler.events)
    watcher.start()
    wait_until(lambda: world.reconciler.events.is_armed, "the watcher to arm")
    world.reconciler.run_pass()  # the walk after arming
    yield world
    stop.set()
    watcher.join(5)


def drop(w: World, write: Callable[[], object], submitted: int | None = None) -> None:
    """Let `write` put a file in the folder, then pass whenever the watcher wakes the loop
    (as the loop does), until Ray has `submitted` jobs; None: once. The fake clock stays."""
    w.reconciler.wake.clear()
    write()

    def woken_pass() -> bool:
        if w.reconciler.wake.is_set():
            w.reconciler.wake.clear()
            w.reconciler.run_pass()
            return submitted is None or len(w.ray.submitted) >= submitted
        return False

    wait_until(woken_pass, "the watcher to wake the loop and the file to count")


def renamed(folder: Path, name: str) -> None:
    tmp = folder / f".{name}.tmp"
    tmp.write_text(task_yaml())
    os.replace(tmp, folder / name)


def test_a_write_then_rename_counts_at_once(world: World) -> None:
    drop(world, lambda: renamed(world.tasks, "a.yaml"), submitted=1)
    assert [r.metadata["rayqueue.task"] for r in world.ray.submitted] == ["a"]


def test_a_closed_in_place_write_counts_at_once(world: World) -> None:
    def in_place() -> None:
        with open(world.tasks / "b.yaml", "w") as file:
            file.write(task_yaml())

    drop(world, in_place, submitted=1)
    assert len(world.ray.submitted) == 1


def test_a_file_in_a_new_team_folder_counts_at_once(world: World) -> None:
    drop(world, lambda: (world.tasks / "team-a").mkdir())
    drop(world, lambda: renamed(world.tasks / "team-a", "c.yaml"), submitted=1)
    assert [r.metadata["rayqueue.task"] for r in world.ray.submitted] == ["team-a/c"]


def test_a_file_still_open_for_writing_settles(world: World) -> None:
    file = open(world.tasks / "d.yaml", "w")  # noqa: SIM115 - held open on purpose
    try:
        drop(world, lambda: (file.write(task_yaml()), file.flush()))
        assert world.ray.submitted == []  # no close, no rename: it waits out the settle time
    finally:
        file.close()


def test_inotify_reports_a_rename_and_a_closed_write(tmp_path: Path) -> None:
    with INotify() as ino:
        ino.add_watch(tmp_path, WATCH_MASK)
        renamed(tmp_path, "x.yaml")
        (tmp_path / "y.yaml").write_text("y")
        seen: list[Event] = []
        wait_until(lambda: seen.extend(ino.read(100)) or len(seen) >= 5, "inotify events")
    moved = [e.name for e in seen if e.mask & flags.MOVED_TO]
    closed = [e.name for e in seen if e.mask & flags.CLOSE_WRITE]
    assert moved == ["x.yaml"] and "y.yaml" in closed


def test_the_watcher_leaves_out_our_own_writes(tmp_path: Path) -> None:
    # A start writes a sidecar per task (a temp file renamed into place): their events are
    # dropped on the name, and the task files' events still come through.
    with INotify() as ino:
        ino.add_watch(tmp_path, WATCH_MASK)
        replace_file(tmp_path / "a.status.yaml", b"status", durable=False)
        (tmp_path / "a.yaml~").write_text("backup")
        renamed(tmp_path, "a.yaml")
        seen: list[Event] = []
        wait_until(lambda: seen.extend(read_events(ino, 100).events) or len(seen) >= 1, "events")
        seen.extend(read_events(ino, 200).events)
    assert {e.name for e in seen} == {"a.yaml"}


def test_the_watch_follows_the_folder_removed_and_made_again(world: World) -> None:
    events = world.reconciler.events
    shutil.rmtree(world.tasks)
    wait_until(lambda: not events.is_armed, "the watcher to notice the folder went away")
    world.tasks.mkdir()
    wait_until(lambda: events.is_armed, "the watcher to arm again")
    world.reconciler.run_pass()  # the walk after arming
    drop(world, lambda: renamed(world.tasks, "e.yaml"), submitted=1)
    assert [r.metadata["rayqueue.task"] for r in world.ray.submitted] == ["e"]


def test_a_read_of_only_our_own_writes_says_how_many_it_left_out(tmp_path: Path) -> None:
    # The watcher pauses after such a read, so that a burst of sidecar writes is taken in a
    # few reads rather than one wake per file; it knows the read was not a timeout by this.
    with INotify() as ino:
        ino.add_watch(tmp_path, WATCH_MASK)
        replace_file(tmp_path / "a.status.yaml", b"status", durable=False)
        skipped = 0

        def read() -> bool:
            nonlocal skipped
            batch = read_events(ino, 100)
            assert batch.events == []
            skipped += batch.skipped
            return skipped >= 5  # created, written, closed, moved from; moved to

        wait_until(read, "the sidecar's events")
        assert read_events(ino, 0) == Batch([], 0)


def test_a_file_dropped_during_a_burst_of_our_own_writes_counts(world: World) -> None:
    stop = threading.Event()

    def burst() -> None:
        i = 0
        while not stop.is_set():
            replace_file(world.tasks / f"s{i % 50}.status.yaml", b"x" * i, durable=False)
            i += 1

    writer = threading.Thread(target=burst)
    writer.start()
    try:
        drop(world, lambda: renamed(world.tasks, "f.yaml"), submitted=1)
    finally:
        stop.set()
        writer.join(5)
    assert [r.metadata["rayqueue.task"] for r in world.ray.submitted] == ["f"]
