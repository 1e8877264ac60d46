"""The folder store: scanning, caching, ignored files, atomic writes and status sidecars."""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from specs.folder import atomic
from specs.folder.atomic import write_atomic
from specs.folder.store import (
    FolderUnavailable,
    InvalidName,
    TaskStore,
    validate_name,
)
from specs.service.tasks import TaskService
from specs.task.inputs import TaskInput
from specs.task.models import Metadata, Phase, Resources
from specs.task.records import Task, TaskSpec
from specs.task.status import TaskStatus, TaskStatusBody
from specs.yamlio.parse import MAX_FILE_BYTES, dump_task, parse_status, parse_task


def spec_text(name: str | None = None, cpu: float = 1, entrypoint: str = "python x.py") -> str:
    metadata = f"metadata: {{name: {name}}}\n" if name else ""
    return (
        "apiVersion: rayqueue/v1\nkind: Task\n"
        + metadata
        + f"spec:\n  entrypoint: {entrypoint}\n  resources: {{cpu: {cpu}}}\n"
    )


INVALID = "apiVersion: rayqueue/v1\nkind: Task\nspec:\n  entrypoint: x\n  priorty: 1\n"


def put(root: Path, rel: str, text: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def bump_mtime(path: Path) -> None:
    """A new mtime without relying on the clock's granularity."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def status(phase: Phase = Phase.QUEUED, message: str | None = None) -> TaskStatus:
    return TaskStatus(
        metadata=Metadata(name="t"), status=TaskStatusBody(phase=phase, message=message)
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "tasks"
    path.mkdir()
    return path


@pytest.fixture
def count_parses() -> list[str]:
    """Every spec parse a store made with `counting_parse`, by file."""
    return []


@pytest.fixture
def counting_parse(count_parses: list[str]) -> Callable[..., Task]:
    """A spec parser for TaskStore(parse_task=...) that records each parse in count_parses."""
    calls = count_parses
    real = parse_task

    def counting(
        text: str | bytes,
        *,
        file: str,
        expected_name: str | None = None,
        task_name: str | None = None,
        check: Any = None,
        max_array_elements: int = 10_000,
    ) -> Task:
        calls.append(file)
        return real(
            text,
            file=file,
            expected_name=expected_name,
            task_name=task_name,
            check=check,
            max_array_elements=max_array_elements,
        )

    return counting


# --- names -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["train", "team-a/train", "a/b/c_d.e-f", "v1.2", "A9", "x" * 200, "a.status2", "status"],
)
def test_valid_names(name: str) -> None:
    assert validate_name(name) == name


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "must not be empty"),
        ("a\x00b", "NUL"),
        ("x" * 201, "the limit is 200"),
        ("/etc/passwd", "must be relative"),
        ("a//b", "empty segment"),
        ("a/", "empty segment"),
        ("a/./b", "'.' or '..'"),
        ("../up", "'.' or '..'"),
        ("a/..", "'.' or '..'"),
        (".hidden", "hidden"),
        ("team/.git", "hidden"),
        ("with space", "may only contain"),
        ("naïve", "may only contain"),
        ("a\\b", "may only contain"),
        ("a:b", "may only contain"),
        ("train.status", "must not end with '.status'"),
        ("team/x.status", "must not end with '.status'"),
    ],
)
def test_invalid_names(name: str, message: str) -> None:
    with pytest.raises(InvalidName, match=message):
        validate_name(name)


def test_invalid_name_is_a_value_error() -> None:
    assert issubclass(InvalidName, ValueError)


# --- scanning --------------------------------------------------------------------------------


def test_constructor_does_no_io(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    task_store = TaskStore(missing, status_dir=tmp_path / "status")
    assert task_store.root == missing
    assert not (tmp_path / "status").exists()
    with pytest.raises(FolderUnavailable):
        task_store.scan()


def test_scan_names_paths_and_hashes(root: Path) -> None:
    put(root, "train.yaml", spec_text("train"))
    put(root, "team-a/eval.yml", spec_text("eval", cpu=2))
    put(root, "team-a/deep/er/x.yaml", spec_text())
    entries = TaskStore(root).scan()
    assert sorted(entries) == ["team-a/deep/er/x", "team-a/eval", "train"]
    entry = entries["team-a/eval"]
    assert entry.path == root / "team-a/eval.yml"
    assert entry.task is not None and entry.task.spec.resources.cpu == 2
    assert entry.error is None
    assert entry.last_valid == entry.task
    assert entry.raw_hash == hashlib.sha256(spec_text("eval", cpu=2).encode()).hexdigest()


def test_scan_accepts_names_validate_name_would_refuse(root: Path) -> None:
    # The filesystem belongs to the user: listing must not hide their files.
    put(root, "with space.yaml", spec_text())
    put(root, "naïve.yaml", spec_text())
    assert sorted(TaskStore(root).scan()) == ["naïve", "with space"]


def test_invalid_file_is_an_entry_with_its_first_error(root: Path) -> None:
    put(root, "bad.yaml", INVALID)
    entry = TaskStore(root).scan()["bad"]
    assert entry.task is None and entry.last_valid is None
    assert entry.error is not None
    assert str(entry.error) == "bad.yaml:5:3: spec.priorty: unknown field"


def test_metadata_name_must_match_the_stem_in_subfolders(root: Path) -> None:
    put(root, "team/ok.yaml", spec_text("ok"))
    put(root, "team/full.yaml", spec_text("team/full"))
    entries = TaskStore(root).scan()
    assert entries["team/ok"].task is not None
    error = entries["team/full"].error
    assert error is not None
    assert error.message == 'metadata.name "team/full" must equal the file\'s stem "full"'


def test_yaml_and_yml_for_one_name_is_an_error_on_the_yaml_entry(root: Path) -> None:
    put(root, "a.yaml", spec_text())
    put(root, "a.yml", spec_text(cpu=2))
    entry = TaskStore(root).scan()["a"]
    assert entry.path == root / "a.yaml"
    assert entry.task is None
    assert entry.error is not None
    assert entry.error.message == "both a.yaml and a.yml define task a"


def test_oversized_file_is_invalid_without_being_read(root: Path) -> None:
    put(root, "big.yaml", spec_text() + "#" * MAX_FILE_BYTES)
    opened: list[object] = []
    # The one way the store reads a file: never called for an oversized one.
    entry = TaskStore(root, read_file=lambda *a: opened.append(a)).scan()["big"]
    assert opened == []
    assert entry.task is None and entry.raw_hash == ""
    assert entry.error is not None and "larger than the 1024 KiB limit" in entry.error.message


IGNORED = [
    ".hidden.yaml",
    ".git/config.yaml",
    ".rayqueue/state.yaml",
    "team/.cache/x.yaml",
    "a.yaml~",
    ".a.yaml.swp",
    "a.swp",
    "a.swx",
    "#a.yaml#",
    ".#a.yaml",
    "a.status.yaml",
    "team/b.status.yml",
    "README.md",
    "notes.txt",
    "yaml",
    ".yaml",
]


def test_ignored_files(root: Path) -> None:
    for rel in IGNORED:
        put(root, rel, spec_text())
    put(root, "kept.yaml", spec_text())
    assert list(TaskStore(root).scan()) == ["kept"]


def test_fifo_and_socket_are_ignored_without_being_opened(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    os.mkfifo(root / "pipe.yaml")  # opening this for reading would block forever
    monkeypatch.chdir(root)  # a relative socket path: AF_UNIX paths are limited to ~100 bytes
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind("sock.yaml")
        put(root, "real.yaml", spec_text())
        assert list(TaskStore(root).scan()) == ["real"]
    finally:
        server.close()


def test_read_spec_text_refuses_a_fifo(root: Path) -> None:
    os.mkfifo(root / "pipe.yaml")
    assert TaskStore(root).read_spec_text("pipe") is None


def test_symlink_outside_root_is_ignored_with_one_warning(
    root: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    outside = put(tmp_path, "outside/secret.yaml", spec_text())
    (root / "leak.yaml").symlink_to(outside)
    (root / "leakdir").symlink_to(outside.parent, target_is_directory=True)
    put(root, "ok.yaml", spec_text())
    task_store = TaskStore(root)
    with caplog.at_level(logging.WARNING, logger="rayqueue.store"):
        assert list(task_store.scan()) == ["ok"]
        assert list(task_store.scan()) == ["ok"]
    warnings = [r.getMessage() for r in caplog.records if "outside" in r.getMessage()]
    assert len(warnings) == 2  # one per link, not one per scan
    assert all(r.name == "rayqueue.store" for r in caplog.records)


def test_symlinks_inside_root_are_followed(root: Path) -> None:
    put(root, "real/a.yaml", spec_text())
    put(root, "b.yaml", spec_text(cpu=3))
    (root / "alias").symlink_to(root / "real", target_is_directory=True)
    (root / "c.yaml").symlink_to(root / "b.yaml")
    entries = TaskStore(root).scan()
    assert sorted(entries) == ["alias/a", "b", "c", "real/a"]
    assert entries["c"].task is not None and entries["c"].task.spec.resources.cpu == 3


def test_symlink_loop_terminates(root: Path, caplog: pytest.LogCaptureFixture) -> None:
    put(root, "d/a.yaml", spec_text())
    (root / "d" / "up").symlink_to(root, target_is_directory=True)
    with caplog.at_level(logging.WARNING, logger="rayqueue.store"):
        entries = TaskStore(root).scan()
    # d/up leads back to an ancestor (the root): not followed at all.
    assert sorted(entries) == ["d/a"]
    assert any("symlink loop" in r.getMessage() for r in caplog.records)


def test_root_symlink_swap_is_picked_up(tmp_path: Path) -> None:
    # git-sync: tasks -> .worktrees/v1, then atomically -> .worktrees/v2.
    put(tmp_path, "wt/v1/a.yaml", spec_text())
    put(tmp_path, "wt/v2/b.yaml", spec_text())
    link = tmp_path / "tasks"
    link.symlink_to(tmp_path / "wt/v1", target_is_directory=True)
    task_store = TaskStore(link)
    assert list(task_store.scan()) == ["a"]
    tmp_link = tmp_path / "tasks.new"
    tmp_link.symlink_to(tmp_path / "wt/v2", target_is_directory=True)
    os.replace(tmp_link, link)
    entries = task_store.scan()
    assert list(entries) == ["b"]
    assert entries["b"].path == link / "b.yaml"  # under the root as given, not resolved


@pytest.mark.parametrize("make", ["missing", "file", "dangling link"])
def test_folder_unavailable(tmp_path: Path, make: str) -> None:
    target = tmp_path / "tasks"
    if make == "file":
        target.write_text("not a folder")
    elif make == "dangling link":
        target.symlink_to(tmp_path / "gone")
    task_store = TaskStore(target)
    with pytest.raises(FolderUnavailable):
        task_store.scan()
    with pytest.raises(FolderUnavailable):
        task_store.read_statuses()


def deny(monkeypatch: pytest.MonkeyPatch, name: str, denied: Callable[[Any], bool]) -> None:
    """Make os.<name> raise PermissionError for matching paths (tests may run as root)."""
    real = getattr(os, name)

    def guarded(path: Any, *args: Any, **kwargs: Any) -> Any:
        if denied(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, name, guarded)


def test_unreadable_root_is_unavailable(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    put(root, "a.yaml", spec_text())
    deny(monkeypatch, "scandir", lambda p: os.fspath(p) == os.path.realpath(root))
    with pytest.raises(FolderUnavailable, match="unreadable"):
        TaskStore(root).scan()


def test_unreadable_subfolder_keeps_its_last_entries(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put(root, "team/a.yaml", spec_text())
    put(root, "b.yaml", spec_text())
    task_store = TaskStore(root)
    before = task_store.scan()
    deny(monkeypatch, "scandir", lambda p: os.fspath(p).endswith("/team"))
    after = task_store.scan()
    # A permissions hiccup must not look like a deletion (which would stop the job).
    assert sorted(after) == ["b", "team/a"]
    assert after["team/a"] is before["team/a"]


def test_unreadable_file_warns_and_keeps_its_last_entry(
    root: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    put(root, "a.yaml", spec_text())
    path = put(root, "b.yaml", spec_text())
    task_store = TaskStore(root)
    before = task_store.scan()
    put(root, "new.yaml", spec_text())
    bump_mtime(path)
    unreadable = ("b.yaml", "new.yaml")
    deny(monkeypatch, "open", lambda p: os.fspath(p).endswith(unreadable))
    with caplog.at_level(logging.WARNING, logger="rayqueue.store"):
        after = task_store.scan()
    assert sorted(after) == ["a", "b"]  # new.yaml was never read, so it is not listed yet
    assert after["b"] is before["b"]
    assert sum("cannot read" in r.getMessage() for r in caplog.records) == 2


def test_reparse_only_when_stat_changes(
    root: Path, count_parses: list[str], counting_parse: Callable[..., Task]
) -> None:
    paths = [put(root, f"t{i}.yaml", spec_text()) for i in range(5)]
    task_store = TaskStore(root, parse_task=counting_parse)
    first = task_store.scan()
    assert len(count_parses) == 5
    second = task_store.scan()
    assert len(count_parses) == 5  # nothing changed: nothing parsed
    assert all(second[n] is first[n] for n in first)
    bump_mtime(paths[0])
    task_store.scan()
    assert count_parses[5:] == ["t0.yaml"]
    paths[1].write_text(spec_text(cpu=22))  # new size
    third = task_store.scan()
    assert count_parses[6:] == ["t1.yaml"]
    task = third["t1"].task
    assert task is not None and task.spec.resources.cpu == 22
    replacement = put(root, "t2.new", spec_text(cpu=3))
    os.replace(replacement, paths[2])  # new inode (atomic save)
    task_store.scan()
    assert count_parses[7:] == ["t2.yaml"]


def test_last_valid_survives_a_broken_edit_but_not_a_deletion(root: Path) -> None:
    path = put(root, "job.yaml", spec_text(cpu=2))
    task_store = TaskStore(root)
    good = task_store.scan()["job"].task
    assert good is not None
    path.write_text(INVALID)
    bump_mtime(path)
    broken = task_store.scan()["job"]
    assert broken.task is None and broken.error is not None
    assert broken.last_valid == good  # a running job keeps going
    path.unlink()
    assert "job" not in task_store.scan()
    put(root, "job.yaml", INVALID)
    assert task_store.scan()["job"].last_valid is None  # a new task, with no history


def test_deleted_files_leave_the_cache(
    root: Path, count_parses: list[str], counting_parse: Callable[..., Task]
) -> None:
    path = put(root, "a.yaml", spec_text())
    task_store = TaskStore(root, parse_task=counting_parse)
    task_store.scan()
    path.unlink()
    assert task_store.scan() == {}
    put(root, "a.yaml", spec_text())
    assert list(task_store.scan()) == ["a"]
    assert count_parses == ["a.yaml", "a.yaml"]


def test_rescan_of_10k_unchanged_files_parses_nothing(
    tmp_path: Path, count_parses: list[str], counting_parse: Callable[..., Task]
) -> None:
    # Speed is measured in benchmarks/scale.py; here only the caching behaviour is checked.
    root = tmp_path / "tasks"
    for team in range(50):
        folder = root / f"team{team}"
        folder.mkdir(parents=True)
        for i in range(200):
            (folder / f"task{i}.yaml").write_text(spec_text(f"task{i}", cpu=1 + i % 4))
    task_store = TaskStore(root, parse_task=counting_parse)
    entries = task_store.scan()
    again = task_store.scan()
    assert len(entries) == 10_000 and all(e.task is not None for e in entries.values())
    assert len(count_parses) == 10_000
    assert len(again) == 10_000
    assert all(again[name] is entries[name] for name in entries)  # cached entries reused


# --- atomic writes ---------------------------------------------------------------------------


def test_write_atomic_creates_parents_and_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "c.yaml"
    write_atomic(target, b"one")
    write_atomic(target, b"two")
    assert target.read_bytes() == b"two"
    assert os.listdir(target.parent) == ["c.yaml"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_write_atomic_keeps_the_existing_mode(tmp_path: Path) -> None:
    target = tmp_path / "c.yaml"
    target.write_bytes(b"old")
    target.chmod(0o600)
    write_atomic(target, b"new")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_failed_write_leaves_the_old_file_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "c.yaml"
    target.write_bytes(b"old")

    def failing_replace(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", failing_replace)
    with pytest.raises(OSError, match="No space"):
        write_atomic(target, b"new")
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["c.yaml"]


def test_failed_write_of_a_new_file_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_fsync(fd: int) -> None:
        raise OSError(5, "I/O error")

    monkeypatch.setattr(atomic.os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="I/O error"):
        write_atomic(tmp_path / "new.yaml", b"data")
    assert os.listdir(tmp_path) == []


def test_temp_files_are_hidden_from_the_scan(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Look at the store while a write is in flight: the temp file must not be a task.
    seen: list[list[str]] = []
    real_replace = os.replace

    def spying_replace(src: Any, dst: Any) -> None:
        seen.append(sorted(TaskStore(root).scan()))
        assert Path(src).name.startswith(".")
        real_replace(src, dst)

    monkeypatch.setattr(atomic.os, "replace", spying_replace)
    write_atomic(root / "a.yaml", spec_text().encode())
    assert seen == [[]]
    assert list(TaskStore(root).scan()) == ["a"]


# --- specs through the API -------------------------------------------------------------------


def make_task(name: str | None = None, cpu: float = 1) -> Task:
    return Task.model_validate(
        {
            "apiVersion": "rayqueue/v1",
            "kind": "Task",
            "metadata": {"name": name} if name else {},
            "spec": TaskSpec(entrypoint="python x.py", resources=Resources(cpu=cpu)),
        }
    )


def test_write_read_and_delete_spec(root: Path) -> None:
    task_store = TaskStore(root)
    TaskService(task_store).create("team/job", dump_task(make_task("job")).encode())
    assert task_store.spec_path("team/job") == root / "team/job.yaml"
    assert task_store.scan()["team/job"].task == make_task("job")
    text = task_store.read_spec_text("team/job")
    assert text is not None and text.startswith(b"apiVersion: rayqueue/v1\n")
    assert task_store.delete_spec("team/job") is True
    assert task_store.read_spec_text("team/job") is None
    assert task_store.delete_spec("team/job") is False


def test_spec_path_prefers_an_existing_yml(root: Path) -> None:
    put(root, "a.yml", spec_text())
    task_store = TaskStore(root)
    assert task_store.spec_path("a") == root / "a.yml"
    assert task_store.spec_path("b") == root / "b.yaml"
    TaskService(task_store).put(
        "a",
        dump_task(make_task(cpu=4)).encode(),
        from_json=False,
        if_match=None,
        if_none_match=None,
    )
    assert not (root / "a.yaml").exists()
    entry = task_store.scan()["a"]
    assert entry.task is not None and entry.task.spec.resources.cpu == 4


def test_delete_spec_removes_both_spellings(root: Path) -> None:
    put(root, "a.yaml", spec_text())
    put(root, "a.yml", spec_text())
    task_store = TaskStore(root)
    assert task_store.delete_spec("a") is True
    assert os.listdir(root) == []


@pytest.mark.parametrize("name", ["../escape", "/abs", "a/../../b", ".hidden", "x.status"])
def test_spec_methods_validate_names(root: Path, name: str) -> None:
    task_store = TaskStore(root)
    for call in (
        lambda: task_store.spec_path(name),
        lambda: task_store.read_spec_text(name),
        lambda: task_store.delete_spec(name),
    ):
        with pytest.raises(InvalidName):
            call()


def test_spec_path_must_stay_inside_root(root: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (root / "out").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(InvalidName, match="outside the tasks folder"):
        TaskStore(root).spec_path("out/job")
    assert os.listdir(tmp_path / "elsewhere") == []


# --- status sidecars -------------------------------------------------------------------------


def test_status_path_beside_the_spec_or_in_status_dir(root: Path, tmp_path: Path) -> None:
    assert TaskStore(root).status_path("team/a") == root / "team/a.status.yaml"
    status_dir = tmp_path / "status"
    beside = TaskStore(root, status_dir=status_dir)
    assert beside.status_path("team/a") == status_dir / "team/a.status.yaml"
    # Scanned names may contain spaces; only path safety is enforced for sidecars.
    assert TaskStore(root).status_path("with space") == root / "with space.status.yaml"
    for bad in ("../x", "/x", "a//b", "a\x00"):
        with pytest.raises(InvalidName):
            TaskStore(root).status_path(bad)


def test_write_status_has_no_churn(root: Path) -> None:
    put(root, "a.yaml", spec_text())
    task_store = TaskStore(root)
    assert task_store.write_status("a", status()) is True
    path = root / "a.status.yaml"
    before = path.stat()
    assert task_store.write_status("a", status()) is False
    after = path.stat()
    assert (after.st_mtime_ns, after.st_ino) == (before.st_mtime_ns, before.st_ino)
    assert task_store.write_status("a", status(Phase.RUNNING)) is True
    assert task_store.read_statuses()["a"].status.phase is Phase.RUNNING


def test_write_status_compares_with_the_disk_not_only_the_cache(root: Path) -> None:
    TaskStore(root).write_status("a", status())
    fresh = TaskStore(root)  # empty cache, identical bytes on disk
    assert fresh.write_status("a", status()) is False
    path = root / "a.status.yaml"
    path.write_text("garbage")  # changed behind our back
    assert fresh.write_status("a", status()) is True
    assert fresh.read_statuses()["a"] == status()


def test_read_statuses_includes_orphans(root: Path) -> None:
    put(root, "a.yaml", spec_text())
    task_store = TaskStore(root)
    task_store.write_status("a", status())
    task_store.write_status("team/gone", status(Phase.RUNNING))
    assert not (root / "team" / "gone.yaml").exists()
    statuses = task_store.read_statuses()
    assert sorted(statuses) == ["a", "team/gone"]
    assert statuses["team/gone"].status.phase is Phase.RUNNING
    assert sorted(task_store.scan()) == ["a"]  # sidecars are never specs


def test_read_statuses_caches_by_stat(root: Path) -> None:
    writer = TaskStore(root)
    for i in range(3):
        writer.write_status(f"t{i}", status())
    calls: list[str] = []
    real = parse_status

    def counting(text: str | bytes, *, file: str = "<status>") -> TaskStatus:
        calls.append(file)
        return real(text, file=file)

    reader = TaskStore(root, parse_status=counting)
    assert len(reader.read_statuses()) == 3
    assert len(reader.read_statuses()) == 3
    assert len(calls) == 3
    reader.write_status("t0", status(Phase.RUNNING))  # updates the cache, no re-read needed
    assert reader.read_statuses()["t0"].status.phase is Phase.RUNNING
    assert len(calls) == 3


def test_unparsable_sidecar_counts_as_absent(root: Path, caplog: pytest.LogCaptureFixture) -> None:
    put(root, "a.status.yaml", "status: [this is not a status\n")
    put(root, "b.status.yaml", "")
    TaskStore(root).write_status("c", status())
    with caplog.at_level(logging.WARNING, logger="rayqueue.store"):
        statuses = TaskStore(root).read_statuses()
    assert list(statuses) == ["c"]
    assert sum("unreadable sidecar" in r.getMessage() for r in caplog.records) == 2


def test_unreadable_sidecar_keeps_its_last_status(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    task_store = TaskStore(root)
    task_store.write_status("a", status(Phase.RUNNING))
    assert list(task_store.read_statuses()) == ["a"]
    bump_mtime(root / "a.status.yaml")
    deny(monkeypatch, "open", lambda p: os.fspath(p).endswith("a.status.yaml"))
    # Losing the status of a running task would make the reconciler treat it as new.
    assert task_store.read_statuses()["a"].status.phase is Phase.RUNNING


def test_delete_status(root: Path) -> None:
    task_store = TaskStore(root)
    task_store.write_status("a", status())
    task_store.delete_status("a")
    task_store.delete_status("a")  # missing is fine
    assert not (root / "a.status.yaml").exists()
    assert task_store.read_statuses() == {}


def test_status_dir_mode(root: Path, tmp_path: Path) -> None:
    status_dir = tmp_path / "state" / "status"
    put(root, "team/a.yaml", spec_text())
    task_store = TaskStore(root, status_dir=status_dir)
    assert task_store.read_statuses() == {}  # not created yet: nothing written so far
    assert task_store.write_status("team/a", status()) is True
    assert (status_dir / "team" / "a.status.yaml").is_file()
    assert not (root / "team" / "a.status.yaml").exists()
    task_store.write_status("orphan", status())
    assert sorted(task_store.read_statuses()) == ["orphan", "team/a"]
    task_store.delete_status("team/a")
    assert not (status_dir / "team").exists()  # emptied folders of our tree are pruned
    assert status_dir.is_dir()
    assert list(task_store.read_statuses()) == ["orphan"]


def test_status_dir_inside_root_is_not_scanned(root: Path) -> None:
    put(root, "a.yaml", spec_text())
    task_store = TaskStore(root, status_dir=root / "status")
    task_store.write_status("a", status())
    put(root, "status/stray.yaml", spec_text())  # not a sidecar, but in our folder
    assert list(task_store.scan()) == ["a"]
    assert list(task_store.read_statuses()) == ["a"]


def test_spec_entry_is_frozen(root: Path) -> None:
    put(root, "a.yaml", spec_text())
    entry = TaskStore(root).scan()["a"]
    assert isinstance(entry, TaskInput)
    with pytest.raises(AttributeError):
        entry.name = "b"  # type: ignore[misc]


def test_an_unchanged_file_keeps_its_generation_and_an_edited_one_gets_a_new_one(
    root: Path,
) -> None:
    put(root, "a.yaml", spec_text())
    path = put(root, "b.yaml", spec_text())
    s = TaskStore(root)
    first = s.scan()
    assert first["a"].generation != first["b"].generation
    put(root, "b.yaml", spec_text(cpu=2))
    bump_mtime(path)
    second = s.scan()
    assert second["a"].generation == first["a"].generation
    assert second["b"].generation > max(first["a"].generation, first["b"].generation)
    assert s.scan({str(root / "a.yaml")})["a"].generation == first["a"].generation
    # Broken: a new generation, and the last valid task kept; broken again the same way
    # (read anew, equal content): a new read, so a new generation.
    put(root, "b.yaml", INVALID)
    bump_mtime(path)
    third = s.scan()["b"]
    assert third.task is None and third.last_valid is not None
    assert third.generation > second["b"].generation
    assert s.scan()["b"].generation == third.generation


def test_a_status_keeps_its_generation_until_it_is_written_or_read_anew(root: Path) -> None:
    s = TaskStore(root)
    s.write_status("a", status())
    s.write_status("b", status())
    statuses, generations = s.read_statuses_versioned()
    assert set(statuses) == {"a", "b"} and generations["a"] != generations["b"]
    assert s.read_statuses_versioned()[1] == generations  # read again from disk: unchanged
    assert s.read_statuses_versioned(cached=True)[1] == generations
    s.write_status("a", status(Phase.RUNNING))
    after = s.read_statuses_versioned(cached=True)[1]
    assert after["b"] == generations["b"] and after["a"] > generations["a"]
    # A deferred status has its generation at once; writing it out later keeps it.
    s.defer_status("b", status(message="moved"))
    deferred = s.read_statuses_versioned(cached=True)[1]["b"]
    assert deferred > after["a"]
    assert s.flush_statuses(10, 0.0) == 1
    assert s.read_statuses_versioned()[1]["b"] == deferred
    # Changed on disk by someone else: read anew, a new generation.
    sidecar = root / "a.status.yaml"
    sidecar.write_text(sidecar.read_text().replace("Running", "Queued"))
    bump_mtime(sidecar)
    assert s.read_statuses_versioned()[1]["a"] > deferred


def test_the_store_remembers_a_digest_of_each_sidecar_not_its_bytes(root: Path) -> None:
    task_store = TaskStore(root)
    task_store.write_status("a", status())
    remembered = task_store._statuses.sidecars["a"]
    assert len(remembered.digest) == 16 < len((root / "a.status.yaml").read_bytes())
    assert task_store.write_status("a", status()) is False  # still no identical rewrite
