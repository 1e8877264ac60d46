"""serve's first pass begins once the watcher is armed, so the pass after it reads only what
events name instead of walking the whole folder again (the sidecars the first pass wrote)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from benchmarks.common import serve_settings
from reconciler.app.assembly import build_reconciler, start_loop
from reconciler.shell.raycluster.fake import FakeRay
from reconciler.shell.watch.events import FileEvents
from reconciler.shell.watch.watcher import Watcher
from specs.cluster import Capacity
from specs.folder.changes import ChangeScanner
from tests.support.specs import read_status, write_task
from tests.support.waiting import wait_until


def test_wait_armed_says_whether_a_watcher_is_armed() -> None:
    events = FileEvents(threading.Event())
    assert not events.wait_armed(0)
    events.armed()
    assert events.wait_armed(0)
    events.lost()  # a watcher that restarts is not armed until it is set up again
    assert not events.wait_armed(0)


def test_the_pass_after_the_first_does_not_walk_the_folder_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    for i in range(3):
        write_task(tasks, f"t{i}")
    walks: list[float] = []
    scan_all = ChangeScanner.scan_all  # a store's full walk of its folder

    def counted(self: ChangeScanner) -> object:
        walks.append(time.monotonic())
        return scan_all(self)

    monkeypatch.setattr(ChangeScanner, "scan_all", counted)
    run = Watcher._run

    def slow_to_arm(self: Watcher) -> None:
        time.sleep(0.3)  # a watcher that takes a while to set up its watches
        run(self)

    monkeypatch.setattr(Watcher, "_run", slow_to_arm)
    settings = serve_settings(tasks, "--queue-id", "q-arm")
    reconciler = build_reconciler(settings, FakeRay(Capacity(1, 0, 2**34)))
    stop = threading.Event()
    threads = start_loop(reconciler, stop)
    try:
        wait_until(lambda: reconciler.state.passes > 0, "the first pass")
        write_task(tasks, "late")  # read by its event, in a later pass
        wait_until(lambda: read_status(tasks, "late").get("phase") is not None, "its status")
        assert reconciler.events.is_armed
        # One walk (the first pass); without the wait, the first pass ran before the watches
        # were set up and the next one walked everything again.
        assert len(walks) == 1
    finally:
        stop.set()
        reconciler.wake.set()
        threads.join(10)
