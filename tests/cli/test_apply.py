"""`rayqueue apply`: validate everything first, then write atomically; kubectl's verbs."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from reconciler.cli.main import build_parser
from specs.yamlio.parse import parse_task
from tests.cli.conftest import snapshot, spec_text, write

TWO_TASKS = """\
apiVersion: rayqueue/v1
kind: Task
metadata: {name: first}
spec: {entrypoint: echo 1, resources: {cpu: 1}}
---
apiVersion: rayqueue/v1
kind: Task
metadata: {name: second, labels: {team: a}}
spec: {entrypoint: echo 2, priority: 4, resources: {cpu: 1}}
"""


def test_created_unchanged_configured(rq, tasks: Path, tmp_path: Path) -> None:
    source = write(tmp_path / "src", "train", spec_text(priority=3))
    result = rq("apply", "-f", str(source))
    assert (result.code, result.out) == (0, "task/train created\n")
    task = parse_task((tasks / "train.yaml").read_bytes(), file="train.yaml")
    assert task.spec.priority == 3

    before = snapshot(tasks)
    result = rq("apply", "-f", str(source))
    assert (result.code, result.out) == (0, "task/train unchanged\n")
    assert snapshot(tasks) == before  # no rewrite, so no wake-up and no mtime churn

    write(tmp_path / "src", "train", spec_text(priority=7))
    result = rq("apply", "-f", str(source))
    assert (result.code, result.out) == (0, "task/train configured\n")
    assert parse_task((tasks / "train.yaml").read_bytes(), file="t").spec.priority == 7


def test_explicit_default_and_name_are_unchanged(rq, tasks: Path, tmp_path: Path) -> None:
    write(tasks, "a", spec_text())
    # Same meaning, other text: priority 0 spelled out and metadata.name given.
    text = spec_text().replace("kind: Task", "kind: Task\nmetadata: {name: a}")
    source = write(tmp_path, "a", text)
    assert rq("apply", "-f", str(source)).out == "task/a unchanged\n"


def test_multi_document_file(rq, tasks: Path, tmp_path: Path) -> None:
    source = tmp_path / "bundle.yaml"
    source.write_text(TWO_TASKS)
    result = rq("apply", "-f", str(source))
    assert result.code == 0
    assert result.out == "task/first created\ntask/second created\n"
    assert sorted(p.name for p in tasks.iterdir()) == ["first.yaml", "second.yaml"]


def test_namespace_puts_tasks_in_a_subfolder(rq, tasks: Path, tmp_path: Path) -> None:
    source = tmp_path / "bundle.yaml"
    source.write_text(TWO_TASKS)
    result = rq("apply", "-f", str(source), "-n", "team-a")
    assert result.out == "task/team-a/first created\ntask/team-a/second created\n"
    assert (tasks / "team-a" / "first.yaml").is_file()


def test_nothing_is_written_if_any_document_is_invalid(rq, tasks: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    write(src, "good", spec_text())
    write(src, "bad", spec_text().replace("priority: 0", "priorty: 3"))
    result = rq("apply", "-f", str(src))
    assert result.code == 1
    assert result.out == ""
    assert f"{src / 'bad.yaml'}:" in result.err
    assert "spec.priorty: unknown field" in result.err
    assert "nothing was applied" in result.err
    assert list(tasks.iterdir()) == []


def test_invalid_document_in_a_bundle_blocks_the_rest(rq, tasks: Path, tmp_path: Path) -> None:
    source = tmp_path / "bundle.yaml"
    source.write_text(TWO_TASKS.replace("priority: 4", "priority: 12"))
    result = rq("apply", "-f", str(source))
    assert result.code == 1
    assert ":9:" in result.err and "spec.priority" in result.err
    assert list(tasks.iterdir()) == []


def test_bundle_documents_need_names(rq, tmp_path: Path) -> None:
    source = tmp_path / "bundle.yaml"
    source.write_text(spec_text() + "---\n" + spec_text())
    result = rq("apply", "-f", str(source))
    assert result.code == 1
    assert "metadata.name: required field is missing" in result.err


def test_duplicate_names_across_files(rq, tasks: Path, tmp_path: Path) -> None:
    write(tmp_path / "one", "x", spec_text())
    write(tmp_path / "two", "x", spec_text())
    result = rq("apply", "-f", str(tmp_path / "one"), "-f", str(tmp_path / "two"))
    assert result.code == 1
    assert "task x is also defined in" in result.err
    assert list(tasks.iterdir()) == []


def test_bad_task_name(rq, tasks: Path, tmp_path: Path) -> None:
    write(tmp_path, "has space", spec_text())
    result = rq("apply", "-f", str(tmp_path / "has space.yaml"))
    assert result.code == 1
    assert "may only contain" in result.err
    assert list(tasks.iterdir()) == []


def test_stdin(rq, tasks: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = spec_text().replace("kind: Task", "kind: Task\nmetadata: {name: piped}")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    result = rq("apply", "-f", "-")
    assert (result.code, result.out) == (0, "task/piped created\n")
    assert (tasks / "piped.yaml").is_file()


def test_stdin_needs_a_name(rq, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(spec_text().encode())))
    result = rq("apply", "-f", "-")
    assert result.code == 1
    assert "<stdin>" in result.err and "metadata.name" in result.err


def test_directory_recursive_keeps_subfolders(rq, tasks: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    write(src, "top", spec_text())
    write(src, "team-b/nested", spec_text())
    (src / "top.status.yaml").write_text("not a spec")  # sidecars are skipped
    (src / ".hidden.yaml").write_text("not a spec")
    assert rq("apply", "-f", str(src)).out == "task/top created\n"
    result = rq("apply", "-f", str(src), "-R")
    assert result.out == "task/team-b/nested created\ntask/top unchanged\n"
    assert (tasks / "team-b" / "nested.yaml").is_file()


def test_dry_run_writes_nothing(rq, tasks: Path, tmp_path: Path) -> None:
    source = write(tmp_path, "train", spec_text())
    result = rq("apply", "-f", str(source), "--dry-run")
    assert (result.code, result.out) == (0, "task/train created (dry run)\n")
    assert list(tasks.iterdir()) == []


def test_creates_a_missing_folder(rq, tmp_path: Path) -> None:
    source = write(tmp_path, "train", spec_text())
    folder = tmp_path / "new" / "tasks"
    result = rq("apply", "-f", str(source), folder=folder)
    assert result.code == 0
    assert (folder / "train.yaml").is_file()
    assert "created the tasks folder" in result.err


def test_missing_file(rq, tmp_path: Path) -> None:
    result = rq("apply", "-f", str(tmp_path / "nope.yaml"))
    assert result.code == 1
    assert "does not exist" in result.err


def test_rayqueue_dir_environment(rq, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "from-env"
    folder.mkdir()
    monkeypatch.setenv("RAYQUEUE_DIR", str(folder))
    source = write(tmp_path, "train", spec_text())
    assert rq("apply", "-f", str(source), folder=None).code == 0
    assert (folder / "train.yaml").is_file()


def test_dir_before_the_command(rq, tasks: Path, tmp_path: Path) -> None:
    source = write(tmp_path, "train", spec_text())
    assert rq("--dir", str(tasks), "apply", "-f", str(source), folder=None).code == 0
    assert (tasks / "train.yaml").is_file()


def test_filename_is_required(rq) -> None:
    result = rq("apply")
    assert result.code == 2
    assert "-f" in result.err


COMMENTED = """\
# Nightly training run: owned by team a.
kind: Task
apiVersion: rayqueue/v1
spec:
  priority: 3  # above the default
  entrypoint: python train.py
  resources: {cpu: 1}
