"""Faults 5-7: the folder vanishes or half-changes, a spec turns invalid while its job runs,
and files are read while half-written. None of them may stop (or change) a running job."""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from reconciler.shell.loop.runner import Reconciler
from reconciler.shell.raycluster.adapter import RayJobsAdapter
from reconciler.shell.raycluster.fake import FakeRay
from reconciler.shell.watch.watcher import Watcher
from specs.cluster import META_QUEUE, RUNNING, STOPPED, Capacity
from specs.folder.store import TaskStore
from specs.settings.process import Settings
from specs.yamlio.parse import parse_task
from tests.reliability.conftest import ServeProcess
from tests.support.clock import FakeClock
from tests.support.specs import read_status, task_yaml, write_task
from tests.support.waiting import wait_until
from tests.support.world import GIB, World


def run_all(world: World, names: list[str]) -> dict[str, str]:
    """Submit the named tasks and make them RUNNING; their submission ids by name."""
    for name in names:
        world.write(name, f"python {name}.py")
    world.step()
    sids = {n: world.status(n)["submissionId"] for n in names}
    for sid in sids.values():
        world.ray.set_status(sid, RUNNING)
    world.step()
    return sids


def still_running(world: World, sids: dict[str, str]) -> bool:
    return all(world.ray.jobs[sid].status == RUNNING for sid in sids.values())


# --- 5. the folder vanishes or half-changes ---------------------------------------------------


def test_removed_folder_stops_nothing_and_is_adopted_back(
    make_world: Callable[..., World],
) -> None:
    world = make_world()
    sids = run_all(world, ["a", "b"])
    saved = {n: (world.tasks / f"{n}.yaml").read_bytes() for n in sids}
    shutil.rmtree(world.tasks)  # sidecars gone with it
    for _ in range(5):
        world.step(seconds=30)
    assert world.reconciler.state.folder_error is not None
    assert world.ray.calls["stop"] == 0 and still_running(world, sids)
    world.tasks.mkdir()
    for name, data in saved.items():  # back from git: specs only, no sidecars
        (world.tasks / f"{name}.yaml").write_bytes(data)
    world.step()
    for name, sid in sids.items():
        status = world.status(name)
        assert status["submissionId"] == sid and status["phase"] == "Running"
    assert world.ray.calls["stop"] == 0 and len(world.ray.submitted) == 2


def test_unmounted_folder_is_not_read_as_delete_everything(
    make_world: Callable[..., World], caplog: pytest.LogCaptureFixture
) -> None:
    world = make_world()
    sids = run_all(world, ["a", "b", "c"])
    # An unmounted volume leaves its mount point behind: an empty folder.
    mounted = world.tasks.with_name("volume")
    world.tasks.rename(mounted)
    world.tasks.mkdir()
    with caplog.at_level(logging.WARNING, "rayqueue.loop"):
        for _ in range(3):
            world.step(seconds=10)
    assert world.ray.calls["stop"] == 0 and still_running(world, sids)
    assert "REFUSING to stop 3 jobs" in caplog.text and "unmounted" in caplog.text
    shutil.rmtree(world.tasks)  # our history file went into the mount point meanwhile
    mounted.rename(world.tasks)  # mounted again
    world.step(passes=2)
    assert world.ray.calls["stop"] == 0 and still_running(world, sids)
    assert {world.status(n)["submissionId"] for n in sids} == set(sids.values())


def test_emptied_folder_is_carried_out_with_allow_mass_delete(
    make_world: Callable[..., World],
) -> None:
    world = make_world(allow_mass_delete=True)
    sids = run_all(world, ["a", "b"])
    for path in world.tasks.glob("*.yaml"):
        path.unlink()
    world.step(passes=2)
    assert all(world.ray.jobs[sid].status == STOPPED for sid in sids.values())


def swap_symlink(link: Path, target: Path) -> None:
    """What git-sync does: a new symlink beside the old one, renamed over it in one step."""
    tmp = link.with_name(f".{link.name}.tmp")
    tmp.symlink_to(target)
    os.replace(tmp, link)


