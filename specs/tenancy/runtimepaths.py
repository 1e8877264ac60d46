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

Each value is judged as Ray reads it, not by its shape: LOCAL_FIELDS lists every field that
can name a local path and how Ray takes it (NO_LOCAL_PATH says why the others cannot), and
ray_target normalises a value as Ray does (a conda string is a file by its parsed suffix, so
`env.yaml/` and `env.yaml/.` are env.yaml; `~` is never expanded; a relative path is relative
to this process's folder; `..` is taken after the symlink before it). Remote URIs (https://,
s3://, gs://, gcs://, ...) read nothing here and are always fine. `file://` and `local://` name
paths on a node, which with a local head is this machine: the path the node opens (the whole
rest of the URI, percent-decoded for file://) is checked like any other.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path, PurePosixPath
from typing import Any

from specs.settings.process import Settings
from specs.task.records import Task
from specs.tenancy.access import SINGLE_TOKEN_NAME, Principal, Tokens, resolved_path
from specs.yamlio.parse import Problem

# Schemes Ray fetches from elsewhere (ray/_common/runtime_env_uri.py, less `file`).
REMOTE_SCHEMES = frozenset({"http", "https", "s3", "gs", "gcs", "azure", "abfss"})
# Paths on a node: with a local Ray head, on this machine.
NODE_SCHEMES = frozenset({"file", "local"})


class Shape(Enum):
    """How Ray takes the value of a runtimeEnv field that can name a local file or folder."""

    # A local folder (or .py, .whl, .jar file) Ray's client zips and uploads, or a URI.
    PACKAGE = "package"
    # A list of PACKAGE values.
    PACKAGES = "packages"
    # A string is a requirements file Ray's client reads, and so is `packages` when a mapping
    # gives it as a string; a list names packages.
    REQUIREMENTS = "requirements"
    # A string whose path ends in .yaml or .yml is a YAML file Ray's client reads; an absolute
    # one names an env folder on the node; anything else is an env name. A mapping is inline.
    CONDA = "conda"


# Every field of Ray's runtime_env (RuntimeEnv.known_fields) that can name a local path.
LOCAL_FIELDS: Mapping[str, Shape] = {
    "working_dir": Shape.PACKAGE,
    "py_modules": Shape.PACKAGES,
    "java_jars": Shape.PACKAGES,
    "pip": Shape.REQUIREMENTS,
    "uv": Shape.REQUIREMENTS,
    "conda": Shape.CONDA,
}
# Ray's other fields, and why none names a file read here: what they name on a node, the
# job's own code could reach there too.
NO_LOCAL_PATH: Mapping[str, str] = {
    "excludes": "patterns matched inside working_dir and py_modules, never opened",
    "env_vars": "strings handed to the job",
    "container": "an image and options for the node's container runtime",
    "image_uri": "a container image, pulled on the node",
    "py_executable": "a command the node runs the worker with",
    "config": "set-up timeouts, eager install, and log file names on the node",
    "worker_process_setup_hook": "a module path the worker imports",
    "_nsight": "profiler options on the node",
    "_rocprof_sys": "profiler options on the node",
    "_ray_release": "a Ray wheel URL for conda and pip",
    "_ray_commit": "a commit hash",
    "_inject_current_ray": "a flag",
}
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


def local_values(runtime_env: Mapping[str, Any]) -> Iterator[tuple[Loc, Any, Shape]]:
    """(location under runtimeEnv, value, its field's shape) of every value Ray would read
    from a disk if it is a local path (LOCAL_FIELDS). Values of the wrong type are yielded
    too: the check calls them malformed rather than guess what Ray would do with them."""
    for key, shape in LOCAL_FIELDS.items():
        value = runtime_env.get(key)
        if value is None:
            continue
        if shape is Shape.PACKAGE:
            yield (key,), value, shape
        elif shape is Shape.PACKAGES:
            if not isinstance(value, list):
                yield (key,), _NotAList(value), shape
                continue
            for index, item in enumerate(value):
                yield (key, index), item, shape
        elif shape is Shape.REQUIREMENTS:
            if isinstance(value, str):
                yield (key,), value, shape
            elif isinstance(value, dict) and isinstance(value.get("packages"), str):
                yield (key, "packages"), value["packages"], shape
        elif isinstance(value, str) and is_conda_path(value):
            yield (key,), value, shape


def is_conda_path(conda: str) -> bool:
    """Whether Ray takes the string `conda` for a path (ray/_private/runtime_env/validation.py,
    parse_and_validate_conda): by the suffix of the path it parses, so `env.yaml/` and
    `env.yaml/.` are the file env.yaml; an absolute path is an env folder."""
    path = PurePosixPath(conda)
    return path.suffix in (".yaml", ".yml") or path.is_absolute()


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
        for loc, value, shape in local_values(runtime_env):
            where = (*RUNTIME_ENV, *loc)
            target = ray_target(value, shape)
            if target.problem is not None:
                problems.append(PathProblem(where, target.problem, forbidden=target.forbidden))
            elif target.path is not None:
                found = self._problem(value, target.path, roots, real_roots)
                if found is not None:
                    problems.append(PathProblem(where, found))
        return problems

    def _problem(
        self, value: str, path: str, roots: Sequence[str], real_roots: Sequence[str]
    ) -> str | None:
        # Ray opens the path as given, relative to this process's folder; the system follows
        # each link before the `..` after it, which realpath does too (a lexical normpath
        # first would not: `root/link/../x` is not `root/x` when link leads elsewhere).
        given = os.path.join(self.cwd, path)
        real = resolved_path(Path(given))
        if real is None:
            return f"{value} cannot be resolved (a loop of symlinks, or a folder not searchable)"
        refused = self._refused(real, roots, real_roots)
        if refused is not None:
            shown = f" (it resolves to {real})" if real != os.path.normpath(given) else ""
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


@dataclass(frozen=True)
class Target:
    """What Ray reads for one runtimeEnv value: a local `path` (relative to the submitting
    process's folder), nothing local (both None: a remote URI), or a `problem`."""

    path: str | None = None
    problem: str | None = None
    forbidden: bool = False  # the problem is what the value reaches, not how it is written


REMOTE = Target()


def ray_target(value: Any, shape: Shape) -> Target:
    """Where Ray's client (or, for file:// and local://, the node) reads `value` of a field
    of this shape, normalised as Ray does. `~` is no home folder: Ray never expands it."""
    if isinstance(value, _NotAList):
        return Target(problem=f"must be a list of paths or URIs, not {type(value.value).__name__}")
    if not isinstance(value, str):
        return Target(problem=f"must be a string (a path or a URI), not {type(value).__name__}")
    if "\x00" in value:
        return Target(problem="must not contain NUL")
    if shape not in (Shape.PACKAGE, Shape.PACKAGES):
        return Target(path=value)  # Ray opens it as a file, whatever it looks like
    scheme = urllib.parse.urlparse(value).scheme.lower()  # Ray's own test of a URI
    if not scheme:
        return Target(path=value)
    if scheme in REMOTE_SCHEMES:
        return REMOTE
    if scheme in NODE_SCHEMES:
        return _node_target(value, scheme)
    known = ", ".join(f"{s}://" for s in sorted(REMOTE_SCHEMES))
    return Target(problem=f"unknown URI scheme {scheme}:// (remote: {known}; or a local path)")


def _node_target(value: str, scheme: str) -> Target:
    """The path a node opens for a file:// or local:// URI: what follows the scheme and its
    two slashes, taken whole (no query, no fragment), and for file:// percent-decoded
    (ray/_private/runtime_env/protocol.py, ray/_common/runtime_env_uri.py)."""
    prefix = f"{scheme}://"
    rest = value[len(prefix) :]
    path = urllib.parse.unquote(rest) if scheme == "file" else rest
    if value[: len(prefix)].lower() != prefix or not path.startswith("/"):
        return Target(
            problem=(
                f"names a path relative to the node's own folder, which cannot be checked: "
                f"write {prefix}/absolute/path"
            ),
            forbidden=True,
        )
    return Target(path=path)


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
    "LOCAL_FIELDS",
    "MAX_TREE_ENTRIES",
    "NODE_SCHEMES",
    "NO_LOCAL_PATH",
    "OFF",
    "REMOTE_SCHEMES",
    "UNCONFINED_WARNING",
    "Confinement",
    "PathProblem",
    "RuntimePaths",
    "Shape",
    "Target",
    "is_conda_path",
    "local_values",
    "ray_target",
    "unconfined_warning",
]