"""


def test_writes_the_document_as_given(rq, tasks: Path, tmp_path: Path) -> None:
    # Comments, key order and flow style survive: the file in the folder is the user's file.
    source = write(tmp_path, "train", COMMENTED)
    assert rq("apply", "-f", str(source)).out == "task/train created\n"
    assert (tasks / "train.yaml").read_bytes() == source.read_bytes()

    changed = COMMENTED.replace("priority: 3", "priority: 5")
    source.write_text(changed)
    assert rq("apply", "-f", str(source)).out == "task/train configured\n"
    assert (tasks / "train.yaml").read_text() == changed


def test_a_bundle_is_cut_into_its_documents(rq, tasks: Path, tmp_path: Path) -> None:
    first = "# the first\napiVersion: rayqueue/v1\nkind: Task\nmetadata: {name: first}\n"
    first += "spec: {entrypoint: echo 1, resources: {cpu: 1}}  # small\n"
    second = "--- # the second\nkind: Task\napiVersion: rayqueue/v1\n"
    second += "metadata:\n  name: second\nspec:\n  entrypoint: |\n    echo 2\n"
    second += "  resources: {cpu: 1}\n"
    source = tmp_path / "bundle.yaml"
    source.write_text(first + second + "---\n")
    result = rq("apply", "-f", str(source), "-n", "team-a")
    assert result.out == "task/team-a/first created\ntask/team-a/second created\n"
    assert (tasks / "team-a" / "first.yaml").read_text() == first
    assert (tasks / "team-a" / "second.yaml").read_text() == second


def test_an_unchanged_gitops_folder_writes_nothing(rq, tasks: Path, tmp_path: Path) -> None:
    src = tmp_path / "repo"
    write(src, "top", COMMENTED)
    write(src, "team-b/nested", spec_text())
    assert rq("apply", "-f", str(src), "-R").code == 0
    before = snapshot(tasks)
    # Only a comment changed: the same task, so the folder is left alone (no mtime change).
    write(src, "top", COMMENTED.replace("# Nightly", "# Nightly (reviewed)"))
    result = rq("apply", "-f", str(src), "-R")
    assert result.out == "task/team-b/nested unchanged\ntask/top unchanged\n"
    assert snapshot(tasks) == before


def test_a_concurrent_edit_is_not_overwritten(
    rq, tasks: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from specs.service.tasks import TaskService

    write(tasks, "train", COMMENTED)
    source = write(tmp_path, "train", COMMENTED.replace("priority: 3", "priority: 7"))
    real_read = TaskService.read
    raced: list[str] = []

    def read_then_race(self: TaskService, name: str):  # type: ignore[no-untyped-def]
        seen = real_read(self, name)
        if not raced:  # right after apply's first look: the API suspends the task
            raced.append(name)
            TaskService(self.store).patch(name, {"spec": {"suspend": True}})
        return seen

    monkeypatch.setattr(TaskService, "read", read_then_race)
    result = rq("apply", "-f", str(source))
    assert result.code == 1
    assert "task train changed while it was being applied" in result.err
    task = parse_task((tasks / "train.yaml").read_bytes(), file="train.yaml")
    assert (task.spec.suspend, task.spec.priority) == (True, 3)  # the API's edit stands


def test_apply_wakes_a_loop_through_the_service(
    rq, tasks: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reconciler.cli import apply, common
    from specs.service.tasks import TaskService

    woken = []
    monkeypatch.setattr(
        apply,
        "open_service",
        lambda args: TaskService(common.open_store(args), on_write=lambda: woken.append(1)),
    )
    source = write(tmp_path, "train", spec_text())
    assert rq("apply", "-f", str(source)).code == 0
    assert rq("apply", "-f", str(source)).out == "task/train unchanged\n"
    assert woken == [1]  # one write, one wake-up; the unchanged apply wrote nothing


def test_dry_run_into_a_missing_folder_claims_to_create_nothing(rq, tmp_path: Path) -> None:
    source = write(tmp_path, "train", spec_text())
    folder = tmp_path / "new" / "tasks"
    result = rq("apply", "-f", str(source), "--dry-run", folder=folder)
    assert (result.code, result.out) == (0, "task/train created (dry run)\n")
    assert "would create the tasks folder" in result.err
    assert "created the tasks folder" not in result.err and not (tmp_path / "new").exists()


def test_the_help_epilog_applies_the_examples_with_their_subfolders() -> None:
    # Without -R, apply skips examples/tasks/team-a/preprocess.yaml.
    assert "rayqueue apply -f examples/tasks/ -R" in build_parser().format_help()