def test_symlink_swap_reconciles_new_content_stops_nothing_in_between(
    make_world: Callable[..., World], tmp_path: Path
) -> None:
    rev1, rev2 = tmp_path / "rev1", tmp_path / "rev2"
    for rev in (rev1, rev2):
        rev.mkdir()
    link = tmp_path / "tasks"
    link.symlink_to(rev1)
    world = make_world(tasks=link, status_dir=tmp_path / "status")
    sids = run_all(world, ["keep", "drop"])

    # Mid-swap: the link points at a worktree that is not there (yet).
    swap_symlink(link, tmp_path / "rev-missing")
    world.step(passes=3)
    assert world.ray.calls["stop"] == 0 and still_running(world, sids)

    (rev2 / "keep.yaml").write_bytes((rev1 / "keep.yaml").read_bytes())  # unchanged
    (rev2 / "new.yaml").write_text(task_yaml("python new.py"))  # added; drop.yaml removed
    swap_symlink(link, rev2)
    world.step(passes=2)
    assert world.ray.jobs[sids["drop"]].status == STOPPED
    assert world.ray.jobs[sids["keep"]].status == RUNNING
    assert world.status("keep")["submissionId"] == sids["keep"]
    new = read_status(tmp_path / "status", "new")
    assert new["phase"] in ("Starting", "Running")
    assert not (tmp_path / "status" / "drop.status.yaml").exists()


@pytest.mark.ray
def test_symlink_swap_under_real_serve(make_serve: Callable[..., ServeProcess], ray_head: str):
    """The same with the real `rayqueue serve` (watcher, settle time, rescans) and real Ray."""
    root = make_serve().tasks.parent / "sync"
    rev1, rev2 = root / "rev1", root / "rev2"
    rev1.mkdir(parents=True)
    rev2.mkdir()
    link = root / "tasks"
    link.symlink_to(rev1)
    sleep = "python -c 'import time; time.sleep(60)'"
    write_task(rev1, "keep", sleep)
    write_task(rev1, "drop", sleep)
    serve = make_serve(tasks=link, args=("--interval", "0.2", "--status-dir", str(root / "st")))
    serve.start()
    serve.wait_ready()
    status_dir = root / "st"
    ray = RayJobsAdapter(ray_head, timeout_seconds=10)
    wait_until(
        lambda: all(read_status(status_dir, n).get("phase") == "Running" for n in ("keep", "drop")),
        "both tasks to run",
    )
    sids = {n: read_status(status_dir, n)["submissionId"] for n in ("keep", "drop")}

    swap_symlink(link, root / "rev-missing")  # the folder vanishes for a while
    time.sleep(3)
    assert all(ray.job_info(s).status == RUNNING for s in sids.values())

    write_task(rev2, "keep", sleep)
    write_task(rev2, "new", "python -c 'print(1)'")
    swap_symlink(link, rev2)
    wait_until(lambda: read_status(status_dir, "new").get("phase") == "Succeeded", "new to run")
    wait_until(lambda: ray.job_info(sids["drop"]).status == STOPPED, "drop to be stopped")
    assert ray.job_info(sids["keep"]).status == RUNNING
    assert read_status(status_dir, "keep")["submissionId"] == sids["keep"]
    assert serve.terminate() == 0
    ours = [j for j in ray.list_jobs() if j.metadata.get(META_QUEUE) == serve.queue_id]
    assert len(ours) == 3  # keep, drop and new: nothing submitted twice


def test_mass_deletion_is_held_until_confirmed(
    make_world: Callable[..., World], caplog: pytest.LogCaptureFixture
) -> None:
    world = make_world(capacity=Capacity(16, 0, 64 * GIB), max_stops_per_pass=10)
    names = [f"t{i:02d}" for i in range(15)]
    sids = run_all(world, names)
    saved = {n: (world.tasks / f"{n}.yaml").read_bytes() for n in names}
    for name in names[:12]:
        (world.tasks / f"{name}.yaml").unlink()  # e.g. a bad merge; the sidecars stay
    with caplog.at_level(logging.WARNING, "rayqueue.loop"):
        world.step(passes=3)
    assert world.ray.calls["stop"] == 0 and still_running(world, sids)
    assert "REFUSING to stop 12 jobs" in caplog.text and "--allow-mass-delete" in caplog.text
    assert all((world.tasks / f"{n}.status.yaml").exists() for n in names)
    assert world.reconciler.state.passes == 5  # the loop carries on meanwhile

    for name, data in saved.items():  # restored: nothing happened
        (world.tasks / f"{name}.yaml").write_bytes(data)
    world.step()
    assert world.ray.calls["stop"] == 0 and len(world.ray.submitted) == 15

    # A deletion within the limit goes ahead at once.
    for name in names[:3]:
        (world.tasks / f"{name}.yaml").unlink()
    world.step()
    assert world.ray.calls["stop"] == 3

    # Confirmed: the same reconciler restarted with --allow-mass-delete carries it out.
    for name in names[3:]:
        (world.tasks / f"{name}.yaml").unlink()
    world.step(passes=2)
    assert world.ray.calls["stop"] == 3
    settings = Settings(tasks_dir=world.tasks, queue_id="q-rel", api=False, allow_mass_delete=True)
    confirmed = Reconciler(settings, TaskStore(world.tasks), world.ray, clock=world.clock)
    world.clock.advance(1)
    confirmed.run_pass()
    assert all(world.ray.jobs[sid].status == STOPPED for sid in sids.values())


