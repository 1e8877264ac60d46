"""Which commit a spec file came from, when the tasks folder is inside a git work tree.

The revision is written as Flux writes it: `main@sha1:<40 hex>` on a branch, `sha1:<40 hex>`
on a detached HEAD (git-sync checks out detached worktrees). A file is `dirty` if it differs
from that commit (modified, staged, or not in git at all).

Cost: one `git status` at most per pass, and only when something it depends on changed: the
spec files the store read (the caller passes a fingerprint), or git's own HEAD, ref or index
(a few stat calls, no subprocess). Outside a work tree, or with no `git` binary, there is no
revision and never an error.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("rayqueue.gitrev")

GIT_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class SourceRevision:
    """The commit checked out, and the spec paths (relative to the tasks folder) that differ."""

    revision: str
    dirty: frozenset[str]

    def of(self, relative_path: str) -> tuple[str, bool]:
        return self.revision, relative_path in self.dirty


def find_work_tree(folder: Path) -> Path | None:
    """The top of the work tree holding `folder` (a `.git` folder, or the `.git` file of a
    linked worktree such as git-sync's), following symlinks; None outside one."""
    top = _work_tree(os.fspath(folder))
    return Path(top) if top is not None else None


# os.path, not pathlib, below: the loop asks these every pass, still ones too, and pathlib's
# objects make each look-up of the work tree and git's stamps several times dearer.
def _work_tree(folder: str) -> str | None:
    candidate = os.path.realpath(folder)
    while True:
        if os.path.exists(os.path.join(candidate, ".git")):
            return candidate
        parent = os.path.dirname(candidate)
        if parent == candidate:
            return None
        candidate = parent


def git_dir_of(top: str) -> str | None:
    """The repository folder of a work tree: `.git` itself, or where a `.git` file points."""
    dot_git = os.path.join(top, ".git")
    if os.path.isdir(dot_git):
        return dot_git
    text = _read_text(dot_git)
    if text is None or not text.startswith("gitdir:"):
        return None
    target = text.removeprefix("gitdir:").strip()
    return target if os.path.isabs(target) else os.path.realpath(os.path.join(top, target))


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def flux_revision(branch: str | None, sha: str) -> str:
    """`<branch>@sha1:<sha>`, or `sha1:<sha>` when no branch is checked out."""
    if not branch or branch == "(detached)":
        return f"sha1:{sha}"
    return f"{branch}@sha1:{sha}"


def parse_status(output: bytes, prefix: str) -> tuple[str, str | None, frozenset[str]] | None:
    """`git status --porcelain=v2 --branch -z` as (sha, branch, changed paths under `prefix`,
    relative to it). None if HEAD has no commit yet. `prefix` is the tasks folder's path inside
    the repository, with a trailing slash, or "" at the top."""
    sha: str | None = None
    branch: str | None = None
    changed: set[str] = set()
    fields = output.split(b"\0")
    index = 0
    while index < len(fields):
        entry = fields[index].decode(errors="surrogateescape")
        index += 1
        if not entry:
            continue
        if entry.startswith("# branch.oid "):
            value = entry.removeprefix("# branch.oid ")
            sha = value if value != "(initial)" else None
        elif entry.startswith("# branch.head "):
            branch = entry.removeprefix("# branch.head ")
        elif entry.startswith("#"):
            continue
        else:
            kind = entry[0]
            # Paths are the last field: after 8 fields for "1", 9 for "2" (plus the original
            # path in the next NUL field, which we skip), 10 for "u", 1 for "?" and "!".
            if kind == "1":
                path = entry.split(" ", 8)[8]
            elif kind == "2":
                path = entry.split(" ", 9)[9]
                index += 1
            elif kind == "u":
                path = entry.split(" ", 10)[10]
            elif kind in "?!":
                path = entry[2:]
            else:
                continue
            if path.startswith(prefix):
                changed.add(path[len(prefix) :])
    if sha is None:
        return None
    return sha, branch, frozenset(changed)


class GitRevisions:
    """Answers `current(fingerprint)` for one tasks folder, calling git only when needed."""

    def __init__(self, folder: Path, *, git: str | None = None) -> None:
        self.folder = folder
        self._git = git if git is not None else shutil.which("git")
        self._key: tuple[object, ...] | None = None
        self._value: SourceRevision | None = None
        self.calls = 0  # git subprocesses run so far; for tests and benchmarks
        self._warned = False

    def current(self, fingerprint: Hashable) -> SourceRevision | None:
        """The revision now. `fingerprint` changes whenever the spec files read change."""
        top = _work_tree(os.fspath(self.folder))
        if top is None or self._git is None:
            self._key, self._value = None, None
            return None
        key = (fingerprint, top, *self._git_stamps(top))
        if key == self._key:
            return self._value
        self._key, self._value = key, self._ask_git(Path(top))
        return self._value

    def _git_stamps(self, top: str) -> tuple[object, ...]:
        """What changes with a commit, a checkout or a `git add`, read with stat calls only."""
        git_dir = git_dir_of(top)
        if git_dir is None:
            return ()
        stamps: list[object] = []
        head_text = _read_text(os.path.join(git_dir, "HEAD")) or ""
        stamps.append(head_text)
        paths = [os.path.join(git_dir, "index")]
        if head_text.startswith("ref: "):
            ref = head_text.removeprefix("ref: ")
            paths.append(os.path.join(git_dir, ref))
            common = _common_dir(git_dir)
            paths.append(os.path.join(common, ref))
            paths.append(os.path.join(common, "packed-refs"))
        for path in paths:
            try:
                st = os.stat(path)
                stamps.append((st.st_mtime_ns, st.st_size, st.st_ino))
            except OSError:
                stamps.append(None)
        return tuple(stamps)

    def _ask_git(self, top: Path) -> SourceRevision | None:
        folder = self.folder.resolve()
        try:
            relative = folder.relative_to(top).as_posix()
        except ValueError:
            return None
        prefix = "" if relative == "." else relative + "/"
        # Read-only: no index refresh written back (a checkout may be read-only, and git-sync
        # may be swapping it), and no fsmonitor hook run from the repository's config.
        env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
        self.calls += 1
        assert self._git is not None
        try:
            done = subprocess.run(
                [
                    self._git,
                    "-c",
                    "core.fsmonitor=false",
                    "-C",
                    str(folder),
                    "status",
                    "--porcelain=v2",
                    "--branch",
                    "-z",
                    "--untracked-files=all",
                    "--no-renames",
                    "--",
                    ".",
                ],
                capture_output=True,
                timeout=GIT_TIMEOUT_SECONDS,
                env=env,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            self._warn(f"git status failed: {exc}")
            return None
        if done.returncode != 0:
            self._warn(done.stderr.decode(errors="replace").strip() or f"exit {done.returncode}")
            return None
        parsed = parse_status(done.stdout, prefix)
        if parsed is None:
            return None  # a repository without a commit yet
        sha, branch, changed = parsed
        return SourceRevision(flux_revision(branch, sha), changed)

    def _warn(self, message: str) -> None:
        # Once: the same cause (a "dubious ownership" refusal, say) would repeat every change.
        if not self._warned:
            log.warning("no git revision for %s: %s", self.folder, message)
            self._warned = True


def _common_dir(git_dir: str) -> str:
    """A linked worktree keeps branches in the main repository (its `commondir` file)."""
    text = _read_text(os.path.join(git_dir, "commondir"))
    if text is None:
        return git_dir
    return text if os.path.isabs(text) else os.path.realpath(os.path.join(git_dir, text))
