"""The store's own sidecar writes (specs/atomic.replace_file) and the order of deferred ones."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from specs.folder import atomic, paths
from specs.folder.store import TaskStore
from specs.task.models import Metadata, Phase
from specs.task.status import TaskStatus, TaskStatusBody
from tests.support.clock import FakeClock


def queued(name: str, position: int | None = None) -> TaskStatus:
    body = TaskStatusBody(phase=Phase.QUEUED, queue_position=position)
    return TaskStatus(metadata=Metadata(name=name), status=body)


def test_replace_file_writes_whole_with_the_mode_and_returns_the_key(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "a.status.yaml"  # its folder is made when missing
    key = atomic.replace_file(target, b"one", durable=False)
    st = os.stat(target)
    assert target.read_bytes() == b"one"
    assert key == (st.st_mtime_ns, st.st_size, st.st_ino)
    assert stat.S_IMODE(st.st_mode) == 0o644
    atomic.replace_file(target, b"two", durable=True, mode=0o640)
    assert target.read_bytes() == b"two"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    assert sorted(p.name for p in target.parent.iterdir()) == ["a.status.yaml"]


def test_replace_file_reuses_a_temp_file_left_by_a_crash(tmp_path: Path) -> None:
    target = tmp_path / "a.status.yaml"
    left = tmp_path / f".a.status.yaml.{os.getpid()}.tmp"
    left.write_bytes(b"half a record")
    left.chmod(0o600)
    atomic.replace_file(target, b"whole", durable=False)
    assert target.read_bytes() == b"whole"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o644
    assert not left.exists()


def test_replace_file_fsyncs_only_when_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(atomic.os, "fsync", lambda fd: (synced.append(fd), real(fd)))
    atomic.replace_file(tmp_path / "a", b"one", durable=False)
    assert synced == []
    atomic.replace_file(tmp_path / "a", b"two", durable=True)
    assert len(synced) == 2  # the file, then its folder


def test_a_failed_replace_leaves_the_old_file_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "a.status.yaml"
    target.write_bytes(b"old")

    def failing(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", failing)
    with pytest.raises(OSError):
        atomic.replace_file(target, b"new", durable=False)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.status.yaml"]


def test_deferred_records_go_out_front_of_the_queue_first_then_the_longest_waiting(
    tmp_path: Path,
) -> None:
    clock = FakeClock(0.0)
    store = TaskStore(tmp_path, clock=clock)
    store.read_statuses()
    for name, position in [("c", 3), ("a", 1), ("b", 2), ("d", None)]:
        store.defer_status(name, queued(name, position))
    assert store.flush_statuses(2, 10) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.status.yaml", "b.status.yaml"]
    store.defer_status("e", queued("e", 0))  # a new record at the head comes first
    assert store.flush_statuses(1, 10) == 1
    assert (tmp_path / "e.status.yaml").exists()
    assert store.flush_statuses(5, 10) == 2  # c, then d (no position: last)
    assert store.deferred_statuses == 0
    # Moves of written records wait min_age, then go out in the order they were deferred.
    store.defer_status("b", queued("b", 5))
    clock.advance(3)
    store.defer_status("a", queued("a", 4))
    store.defer_status("b", queued("b", 6))  # keeps its place (and its age)
    clock.advance(8)
    assert store.flush_statuses(5, 10) == 1
    assert store.read_statuses()["b"].status.queue_position == 6
    assert "queuePosition: 1" in (tmp_path / "a.status.yaml").read_text()
    clock.advance(2)
    assert store.flush_statuses(5, 10) == 1
    assert "queuePosition: 4" in (tmp_path / "a.status.yaml").read_text()


def test_a_record_whose_sidecar_vanished_is_written_again_as_new(tmp_path: Path) -> None:
    clock = FakeClock(0.0)
    store = TaskStore(tmp_path, clock=clock)
    store.read_statuses()
    store.write_status("a", queued("a", 1), durable=False)
    store.defer_status("b", queued("b", 2))
    store.defer_status("a", queued("a", 3))  # a move: waits min_age
    assert store.flush_statuses(1, 10) == 1  # b, new; the order of new records is now kept
    (tmp_path / "a.status.yaml").unlink()  # someone removed it
    store.read_statuses()  # a full read: a has no sidecar now, so its record is new again
    assert store.flush_statuses(5, 10) == 1
    assert "queuePosition: 3" in (tmp_path / "a.status.yaml").read_text()


def test_durable_writes_in_a_batch_fsync_each_file_and_each_folder_once_at_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The loop writes the write-ahead records of a pass's submits in one batch and calls Ray
    # after it: each rename is durable once its folder is synced, so one sync per folder at
    # the batch's end gives every record the guarantee a sync per file gave it.
    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        target = os.readlink(f"/proc/self/fd/{fd}")
        synced.append("folder" if os.path.isdir(target) else os.path.basename(target))
        real(fd)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    (tmp_path / "team").mkdir()
    store = TaskStore(tmp_path, clock=FakeClock(0.0))
    store.read_statuses()
    with store.batch():
        for name in ("a", "b", "team/c"):
            assert store.write_status(name, queued(name), durable=True)
        assert "folder" not in synced  # not yet: at the batch's end
        assert store.read_statuses(cached=True).keys() == {"a", "b", "team/c"}
    assert synced.count("folder") == 2  # tmp_path and team, once each
    assert synced[:3] == [f".{n}.status.yaml.{os.getpid()}.tmp" for n in ("a", "b", "c")]
    assert synced[3:] == ["folder", "folder"]
    synced.clear()
    store.write_status("d", queued("d"), durable=True)  # outside a batch: synced at once
    assert synced == [f".d.status.yaml.{os.getpid()}.tmp", "folder"]
    synced.clear()
    with store.batch():
        store.write_status("e", queued("e"), durable=False)  # not durable: no sync at all
    assert synced == []


def test_a_small_file_is_read_whole_in_one_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cold start reads every spec: a short read is the file's end, so no second read (of
    # nothing) follows it. A file larger than the stat said still reads whole.
    reads: list[int] = []
    real = os.read
    monkeypatch.setattr(paths.os, "read", lambda fd, n: (reads.append(n), real(fd, n))[1])
    (tmp_path / "a.yaml").write_bytes(b"x" * 300)
    read = paths.read_with_stat(str(tmp_path / "a.yaml"))
    assert read is not None and read[0] == b"x" * 300 and reads == [301]
    capped = paths.read_with_stat(str(tmp_path / "a.yaml"), limit=100)
    assert capped is not None and capped[0] == b"x" * 100
    reads.clear()
    (tmp_path / "b.yaml").write_bytes(b"")
    empty = paths.read_with_stat(str(tmp_path / "b.yaml"))
    assert empty is not None and empty[0] == b"" and reads == [1]
