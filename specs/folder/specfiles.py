"""How a spec file is read: the reading and parsing of one file into the task as read (a
specs.task.inputs.TaskInput) by `SpecFiles`, the read as the scan caches it (`CachedRead`),
and the rule that tells a finished file from one still being written (`is_whole`).
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from specs.folder.paths import PackedKey, ReadFile, Unreadable, pack_stat
from specs.queues.config import CONFIG_FILE, is_reserved
from specs.task.errors import SpecError
from specs.task.inputs import TaskInput
from specs.task.records import Task
from specs.yamlio.parse import MAX_FILE_BYTES, Problem, SpecParseError


@dataclass(frozen=True, slots=True)
class CachedRead:
    """One read of a spec file, kept while the file's stat key stays the same. `read` is the
    task as read, alone in its file (no last valid spec but its own); the scan hands it out
    as the task's entry when it parsed and no other file claims the name."""

    key: PackedKey
    whole: bool  # known complete when read: no settle wait (see is_whole)
    read: TaskInput


class ParseTask(Protocol):
    """How a spec's bytes become a Task: specs.yamlio.parse.parse_task, or a test's own."""

    def __call__(
        self,
        text: str | bytes,
        *,
        file: str,
        expected_name: str | None = None,
        task_name: str | None = None,
        check: Callable[[Task], Sequence[Problem]] | None = None,
        max_array_elements: int = ...,
    ) -> Task: ...


# Whether bytes read from a file (stat key as listed, stat after the read) are its finished
# content: is_whole, or a test's own.
IsWhole = Callable[[PackedKey, os.stat_result], bool]


class SpecFiles:
    """Reads and parses one spec file at a time, for a scan that has found it changed."""

    def __init__(
        self,
        root: Path,
        *,
        check: Callable[[str, Task], Sequence[Problem]] | None,
        max_array_elements: int,
        generations: Iterator[int],
        warn: Callable[[str, str], None],
        read_file: ReadFile,
        parse_task: ParseTask,
        is_whole: IsWhole,
    ) -> None:
        # What a spec must also pass beyond its own file (runtimeEnv paths: runtimepaths.py),
        # given its task name; checked whenever the file is (re)read.
        self.check = check
        # The setting max_array_elements: a larger array reads as Invalid.
        self.max_array_elements = max_array_elements
        self._root = root  # every read's base: one Path shared by all
        self._generations = generations
        self._warn = warn
        self._read_file = read_file
        self._parse_task = parse_task
        self._is_whole = is_whole

    def parse(
        self, rel: str, path: str, st: os.stat_result, key: PackedKey, name: str
    ) -> CachedRead | None:
        """The file at `path` (`rel` under the root, listed with `st`), read and parsed as the
        task `name`; None if it is gone or no longer a regular file. Raises Unreadable."""
        if st.st_size > MAX_FILE_BYTES:
            message = f"file is larger than the {MAX_FILE_BYTES // 1024} KiB limit"
            return self._read(name, rel, key, False, None, SpecError.unplaced(message, rel), "")
        try:
            read = self._read_file(path, MAX_FILE_BYTES + 1)
        except OSError as exc:
            self._warn(path, f"cannot read: {exc.strerror}")
            raise Unreadable from exc
        if read is None:  # replaced by a non-regular file, or deleted, since the listing
            return None
        data, after = read
        whole = self._is_whole(key, after)
        stem = name.rsplit("/", 1)[-1]
        if is_reserved(stem):
            message = (
                f"file names starting with '_' are reserved for configuration (like "
                f"{CONFIG_FILE}), so this is not run as a task; rename it to drop the '_'"
            )
            reserved = SpecError.unplaced(message, rel)
            raw = hashlib.sha256(data).hexdigest()
            return self._read(name, rel, key, False, None, reserved, raw)
        try:
            check = None if self.check is None else functools.partial(self.check, name)
            task: Task | None = self._parse_task(
                data,
                file=rel,
                expected_name=stem,
                task_name=name,
                check=check,
                max_array_elements=self.max_array_elements,
            )
            error = None
        except SpecParseError as exc:
            task, error = None, exc.errors[0]
        raw = hashlib.sha256(data).hexdigest()
        return self._read(name, rel, key, whole, task, error, raw)

    def _read(
        self,
        name: str,
        rel: str,
        key: PackedKey,
        whole: bool,
        task: Task | None,
        error: SpecError | None,
        raw_hash: str,
    ) -> CachedRead:
        """One read, with a new generation; the spec hash computed once, here."""
        spec_hash = task.spec_hash() if task is not None else None
        generation = next(self._generations)
        read = TaskInput(
            name, task, error, task, spec_hash, None, self._root, rel, raw_hash, generation
        )
        return CachedRead(key, whole, read)


def is_whole(key: PackedKey, after: os.stat_result) -> bool:
    """Whether bytes read from a file are its finished content, so that no settle wait is needed.

    Settling guards against reading a file while someone still writes it: an editor saving in
    place, `cp`, a shell appending piece by piece, git writing a checkout. Every such data
    write stamps the file's modification time and change time with the same instant, so
    between two pieces ctime == mtime. A writer that publishes a file whole does one more
    thing after its last write: it renames the finished file into place (our API and CLI via
    specs/folder/atomic.py, git-sync, `mv`), or sets its mode or times (`install`, `cp -p`, tar).
    Those change only ctime, leaving ctime > mtime. So ctime > mtime means the last thing done
    to the file was not a data write: its content is complete. Equal times prove nothing and
    the file waits out the settle time (a rename in the same clock tick as the write;
    write_atomic rules that out for our own writes). The stat is taken after reading and must
    still match the listing's, so the bytes read are the bytes this stat describes; a write
    that raced the read changes mtime (and sets ctime == mtime), and the file waits.
    """
    return pack_stat(after) == key and (after.st_ctime_ns > after.st_mtime_ns)
