"""The loop records each run's git commit: in the sidecar (status.source) and in Ray's metadata."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from specs.cluster import META_REVISION
from tests.support.specs import write_task
from tests.support.world import World


def git(repo: Path, *args: str) -> str:
    ident = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    done = subprocess.run(
        ["git", *ident, "-C", str(repo), *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("no git binary")
    root = tmp_path / "repo"
    (root / "tasks").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / ".gitignore").write_text("*.status.yaml\n.rayqueue/\n")
    write_task(root / "tasks", "a")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a")
    return root


def test_each_run_records_its_commit_in_status_and_ray(repo: Path) -> None:
    w = World.build(repo / "tasks")
    sha = git(repo, "rev-parse", "HEAD")
    w.step()
    status = w.status("a")
    assert status["source"] == {"revision": f"main@sha1:{sha}"}  # dirty: false is left out
    (request,) = w.ray.submitted
    assert request.metadata[META_REVISION] == f"main@sha1:{sha}"
    # An uncommitted edit of a run-defining field: a new run, from a dirty file.
    write_task(repo / "tasks", "a", entrypoint="echo changed")
    w.step(3)
    status = w.status("a")
    assert status["run"] == 2
    assert status["source"] == {"revision": f"main@sha1:{sha}", "dirty": True}
    assert w.ray.submitted[-1].metadata[META_REVISION] == f"main@sha1:{sha}"


def test_a_new_commit_does_not_rewrite_a_started_run(repo: Path) -> None:
    w = World.build(repo / "tasks")
    w.step()
    first = w.status("a")["source"]
    git(repo, "commit", "-q", "--allow-empty", "-m", "unrelated")
    w.step(2)
    assert w.status("a")["source"] == first


def test_git_is_asked_once_while_nothing_changes(repo: Path) -> None:
    w = World.build(repo / "tasks")
    w.step(10)
    revisions = w.reconciler.revisions
    assert revisions is not None and revisions.calls == 1
    write_task(repo / "tasks", "b")
    w.step(3)
    assert revisions.calls == 2


def test_outside_git_and_switched_off_there_is_no_source(tmp_path: Path, repo: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    write_task(plain, "a")
    w = World.build(plain)
    w.step()
    assert "source" not in w.status("a")
    off = World.build(repo / "tasks", git_revision=False)
    off.step()
    assert "source" not in off.status("a")
    assert META_REVISION not in off.ray.submitted[0].metadata
