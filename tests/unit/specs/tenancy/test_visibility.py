"""What each task may see of the others, as the team tokens file draws the folders: only
tokens that read their own folders limit it, only tokens that write some folders split the
tree into folders; the loop's planner options carry it."""

from __future__ import annotations

from pathlib import Path

import yaml

from reconciler.shell.loop.inputs import plan_options
from specs.settings.process import Settings
from specs.task.visibility import ANOTHER_FOLDER, EVERYTHING, Visibility
from specs.tenancy.access import hash_token, parse_tokens_file, visibility_of

ENTRIES = [
    {"name": "a", "role": "write", "folders": ["team-a"]},
    {"name": "b", "role": "write", "folders": ["team-b"], "read": "all"},
    {"name": "c-nlp", "role": "write", "folders": ["team-c/nlp"]},
    {"name": "audit", "role": "read", "folders": ["team-a", "team-c"], "read": "own"},
    {"name": "a-admin", "role": "admin", "folders": ["team-a"]},
    {"name": "platform", "role": "admin"},
]


def _document() -> bytes:
    tokens = [entry | {"sha256": hash_token(entry["name"] * 40)} for entry in ENTRIES]
    return yaml.safe_dump({"tokens": tokens}).encode()


def _visibility() -> Visibility:
    return visibility_of(entry.principal for entry in parse_tokens_file(_document(), "t.yaml"))


def test_only_read_own_tokens_limit_what_a_task_sees() -> None:
    seen = _visibility()
    assert seen.readers == (("team-a",), ("team-a", "team-c"), ("team-c/nlp",))
    assert not seen.sees("team-a/x", "team-b/y")  # a reads only team-a
    assert seen.sees("team-b/y", "team-a/x")  # b reads everything; no read-own token reads b
    assert seen.sees("team-c/z", "team-c/nlp/w")  # audit, its one reader, reads all of c
    assert not seen.sees("team-c/nlp/w", "team-c/z")  # c-nlp reads only team-c/nlp
    assert seen.sees("team-a/x", "team-a/sub/y")
    assert seen.name_for("team-a/x", "team-b/y") == ANOTHER_FOLDER
    assert seen.name_for("team-b/y", "team-a/x") == "team-a/x"


def test_a_folder_is_what_the_same_tokens_write() -> None:
    seen = _visibility()
    assert seen.same_folder("team-a/x", "team-a/deep/y")
    assert not seen.same_folder("team-a/x", "team-b/y")
    assert not seen.same_folder("team-c/nlp/x", "team-c/y")
    assert seen.same_folder("top-level", "other-top-level")


def test_without_team_tokens_every_task_sees_every_other(tmp_path: Path) -> None:
    assert plan_options(Settings(tasks_dir=tmp_path)).visibility == EVERYTHING
    assert EVERYTHING.sees("team-a/x", "team-b/y") and EVERYTHING.same_folder("a/x", "b/y")


def test_the_loop_reads_the_visibility_from_the_team_tokens_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens.yaml"
    path.write_bytes(_document())
    path.chmod(0o600)
    options = plan_options(Settings(tasks_dir=tmp_path, team_tokens=path))
    assert options.visibility == _visibility()