# --- 6. a spec turns invalid while its job runs ----------------------------------------------


def test_invalid_spec_keeps_the_job_running_under_the_last_valid_one(
    make_world: Callable[..., World],
) -> None:
    world = make_world()
    sids = run_all(world, ["train"])
    good = (world.tasks / "train.yaml").read_text()
    (world.tasks / "train.yaml").write_text(good.replace("priority", "priorty") + "  oops: 1\n")
    world.step(passes=2)
    status = world.status("train")
    assert status["phase"] == "Running" and status["submissionId"] == sids["train"]
    condition = status["conditions"][0]
    assert condition["type"] == "SpecInvalid" and "oops" in condition["message"]
    assert "keeps running" in condition["message"]
    assert world.ray.calls["stop"] == 0

    # A restart forgets the last valid spec; the broken file still stops nothing.
    fresh = Reconciler(
        world.reconciler.settings, TaskStore(world.tasks), world.ray, clock=world.clock
    )
    world.clock.advance(1)
    fresh.run_pass()
    assert world.status("train")["phase"] == "Running" and world.ray.calls["stop"] == 0

    (world.tasks / "train.yaml").write_text(good)  # fixed as it was: same run, no condition
    world.step()
    status = world.status("train")
    assert status["submissionId"] == sids["train"] and "conditions" not in status
    world.write("train", "python train.py --fixed")  # fixed differently: normal rules
    world.step()
    assert world.ray.calls["stop"] == 1 and world.status("train")["run"] == 2


# --- 7. half-written files --------------------------------------------------------------------

ORIGINAL = """apiVersion: rayqueue/v1
kind: Task
spec:
  resources: {cpu: 1}
  priority: 3
  entrypoint: python train.py --epochs 3
"""
# Cut points that leave a *valid* spec with another entrypoint, the worst case.
CUTS = ("  entrypoint: pyth", "  entrypoint: python train.py --ep", "  entrypoint: python train")


def write_in_pieces(path: Path, text: str, pause: float) -> None:
    """As an editor without atomic save, or cp, does: truncate, then write piece by piece."""
    marks = sorted({text.index(c) + len(c) for c in CUTS if c in text} | {len(text)})
    with path.open("w") as f:  # truncates: for a moment the file is empty
        f.flush()
        time.sleep(pause)
        start = 0
        for mark in marks:
            f.write(text[start:mark])
            f.flush()
            os.fsync(f.fileno())
            start = mark
            time.sleep(pause)


