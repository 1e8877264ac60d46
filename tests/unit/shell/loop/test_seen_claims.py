"""The loop's own record of when it first saw each explicit id claim: kept in its state
folder across restarts, kept while a broken file's last valid spec names the id, seen anew
when the id changes, forgotten with the task."""

from __future__ import annotations

from pathlib import Path

from reconciler.shell.loop.seenclaims import SeenClaims
from specs.task.errors import SpecError
from specs.task.inputs import TaskInput
from specs.task.submission_ids import SeenClaim
from tests.support.planner_world import task


def _claim(name: str, sid: str) -> TaskInput:
    t = task(submissionId=sid)
    return TaskInput(name, t, None, t)


def test_a_claim_keeps_the_time_it_was_first_seen_across_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "state" / "id_claims.json"
    book = SeenClaims(path)
    specs = {"team-b/train": _claim("team-b/train", "b-train")}
    assert book.update(specs, set(), 10.0) == {"team-b/train": SeenClaim("b-train", 10.0)}
    specs["team-a/squat"] = _claim("team-a/squat", "b-train")
    seen = book.update(specs, {"team-a/squat"}, 20.0)
    assert seen["team-b/train"].at == 10.0 and seen["team-a/squat"].at == 20.0
    # A new loop reads the record back: its first pass looks at every task, and keeps both.
    again = SeenClaims(path)
    assert again.update(specs, set(), 99.0) == seen


def test_a_broken_file_keeps_its_claim_a_renamed_id_is_seen_anew_a_deleted_task_forgets() -> None:
    book = SeenClaims(None)
    t = task(submissionId="b-train")
    book.update({"b": TaskInput("b", t, None, t)}, set(), 1.0)
    broken = TaskInput("b", None, SpecError.unplaced("bad yaml"), t)
    assert book.update({"b": broken}, {"b"}, 2.0) == {"b": SeenClaim("b-train", 1.0)}
    assert book.update({"b": _claim("b", "other")}, {"b"}, 3.0) == {"b": SeenClaim("other", 3.0)}
    assert book.update({}, {"b"}, 4.0) == {}


def test_an_unreadable_record_is_started_afresh(tmp_path: Path) -> None:
    path = tmp_path / "id_claims.json"
    path.write_text("{not json")
    book = SeenClaims(path)
    assert book.update({"a": _claim("a", "x")}, set(), 5.0) == {"a": SeenClaim("x", 5.0)}
    assert SeenClaims(path).update({"a": _claim("a", "x")}, set(), 6.0)["a"].at == 5.0
