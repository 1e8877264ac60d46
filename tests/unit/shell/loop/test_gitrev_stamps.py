"""git's stamps (HEAD, index, the branch's ref) read with plain os calls (the loop reads them
every pass): a linked worktree's branch, kept in the main repository, is followed there."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.shell.loop.gitrev import GitRevisions, find_work_tree
from tests.unit.shell.loop.test_gitrev import git, repo

__all__ = ["repo"]  # the fixture, used by name


def test_a_linked_worktree_on_a_branch_sees_its_branch_move_in_the_main_repository(
    repo: Path, tmp_path: Path
) -> None:
    first = git(repo, "rev-parse", "HEAD")
    (repo / "tasks" / "a.yaml").write_text("a: 2\n")
    git(repo, "commit", "-q", "-am", "second")
    second = git(repo, "rev-parse", "HEAD")
    worktree = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "-b", "feature", str(worktree), first)
    assert find_work_tree(worktree / "tasks" / "team") == worktree
    revisions = GitRevisions(worktree / "tasks")
    before = revisions.current(1)
    assert before is not None and before.revision == f"feature@sha1:{first}"
    assert revisions.current(1) is before and revisions.calls == 1
    # Only the branch's ref moves, and it lives in the main repository (commondir).
    git(repo, "update-ref", "refs/heads/feature", second)
    after = revisions.current(1)
    assert revisions.calls == 2
    assert after is not None and after.revision == f"feature@sha1:{second}"


def test_a_folder_given_relative_is_found_from_the_working_directory(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo / "tasks")
    assert find_work_tree(Path("team")) == repo
    assert find_work_tree(Path("../tasks/../tasks")) == repo
