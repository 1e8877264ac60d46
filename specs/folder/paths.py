"""The store's names, paths and file reads: task-name rules, what counts as a spec or a
sidecar file, team folders and symlink crossings, stat keys and the plain file reads.

specs/folder/store.py re-exports the names its callers import from there.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from specs.folder.atomic import StatKey as StatKey
from specs.queues.config import CONFIG_FILE, is_reserved

TASK_SUFFIXES = (".yaml", ".yml")

STATUS_SUFFIX = ".status.yaml"

SIDECAR_SUFFIXES = (".status.yaml", ".status.yml")

EDITOR_SUFFIXES = ("~", ".swp", ".swx")

MAX_NAME_LENGTH = 200

# A cap on directories per walk, so a web of symlinked directories cannot explode the scan.
MAX_DIRECTORIES = 100_000

_CONFIG_NAME = CONFIG_FILE.removesuffix(".yaml")

_SEGMENT = re.compile(r"[A-Za-z0-9._-]+")

# What the store keeps of a StatKey: the three numbers packed in one int, not a tuple and
# three ints (two per task, its spec's and its sidecar's). Equal exactly when the
# keys are: the modification time in its low 64 bits (two's complement: it may be negative),
# the size in the next 64, the inode above.
PackedKey = int
_LOW64 = (1 << 64) - 1


def pack_key(key: StatKey) -> PackedKey:
    mtime_ns, size, ino = key
    return (ino << 128) | (size << 64) | (mtime_ns & _LOW64)


def pack_stat(st: os.stat_result) -> PackedKey:
    return (st.st_ino << 128) | (st.st_size << 64) | (st.st_mtime_ns & _LOW64)


def packed_mtime_ns(key: PackedKey) -> int:
    low = key & _LOW64
    return low - (1 << 64) if low >> 63 else low


def is_queue_config(name: str) -> bool:
    """`_queues`, or a queue's own `team-a/_queues` (nested queues): configuration."""
    return name.rsplit("/", 1)[-1] == _CONFIG_NAME


class FolderUnavailable(Exception):
    """The tasks folder (or status folder) is missing, not a directory, or unreadable."""


class FolderSettling(FolderUnavailable):
    """The first scan found spec files still being written: nothing is believed yet."""


class InvalidName(ValueError):
    """A task name from the API or CLI is not acceptable."""


def validate_name(name: str) -> str:
    """Check a task name given by a user (API, CLI); return it unchanged.

    Stricter than what a scan accepts: the filesystem may hold any name, but names we create
    must be portable and safe in URLs and Ray metadata.
    """
    if not name:
        raise InvalidName("task name must not be empty")
    if "\x00" in name:
        raise InvalidName("task name must not contain NUL")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidName(f"task name is {len(name)} characters long; the limit is 200")
    if name.startswith("/"):
        raise InvalidName(f"task name {name!r} must be relative (no leading '/')")
    for segment in name.split("/"):
        if not segment:
            raise InvalidName(f"task name {name!r} has an empty segment ('//' or a trailing '/')")
        if segment in (".", ".."):
            raise InvalidName(f"task name {name!r} must not contain '.' or '..' segments")
        if segment.startswith("."):
            raise InvalidName(f"task name {name!r}: segment {segment!r} would be a hidden file")
        if not _SEGMENT.fullmatch(segment):
            raise InvalidName(
                f"task name {name!r} may only contain ASCII letters, digits, '.', '_', '-',"
                " and '/' between segments"
            )
    if name.endswith(".status"):
        raise InvalidName(f"task name {name!r} must not end with '.status' (sidecar names)")
    if is_reserved(name.rsplit("/", 1)[-1]):
        raise InvalidName(
            f"task name {name!r}: names starting with '_' are reserved for configuration"
        )
    return name


class Unreadable(Exception):
    """A file exists but cannot be read right now: keep what we knew of it."""


def is_spec_file(filename: str) -> bool:
    if filename.endswith(EDITOR_SUFFIXES) or (filename.startswith("#") and filename.endswith("#")):
        return False
    if filename.endswith(SIDECAR_SUFFIXES):
        return False
    return filename.endswith(TASK_SUFFIXES) and strip_suffix(filename, TASK_SUFFIXES) != ""


def strip_suffix(rel: str, suffixes: Iterable[str]) -> str:
    for suffix in suffixes:
        if rel.endswith(suffix):
            return rel[: -len(suffix)]
    return rel


def under_any(rel: str, prefixes: list[str]) -> bool:
    """`rel` is one of the unreadable files, or inside an unreadable "dir/" (or the root, "")."""
    return any(rel == p or (p.endswith("/") and rel.startswith(p)) or p == "" for p in prefixes)


def team_folder(rel: str) -> str:
    """The team folder of a path relative to the root: its top-level folder ("" at the top)."""
    head, sep, _ = rel.partition("/")
    return head if sep else ""


def crossing(rel: str, real: str, top: str) -> str | None:
    """Why the file at `rel`, really at `real` (inside `top`), is refused, or None: a symlink
    must not carry a spec from one team folder into another (it would run as the other's
    task, and both would share one status file)."""
    target = os.path.relpath(real, top).replace(os.sep, "/")
    here, there = team_folder(rel), team_folder(target)
    if here == there:
        return None

    def shown(team: str) -> str:
        return f"{team}/" if team else "the top folder"

    return (
        f"reached through a symlink from {shown(here)} into {shown(there)} ({rel} -> "
        f"{target}); a spec is never followed into another team's folder: copy it instead"
    )


def inside(real_path: str, real_top: str) -> bool:
    return real_path == real_top or real_path.startswith(real_top.rstrip(os.sep) + os.sep)


def dir_id(path: str | Path | None) -> tuple[int, int] | None:
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def stat_key(path: Path) -> StatKey | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def check_relative(name: str) -> None:
    """Path safety for any name, including scanned ones that validate_name would refuse."""
    if not name or "\x00" in name or name.startswith("/"):
        raise InvalidName(f"task name {name!r} is not a relative path")
    if any(segment in ("", ".", "..") for segment in name.split("/")):
        raise InvalidName(f"task name {name!r} must not contain empty, '.' or '..' segments")


def sidecar_digest(data: bytes) -> bytes:
    """What a sidecar's bytes are remembered by: 16 bytes rather than the whole file, for
    every sidecar of the folder."""
    return hashlib.blake2b(data, digest_size=16).digest()


# How the store reads every file: read_with_stat, or what a test passes in its place.
ReadFile = Callable[[str | Path, int], tuple[bytes, os.stat_result] | None]


def read_with_stat(path: str | Path, limit: int = -1) -> tuple[bytes, os.stat_result] | None:
    """Read a regular file and stat it after the read; None if missing or not regular.
    O_NONBLOCK: a FIFO never blocks us.

    At most `limit` bytes (if >= 0) are read, sized by fstat: a buffered read(limit) would
    allocate the whole limit for every small file.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        chunks: list[bytes] = []
        total = 0
        want = st.st_size + 1  # one byte more, to see EOF (or growth) in the same call
        while limit < 0 or total < limit:
            asked = want if limit < 0 else min(want, limit - total)
            chunk = os.read(fd, asked)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if len(chunk) < asked:
                break  # a regular file reads short only at its end: no read of nothing after
            want = 1 << 16
        return b"".join(chunks), os.fstat(fd)
    finally:
        os.close(fd)


def prune_empty_parents(directory: Path, stop: Path) -> None:
    while directory != stop and stop in directory.parents:
        try:
            directory.rmdir()
        except OSError:
            return  # not empty (or gone): stop climbing
        directory = directory.parent