def test_half_written_spec_never_stops_or_changes_a_running_job(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    ray = FakeRay(Capacity(4, 0, 16 * GIB))
    settings = Settings(tasks_dir=tasks, queue_id="q-half", api=False, interval_seconds=0.05)
    store = TaskStore(tasks, settle_seconds=1.0)
    reconciler = Reconciler(settings, store, ray)
    (tasks / "train.yaml").write_text(ORIGINAL)
    stop = threading.Event()
    loop = threading.Thread(target=reconciler.run, args=(stop,), daemon=True)
    Watcher(tasks, reconciler.wake, stop).start()  # wakes the loop on every piece written
    loop.start()
    try:
        wait_until(lambda: ray.submitted, "the first submission", timeout=10)
        first = ray.submitted[0].submission_id
        ray.set_status(first, RUNNING)
        wait_until(lambda: read_status(tasks, "train").get("phase") == "Running", "Running")
        hashes: set[str] = set()
        sampler_done = threading.Event()

        def sample() -> None:
            while not sampler_done.is_set():
                hashes.add(str(read_status(tasks, "train").get("specHash")))
                time.sleep(0.01)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        # Rewritten in place with the same content, pausing well inside the settle time.
        write_in_pieces(tasks / "train.yaml", ORIGINAL, pause=0.3)
        time.sleep(1.5)  # settled: read again, found unchanged
        sampler_done.set()
        sampler.join()
        assert ray.calls["stop"] == 0 and len(ray.submitted) == 1
        assert ray.jobs[first].status == RUNNING
        assert len(hashes) == 1, f"the run's spec changed mid-write: {hashes}"

        # A real edit, written the same way: only its final content counts, once.
        final = ORIGINAL.replace("--epochs 3", "--epochs 5")
        write_in_pieces(tasks / "train.yaml", final, pause=0.3)
        wait_until(lambda: len(ray.submitted) == 2, "the edited run", timeout=10)
        time.sleep(1.5)
        assert [r.entrypoint for r in ray.submitted] == [
            "python train.py --epochs 3",
            "python train.py --epochs 5",
        ]
        assert ray.jobs[first].status == STOPPED and ray.calls["stop"] == 1
    finally:
        stop.set()
        reconciler.wake.set()
        loop.join(10)


def write_in_place(folder: Path, name: str, entrypoint: str) -> None:
    """Truncate and write through the visible name, as an editor without atomic save does."""
    (folder / f"{name}.yaml").write_text(task_yaml(entrypoint))


def test_store_believes_a_change_only_once_it_has_settled(tmp_path: Path) -> None:
    """The settle rule itself, on a fake clock: edits, new files and deletions all wait."""
    clock = FakeClock()
    store = TaskStore(tmp_path, settle_seconds=1.0, clock=clock)
    write_task(tmp_path, "a", "python one.py")
    assert store.scan()["a"].task is not None  # the first scan reports what it finds

    def entrypoint() -> str | None:
        entry = store.scan().get("a")
        return entry.task.spec.entrypoint if entry and entry.task else None

    (tmp_path / "a.yaml").write_text("apiVersion: rayqueue/v1\nkind: Task\nspec:\n  entry")
    clock.advance(0.5)
    assert entrypoint() == "python one.py"  # half-written: the old content stands
    write_in_place(tmp_path, "a", "python two.py")
    clock.advance(0.9)
    assert entrypoint() == "python one.py"  # changed again: the wait starts over
    clock.advance(1.0)
    assert entrypoint() == "python two.py"

    write_in_place(tmp_path, "b", "python b.py")
    assert "b" not in store.scan()
    clock.advance(1.0)
    assert "b" in store.scan()

    (tmp_path / "b.yaml").unlink()
    assert "b" in store.scan()  # gone for a moment (a checkout midway) is not gone
    clock.advance(0.5)
    write_task(tmp_path, "b", "python b.py")  # back: no deletion ever seen
    assert "b" in store.scan()
    (tmp_path / "b.yaml").unlink()
    store.scan()
    clock.advance(1.0)
    assert "b" not in store.scan()


def test_a_file_published_whole_needs_no_settle_wait(tmp_path: Path) -> None:
    """Renamed into place (our API and CLI, git-sync, `mv`): complete when it appears."""
    clock = FakeClock()
    store = TaskStore(tmp_path, settle_seconds=1.0, clock=clock)
    write_task(tmp_path, "a", "python one.py")
    store.scan()

    write_task(tmp_path, "a", "python two.py")  # specs/folder/atomic.py, as the API and CLI write
    write_task(tmp_path, "b", "python b.py")
    entries = store.scan()  # no time has passed
    assert entries["a"].task is not None and entries["a"].task.spec.entrypoint == "python two.py"
    assert "b" in entries

    # A user's own `cp` to a temp file and `mv`: the rename comes after the last write.
    temp = tmp_path / ".c.tmp"
    temp.write_text(task_yaml("python c.py"))
    time.sleep(0.02)  # the rename lands in a later clock tick than the write
    os.replace(temp, tmp_path / "c.yaml")
    assert "c" in store.scan()

    # Written in place afterwards: the old content stands until the new one has settled.
    write_in_place(tmp_path, "c", "python c2.py")
    entry = store.scan()["c"]
    assert entry.task is not None and entry.task.spec.entrypoint == "python c.py"
    # A deletion still waits, however the file had come.
    (tmp_path / "b.yaml").unlink()
    assert "b" in store.scan()


TWO_PIECES = ORIGINAL.index("  entrypoint: python train") + len("  entrypoint: python train")


@pytest.mark.parametrize("existing", [False, True], ids=["new-file", "edited-file"])
def test_a_spec_written_in_two_pieces_never_starts_a_wrong_job(
    tmp_path: Path, existing: bool
) -> None:
    """As `rayqueue serve` runs (its settings, store and watcher): the first piece alone is a
    valid spec with another entrypoint, and it must never reach Ray."""
    from benchmarks.common import serve_settings
    from reconciler.app.assembly import build_reconciler, start_loop

    tasks = tmp_path / "tasks"
    tasks.mkdir()
    path = tasks / "train.yaml"
    if existing:
        path.write_text(ORIGINAL.replace("resources: {cpu: 1}", "resources: {cpu: 64}"))
    ray = FakeRay(Capacity(4, 0, 16 * GIB))
    settings = serve_settings(tasks, "--queue-id", "q-two", "--interval", "0.05")
    reconciler = build_reconciler(settings, ray)
    stop = threading.Event()
    threads = start_loop(reconciler, stop)
    try:
        # The first pass reports whatever it finds (there is no "before" to keep): let it pass.
        wait_until(lambda: reconciler.state.passes > 0, "the first pass")
        if existing:  # too big for the cluster: it waits, and must not run as the first piece
            wait_until(
                lambda: read_status(tasks, "train").get("phase") == "Unschedulable", "its status"
            )
        with path.open("w") as f:
            f.write(ORIGINAL[:TWO_PIECES])  # a valid spec: entrypoint "python train"
            f.flush()
            os.fsync(f.fileno())
            time.sleep(0.5 * settings.settle_seconds)  # passes run meanwhile, woken by events
            f.write(ORIGINAL[TWO_PIECES:])
        wait_until(lambda: ray.submitted, "the submission", timeout=10)
        time.sleep(1.5 * settings.settle_seconds)
        assert [r.entrypoint for r in ray.submitted] == ["python train.py --epochs 3"], [
            (r.entrypoint, r.submission_id) for r in ray.submitted
        ]
        assert reconciler.state.passes > 5  # the loop did look while the file was half-written
    finally:
        stop.set()
        reconciler.wake.set()
        threads.join(10)


def test_first_scan_waits_for_a_spec_still_being_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A spec written in place while serve was down (or as it starts) has no old content to
    stand for it: the first pass waits until it has settled, and never runs its first half."""
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    full = (
        "apiVersion: rayqueue/v1\nkind: Task\nspec:\n  resources: {cpu: 1}\n"
        "  entrypoint: python train.py --epochs 3\n"
    )
    half = full[: full.index("--epochs")]
    assert parse_task(half, file="train.yaml").spec.entrypoint == "python train.py"  # runnable
    (tasks / "train.yaml").write_text(half)
    world = World.build(tasks, settle_seconds=1.0)
    with caplog.at_level("INFO"):
        world.step()
    assert world.ray.submitted == [] and world.reconciler.state.folder_error is not None
    # Settling is not a lost folder: said once, at INFO, and no ERROR.
    said = [r for r in caplog.records if "settle" in r.getMessage()]
    assert [r.levelname for r in said] == ["INFO"]
    assert "1 spec file written less than" in said[0].getMessage()
    assert not [r for r in caplog.records if r.levelname == "ERROR"]
    (tasks / "train.yaml").write_text(full)  # the rest lands within the settle time
    world.step(seconds=0.5)
    assert world.ray.submitted == []
    world.step()
    assert [r.entrypoint for r in world.ray.submitted] == ["python train.py --epochs 3"]
    assert world.reconciler.state.folder_error is None


def test_first_scan_believes_old_and_whole_files_at_once(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    old = tasks / "old.yaml"
    old.write_text(task_yaml("python old.py"))
    st = old.stat()
    os.utime(old, ns=(st.st_atime_ns, st.st_mtime_ns - 5_000_000_000))  # written 5 s ago
    write_task(tasks, "whole", "python whole.py")  # renamed into place just now
    world = World.build(tasks, settle_seconds=1.0)
    world.step()
    assert sorted(r.entrypoint for r in world.ray.submitted) == ["python old.py", "python whole.py"]
