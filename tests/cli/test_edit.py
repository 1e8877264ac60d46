"""delete, suspend, resume, set-priority, rerun: one field changes, comments survive."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reconciler.cli import edit
from specs.service import tasks as service
from specs.task.models import RESTARTED_AT
from specs.yamlio.parse import parse_task
from tests.cli.conftest import spec_text, write

COMMENTED = """\
# yaml-language-server: $schema=../specs/task.schema.json
# Train the model.
apiVersion: rayqueue/v1
kind: Task
metadata:
  labels: {team: vision}   # who to ask
spec:
  entrypoint: python train.py --epochs 3
  priority: 5              # urgent-ish
  resources:
    cpu: 2
    memory: 4Gi
"""


def task_of(path: Path):
    return parse_task(path.read_bytes(), file=path.name, expected_name=path.stem)


def changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    old, new = before.splitlines(), after.splitlines()
    return [(a, b) for a, b in zip(old, new, strict=False) if a != b]


def test_set_priority_edits_only_that_value(rq, tasks: Path) -> None:
    path = write(tasks, "train", COMMENTED)
    result = rq("set-priority", "train", "9")
    assert (result.code, result.out) == (0, "task/train configured\n")
    after = path.read_text()
    assert after == COMMENTED.replace("priority: 5 ", "priority: 9 ")
    assert rq("set-priority", "train", "9").out == "task/train unchanged\n"


def test_set_priority_rejects_out_of_range(rq, tasks: Path) -> None:
    write(tasks, "train", COMMENTED)
    result = rq("set-priority", "train", "10")
    assert result.code == 2
    assert "not in 0..9" in result.err
    assert rq("set-priority", "train", "high").code == 2


def test_suspend_and_resume(rq, tasks: Path) -> None:
    path = write(tasks, "train", COMMENTED)
    assert rq("suspend", "train").out == "task/train suspended\n"
    text = path.read_text()
    assert task_of(path).spec.suspend is True
    assert "# Train the model." in text and "# urgent-ish" in text
    assert rq("suspend", "train").out == "task/train unchanged\n"

    assert rq("resume", "train").out == "task/train resumed\n"
    assert path.read_text() == COMMENTED  # the key is removed again: the file is as it was
    assert rq("resume", "train").out == "task/train unchanged\n"


def test_suspend_many_with_one_missing(rq, tasks: Path) -> None:
    write(tasks, "a", spec_text())
    write(tasks, "b", spec_text())
    result = rq("suspend", "a", "nope", "b")
    assert result.code == 1
    assert result.out == "task/a suspended\ntask/b suspended\n"
    assert 'task "nope" not found' in result.err


def test_rerun_sets_restarted_at(rq, tasks: Path) -> None:
    path = write(tasks, "train", COMMENTED)
    before = task_of(path)
    assert rq("rerun", "train").out == "task/train restarted\n"
    after = task_of(path)
    stamp = after.metadata.annotations[RESTARTED_AT]
    when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    assert stamp.endswith("Z")
    assert abs(datetime.now(UTC) - when) < timedelta(seconds=5)
    assert after.spec_hash() != before.spec_hash()  # a new run
    assert after.spec == before.spec
    assert "# urgent-ish" in path.read_text()


def test_edit_refuses_an_invalid_file(rq, tasks: Path) -> None:
    path = write(tasks, "bad", spec_text().replace("priority: 0", "priorty: 1"))
    before = path.read_text()
    result = rq("suspend", "bad")
    assert result.code == 1
    assert "invalid" in result.err and "priorty" in result.err
    assert path.read_text() == before


def test_edit_retries_when_the_file_changes_underneath(
    tasks: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from specs.folder.store import TaskStore

    store = TaskStore(tasks)
    path = write(tasks, "train", COMMENTED)
    real_patch = service.patch_text
    calls = []

    def racing_patch(text, document, patch):
        calls.append(1)
        if len(calls) == 1:  # another writer lands between our read and our write
            path.write_text(COMMENTED.replace("cpu: 2", "cpu: 3"))
        return real_patch(text, document, patch)

    monkeypatch.setattr(service, "patch_text", racing_patch)
    assert edit.edit_spec(store, "train", {"spec": {"priority": 1}}, lambda t: False)
    task = task_of(path)
    assert (task.spec.priority, task.spec.resources.cpu) == (1, 3)  # both changes kept
    assert len(calls) == 2


def test_delete(rq, tasks: Path) -> None:
    write(tasks, "a", spec_text())
    write(tasks, "team/b", spec_text())
    result = rq("delete", "a", "team/b")
    assert (result.code, result.out) == (0, "task/a deleted\ntask/team/b deleted\n")
    assert not (tasks / "a.yaml").exists() and not (tasks / "team" / "b.yaml").exists()
    result = rq("delete", "a")
    assert result.code == 1
    assert 'task "a" not found' in result.err


def test_bad_names_are_refused(rq, tasks: Path) -> None:
    for command in (["delete", "../etc"], ["suspend", "/abs"], ["rerun", "a//b"]):
        result = rq(*command)
        assert result.code == 1, command
        assert "error:" in result.err
