"""Local paths in a spec's runtimeEnv: which fields name them, and where they may point.

When rayqueue submits a job, Ray's client in this process reads some runtime_env fields from
this machine's disk: it zips a local `working_dir` and each local `py_modules` entry and
uploads them to the cluster, and it reads a `pip`/`uv` requirements file and a `conda` YAML
file (ray/dashboard/modules/job/sdk.py, ray/_private/runtime_env/validation.py, Ray 2.60). A
spec naming `/etc/rayqueue` would hand the scheduler's own files to the job. So, once
confinement is on (team tokens, or at least one --working-dir-root), such a path is accepted
only if, symlinks resolved, it lies under one of the roots that apply to its writer, and never
if it is, holds or lies inside the tasks, status or state folder, or is or holds a token file.
Ray zips a directory following the symlinks inside it, so those are checked too.

Remote URIs (https://, s3://, gs://, gcs://, ...) read nothing here and are always fine.
`file://` and `local://` name paths on a node, which with a local head is this machine: their
path is checked like any other.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specs.settings.process import Settings
from specs.task.records import Task
from specs.tenancy.access import SINGLE_TOKEN_NAME, Principal, Tokens
from specs.yamlio.parse import Problem

# Schemes Ray fetches from elsewhere (ray/_common/runtime_env_uri.py, less `file`).
REMOTE_SCHEMES = frozenset({"http", "https", "s3", "gs", "gcs", "azure", "abfss"})
# Paths on a node: with a local Ray head, on this machine.
NODE_SCHEMES = frozenset({"file", "local"})
# Fields whose value is a URI or a local path (a list of them for the last two).
_URI_OR_PATH = ("working_dir",)
_URI_OR_PATH_LISTS = ("py_modules", "java_jars")
# A tree bigger than this is refused rather than walked on every check (Ray's own package
# limit, 500 MiB, is reached long before by real code folders).
MAX_TREE_ENTRIES = 100_000

Loc = tuple[str | int, ...]
RUNTIME_ENV: Loc = ("spec", "runtimeEnv")


@dataclass(frozen=True)
class PathProblem:
    """One refused runtimeEnv value. `forbidden`: outside what this writer may name (HTTP
    403); otherwise the value is malformed (422)."""

    loc: Loc  # from the document's top: ("spec", "runtimeEnv", "py_modules", 0)
    message: str
    forbidden: bool = True

    @property
    def field(self) -> str:
        out = ""
        for part in self.loc:
            out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
        return out

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def local_values(runtime_env: Mapping[str, Any]) -> Iterator[tuple[Loc, Any, bool]]:
    """(location under runtimeEnv, value, may be a URI) of every value Ray would read from the
    submitter's disk if it is a local path. Values of the wrong type are yielded too: the
    check calls them malformed rather than guess what Ray would do with them."""
    for key in _URI_OR_PATH:
        if runtime_env.get(key) is not None:
            yield (key,), runtime_env[key], True
    for key in _URI_OR_PATH_LISTS:
        items = runtime_env.get(key)
        if items is None:
            continue
        if not isinstance(items, list):
            yield (key,), _NotAList(items), True
            continue
        for index, item in enumerate(items):
            yield (key, index), item, True
    for key in ("pip", "uv"):
        value = runtime_env.get(key)
        if isinstance(value, str):  # a requirements file; a list names packages
            yield (key,), value, False
        elif isinstance(value, dict) and isinstance(value.get("packages"), str):
            yield (key, "packages"), value["packages"], False
    conda = runtime_env.get("conda")
    # An env name stays a name; Ray reads a .yaml/.yml file, and probes an absolute path.
    if isinstance(conda, str) and (conda.endswith((".yaml", ".yml")) or conda.startswith("/")):
        yield ("conda",), conda, False


@dataclass(frozen=True)
class Confinement:
    """What no runtimeEnv path may reach, whatever the roots, and how relative paths resolve."""

    guarded_dirs: tuple[tuple[str, str], ...]  # (what, path): is, holds or lies inside
    guarded_files: tuple[tuple[str, str], ...]  # (what, path): is or holds
    cwd: str  # Ray resolves a relative path against the submitting process's directory

    @classmethod
    def from_settings(cls, settings: Settings, cwd: str | None = None) -> Confinement:
        dirs = [("the tasks folder", settings.tasks_dir)]
        if settings.status_dir is not None:
            dirs.append(("the status folder", settings.status_dir))
        dirs.append(("the state folder", settings.resolved_state_dir))
        files = [
            (what, path)
            for what, path in (
                ("the token file", settings.token_file),
                ("the team tokens file", settings.team_tokens),
                ("the queue configuration", settings.queues_path),
            )
            if path is not None
        ]
        return cls(
            tuple((what, os.path.abspath(p)) for what, p in dirs),
            tuple((what, os.path.abspath(p)) for what, p in files),
            cwd if cwd is not None else os.getcwd(),
        )

    def check(
        self, runtime_env: Mapping[str, Any] | None, roots: Sequence[str]
    ) -> list[PathProblem]:
        """Every problem with the local paths of `runtime_env` for a writer whose allowed
        roots are `roots` (absolute; resolved here, so a root that is a symlink is followed)."""
        if not isinstance(runtime_env, Mapping):
            return []
        real_roots = [os.path.realpath(r) for r in roots]
        problems: list[PathProblem] = []
        for loc, value, may_be_uri in local_values(runtime_env):
            where = (*RUNTIME_ENV, *loc)
            path, problem = _as_path(value, may_be_uri)
            if problem is not None:
                problems.append(PathProblem(where, problem, forbidden=False))
            elif path is not None:
                found = self._problem(value, path, roots, real_roots)
                if found is not None:
                    problems.append(PathProblem(where, found))
        return problems

    def _problem(
        self, value: str, path: str, roots: Sequence[str], real_roots: Sequence[str]
    ) -> str | None:
        given = os.path.normpath(os.path.join(self.cwd, path))
        real = os.path.realpath(given)
        refused = self._refused(real, roots, real_roots)
        if refused is not None:
            shown = f" (it resolves to {real})" if real != given else ""
            return f"{value} {refused}{shown}"
        if os.path.isdir(real):
            return self._tree_problem(value, real, roots, real_roots)
        return None

    def _refused(self, real: str, roots: Sequence[str], real_roots: Sequence[str]) -> str | None:
        """Why the resolved path `real` may not be read, or None."""
        for what, guarded in self.guarded_dirs:
            target = os.path.realpath(guarded)
            if real == target:
                return f"is {what}"
            if _inside(target, real):
                return f"holds {what}"
            if _inside(real, target):
                return f"lies in {what}"
        for what, guarded in self.guarded_files:
            target = os.path.realpath(guarded)
            if real == target:
                return f"is {what}"
            if _inside(target, real):
                return f"holds {what}"
        if not roots:
            return (
                "is a local path, and no root allows local paths for this writer "
                "(--working-dir-root, or workingDirRoots of its team token)"
            )
        if not any(_inside(real, root) for root in real_roots):
            return f"is outside the allowed roots ({', '.join(roots)})"
        return None

    def _tree_problem(
        self, value: str, top: str, roots: Sequence[str], real_roots: Sequence[str]
    ) -> str | None:
        """Ray zips a folder following the symlinks in it: each must stay allowed too."""
        stack = [top]
        seen: set[tuple[int, int]] = set()
        count = 0
        while stack:
            directory = stack.pop()
            try:
                st = os.stat(directory)
                if (st.st_dev, st.st_ino) in seen:
                    continue
                seen.add((st.st_dev, st.st_ino))
                with os.scandir(directory) as listing:
                    children = list(listing)
            except OSError:
                continue  # unreadable here: Ray cannot zip it either
            count += len(children)
            if count > MAX_TREE_ENTRIES:
                return f"{value} holds more than {MAX_TREE_ENTRIES} files and folders: too big"
            for child in children:
                try:
                    if child.is_symlink():
                        real = os.path.realpath(child.path)
                        refused = self._refused(real, roots, real_roots)
                        if refused is not None:
                            inner = os.path.relpath(child.path, top)
                            return (
                                f"{value}: the symlink {inner} in it leads to {real}, "
                                f"which {refused}"
                            )
                        if os.path.isdir(real):
                            stack.append(real)
                    elif child.is_dir():
                        stack.append(child.path)
                except OSError:
                    continue
        return None


@dataclass(frozen=True)
class _NotAList:
    value: Any


def _as_path(value: Any, may_be_uri: bool) -> tuple[str | None, str | None]:
    """(local path to check, None), (None, None) for a remote URI, or (None, why malformed)."""
    if isinstance(value, _NotAList):
        return None, f"must be a list of paths or URIs, not {type(value.value).__name__}"
    if not isinstance(value, str):
        return None, f"must be a string (a path or a URI), not {type(value).__name__}"
    if "\x00" in value:
        return None, "must not contain NUL"
    if not may_be_uri:
        return value, None  # Ray opens it as a file, whatever it looks like
    parsed = urllib.parse.urlparse(value)
    scheme = parsed.scheme.lower()
    if not scheme:
        return value, None
    if scheme in REMOTE_SCHEMES:
        return None, None
    if scheme in NODE_SCHEMES:
        return urllib.parse.unquote(parsed.path) or "/", None
    known = ", ".join(f"{s}://" for s in sorted(REMOTE_SCHEMES))
    return None, f"unknown URI scheme {scheme}:// (remote: {known}; or a local path)"


def _inside(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip(os.sep) + os.sep)


@dataclass(frozen=True)
class RuntimePaths:
    """Which roots apply to which writer. `confinement` None: off (the single-tenant default:
    no team tokens and no --working-dir-root), every path is accepted."""

    confinement: Confinement | None
    roots: tuple[str, ...] = ()  # --working-dir-root, for everyone
    team: tuple[Principal, ...] = ()  # team tokens, for their workingDirRoots

    @classmethod
    def from_settings(
        cls, settings: Settings, tokens: Tokens, cwd: str | None = None
    ) -> RuntimePaths:
        team = tuple(e.principal for e in tokens.entries if e.principal.name != SINGLE_TOKEN_NAME)
        on = settings.team_tokens is not None or bool(settings.working_dir_roots)
        confinement = Confinement.from_settings(settings, cwd) if on else None
        return cls(confinement, tuple(settings.working_dir_roots), team)

    @property
    def enabled(self) -> bool:
        return self.confinement is not None

    def roots_for_task(self, name: str) -> tuple[str, ...]:
        """A spec file in the folder: the global roots, plus those of every team token that
        may write it (whoever committed it, one of them could have)."""
        extra = (r for p in self.team if p.can_write(name) for r in p.working_dir_roots)
        return tuple(dict.fromkeys((*self.roots, *extra)))

    def roots_for_writer(self, principal: Principal) -> tuple[str, ...]:
        """A write through the API: the global roots plus the caller's own."""
        return tuple(dict.fromkeys((*self.roots, *principal.working_dir_roots)))

    def check_task(self, name: str, runtime_env: Mapping[str, Any] | None) -> list[PathProblem]:
        if self.confinement is None or not runtime_env:
            return []
        return self.confinement.check(runtime_env, self.roots_for_task(name))

    def store_check(self) -> Callable[[str, Task], list[Problem]] | None:
        """The check a TaskStore runs on every spec it reads (None when off)."""
        if self.confinement is None:
            return None

        def check(name: str, task: Task) -> list[Problem]:
            return [(p.loc, p.message) for p in self.check_task(name, task.spec.runtime_env)]

        return check

    def writer_check(self, principal: Principal) -> Callable[[Task], list[PathProblem]] | None:
        """The check of a spec written through the API by `principal` (None when off)."""
        if self.confinement is None:
            return None
        return lambda task: self.check_writer(principal, task.spec.runtime_env)

    def check_writer(
        self, principal: Principal, runtime_env: Mapping[str, Any] | None
    ) -> list[PathProblem]:
        if self.confinement is None or not runtime_env:
            return []
        return self.confinement.check(runtime_env, self.roots_for_writer(principal))


OFF = RuntimePaths(None)


def unconfined_warning(settings: Settings, tokens: Tokens) -> str | None:
    """The warning `serve` logs at start when runtimeEnv local paths are not confined."""
    return None if RuntimePaths.from_settings(settings, tokens).enabled else UNCONFINED_WARNING


UNCONFINED_WARNING = (
    "runtimeEnv local paths are not confined: a spec's working_dir, py_modules, pip, uv or "
    "conda file is read from THIS machine (zipped and uploaded to the cluster), so whoever "
    "can write a spec can read any file rayqueue can. Set --working-dir-root PATH (or use "
    "--team-tokens with workingDirRoots) to allow local paths only under given folders"
)

__all__ = [
    "MAX_TREE_ENTRIES",
    "NODE_SCHEMES",
    "OFF",
    "REMOTE_SCHEMES",
    "UNCONFINED_WARNING",
    "Confinement",
    "PathProblem",
    "RuntimePaths",
    "local_values",
    "unconfined_warning",
]
