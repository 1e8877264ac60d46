"""The git revision of the tasks folder: Flux's form, dirty files, and few git calls."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from reconciler.shell.loop.gitrev import GitRevisions, find_work_tree, flux_revision, parse_status

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="no git binary")


def git(repo: Path, *args: str) -> str:
    env_args = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    done = subprocess.run(
        ["git", *env_args, "-C", str(repo), *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("no git binary")
    root = tmp_path / "repo"
    (root / "tasks" / "team").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "tasks" / "a.yaml").write_text("a: 1\n")
    (root / "tasks" / "team" / "b.yaml").write_text("b: 1\n")
    (root / "README").write_text("x\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    return root


def test_flux_form() -> None:
    sha = "a" * 40
    assert flux_revision("main", sha) == f"main@sha1:{sha}"
    assert flux_revision("(detached)", sha) == f"sha1:{sha}"
    assert flux_revision(None, sha) == f"sha1:{sha}"


@pytest.mark.parametrize(
    ("entries", "prefix", "changed"),
    [
        ([], "", set()),
        (["1 .M N... 100644 100644 100644 abc abc tasks/a.yaml"], "tasks/", {"a.yaml"}),
        (["1 .M N... 100644 100644 100644 abc abc other/a.yaml"], "tasks/", set()),
        (["? tasks/new file.yaml"], "tasks/", {"new file.yaml"}),
        (
            ["2 R. N... 100644 100644 100644 abc abc R100 tasks/b.yaml", "tasks/a.yaml"],
            "",
            {"tasks/b.yaml"},
        ),
        (["u UU N... 100644 100644 100644 100644 a b c tasks/c.yaml"], "tasks/", {"c.yaml"}),
    ],
)
def test_parse_status_entries(entries: list[str], prefix: str, changed: set[str]) -> None:
    sha = "0123456789abcdef0123456789abcdef01234567"
    head = [f"# branch.oid {sha}", "# branch.head main", "# branch.upstream origin/main"]
    parsed = parse_status("\0".join([*head, *entries, ""]).encode(), prefix)
    assert parsed == (sha, "main", frozenset(changed))


def test_parse_status_of_an_empty_repository() -> None:
    assert parse_status(b"# branch.oid (initial)\0# branch.head main\0", "") is None


def test_outside_a_work_tree_there_is_no_revision(tmp_path: Path) -> None:
    (tmp_path / "tasks").mkdir()
    assert find_work_tree(tmp_path / "tasks") is None  # pytest's temp folders are not in git
    revisions = GitRevisions(tmp_path / "tasks")
    assert revisions.current(1) is None
    assert revisions.calls == 0


def test_a_missing_git_binary_is_no_error(repo: Path) -> None:
    revisions = GitRevisions(repo / "tasks", git=str(repo / "no-such-git"))
    assert revisions.current(1) is None


def test_revision_and_dirty_files(repo: Path) -> None:
    sha = git(repo, "rev-parse", "HEAD")
    revisions = GitRevisions(repo / "tasks")
    source = revisions.current(1)
    assert source is not None
    assert source.revision == f"main@sha1:{sha}"
    assert source.of("a.yaml") == (f"main@sha1:{sha}", False)
    (repo / "tasks" / "a.yaml").write_text("a: 2\n")
    (repo / "tasks" / "new.yaml").write_text("n: 1\n")
    (repo / "README").write_text("changed outside the tasks folder\n")
    source = revisions.current(2)
    assert source is not None
    assert source.dirty == {"a.yaml", "new.yaml"}
    assert source.of("team/b.yaml")[1] is False


def test_git_runs_only_when_the_specs_or_git_change(repo: Path) -> None:
    revisions = GitRevisions(repo / "tasks")
    first = revisions.current("fingerprint-1")
    for _ in range(5):
        assert revisions.current("fingerprint-1") is first
    assert revisions.calls == 1
    (repo / "tasks" / "a.yaml").write_text("a: 2\n")
    git(repo, "commit", "-q", "-am", "second")  # HEAD moves; the spec files read did not change
    second = revisions.current("fingerprint-1")
    assert revisions.calls == 2
    assert second is not None and first is not None and second.revision != first.revision
    assert second.revision == f"main@sha1:{git(repo, 'rev-parse', 'HEAD')}"
    revisions.current("fingerprint-2")
    assert revisions.calls == 3


def test_git_sync_symlinked_detached_worktree(repo: Path, tmp_path: Path) -> None:
    sha = git(repo, "rev-parse", "HEAD")
    worktree = tmp_path / "worktrees" / sha
    git(repo, "worktree", "add", "-q", "--detach", str(worktree), sha)
    link = tmp_path / "current"
    link.symlink_to(worktree)  # git-sync points a symlink at the checked-out worktree
    revisions = GitRevisions(link / "tasks")
    source = revisions.current(1)
    assert source is not None
    assert source.revision == f"sha1:{sha}"
    assert source.dirty == frozenset()
    # git-sync swaps the link to a new worktree of a new commit: a new answer, one more call.
    (repo / "tasks" / "a.yaml").write_text("a: 3\n")
    git(repo, "commit", "-q", "-am", "third")
    new_sha = git(repo, "rev-parse", "HEAD")
    new_tree = tmp_path / "worktrees" / new_sha
    git(repo, "worktree", "add", "-q", "--detach", str(new_tree), new_sha)
    link.unlink()
    link.symlink_to(new_tree)
    source = revisions.current(1)
    assert source is not None and source.revision == f"sha1:{new_sha}"
