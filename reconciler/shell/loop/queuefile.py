"""The queue configuration on disk: read `_queues.yaml` when it changes, keep the last good one,
and write `_queues.status.yaml`. The shell side of queues; the decisions are in fairshare.py."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from reconciler.core.queues import usage
from reconciler.core.queues.dispatch import ConfigState, restore_usage
from specs.cluster import Capacity
from specs.folder.atomic import write_atomic
from specs.queues.bounds import Bounded, effective_policy
from specs.queues.config import CONFIG_FILE, DEFAULT_QUEUE_DEPTH, STATUS_FILE, QueueConfig
from specs.queues.parse import parse_queue_config
from specs.queues.tree import KeptFiles, divide_tree
from specs.yamlio.parse import MAX_FILE_BYTES, SpecParseError

log = logging.getLogger("rayqueue.queues")

StatKey = tuple[tuple[int, int, int] | None, ...]


@dataclass(frozen=True)
class Loaded:
    config: QueueConfig | None  # in force: the last good one; None: no queues
    state: ConfigState | None  # None: there is no config file at all
    generation: int = 0  # of `config`, or of the error while none is in force: a new one
    # whenever the file is read anew, goes, or its error changes with no configuration in force
    bounded: tuple[Bounded, ...] = ()  # of `config`: the fields its teams' files asked beyond
    # what each queue of `config` may do, once bounded (`effective` in _queues.status.yaml)
    policies: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def error_without_config(self) -> str | None:
        """The file's error while no configuration is in force (none was ever valid): the
        planner puts every task in the default queue and says why in its status."""
        if self.config is None and self.state is not None and not self.state.valid:
            return self.state.error
        return None


class QueueFile:
    """`path` is `<tasks>/_queues.yaml` unless `--queues` names another file. The status goes
    beside it, or under `status_dir` (for read-only checkouts and ConfigMaps)."""

    def __init__(
        self,
        path: Path,
        status_dir: Path | None = None,
        root: Path | None = None,
        max_depth: int = DEFAULT_QUEUE_DEPTH,
        *,
        settle_seconds: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`settle_seconds`: how long a changed queue file must stay so before it is read (as
        the store waits for spec files): a file still being written (`cat > _queues.yaml`
        leaves it empty, then cut short) neither logs an error nor changes the queues."""
        self.path = Path(path)
        self.settle_seconds = settle_seconds
        self._clock = clock
        self._pending: tuple[StatKey, float] | None = None  # a version settling, first seen at
        # Where each queue's folder, and so its own `_queues.yaml`, lies: the tasks folder.
        self.root = Path(root) if root is not None else self.path.parent
        self.max_depth = max_depth
        self._watched: list[Path] = []  # the queues' own files, present or not, as last read
        self.status_path = (status_dir or self.path.parent) / STATUS_FILE
        self._key: StatKey | None = None
        self._good: QueueConfig | None = None
        self._bounded: tuple[Bounded, ...] = ()  # of _good
        self._policies: Mapping[str, Mapping[str, Any]] = {}  # of _good
        self._own_files: dict[Path, bytes] = {}  # each queue's own file as it last read well
        self._state: ConfigState | None = None
        self._generation = 0  # of _good
        self._written: bytes | None = None
        self._status_warned = False

    @classmethod
    def beside(cls, tasks: Path, status_dir: Path | None = None) -> QueueFile:
        return cls(Path(tasks) / CONFIG_FILE, status_dir)

    def load(self) -> Loaded:
        """Cheap when nothing changed: one stat."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self._key is not None or self._state is not None:
                log.info("%s is gone: one queue for all tasks again", self.path)
                self._remove_status()
            if self._good is not None or (self._state is not None and not self._state.valid):
                self._generation += 1
            self._key, self._good, self._state = None, None, None
            self._bounded, self._policies = (), {}
            return Loaded(None, None, self._generation)
        except OSError as exc:
            return self._keep(f"cannot read: {exc.strerror}")
        key = ((st.st_mtime_ns, st.st_size, st.st_ino), *(_stat(p) for p in self._watched))
        if key == self._key or self._settling(key):
            return Loaded(self._good, self._state, self._generation, self._bounded, self._policies)
        self._watched = []
        bounded: list[Bounded] = []
        kept = KeptFiles(self._own_files)
        try:
            if st.st_size > MAX_FILE_BYTES:
                raise SpecParseError([])  # reported below with the size
            data = self.path.read_bytes()
            config = parse_queue_config(data, file=self.path.name, max_depth=self.max_depth)
            config = self._divide(config, bounded, kept)
        except SpecParseError as exc:
            message = str(exc) or f"file is larger than the {MAX_FILE_BYTES // 1024} KiB limit"
            return self._keep(message)
        except OSError as exc:
            return self._keep(f"cannot read: {exc.strerror}")
        finally:
            self._key = ((st.st_mtime_ns, st.st_size, st.st_ino), *map(_stat, self._watched))
        if self._good is None or self._good != config:
            log.info("queues from %s: %s", self.path, ", ".join(config.queue_names()))
        if tuple(bounded) != self._bounded:
            for item in bounded:
                log.warning("queue %s is bounded by its parent: %s", item.queue, item.note)
        # A team's own bad file is set aside (its last good text, if any, in force): the rest
        # of the tree, the top file's edits included, is read as it is.
        error = "\n".join(str(e) for e in kept.errors) or None
        if error is not None and (self._state is None or self._state.error != error):
            log.error("a queue's own file is invalid (its last good text is in force): %s", error)
        self._good, self._bounded = config, tuple(bounded)
        self._policies = effective_policy(config, bounded)
        self._own_files = kept.good
        self._generation += 1
        self._state = ConfigState(str(self.path), valid=error is None, error=error)
        return Loaded(config, self._state, self._generation, self._bounded, self._policies)

    def _settling(self, key: StatKey) -> bool:
        """Whether the files changed too recently to be believed: a new version is read once
        it has stayed so for settle_seconds on our clock (a modification time in the future
        holds nothing forever), or at once if every file in it was last written longer ago
        than that (complete before serve looked)."""
        if self.settle_seconds <= 0:
            return False
        now = self._clock()
        if self._pending is None or self._pending[0] != key:
            self._pending = (key, now)
            young = time.time_ns() - self.settle_seconds * 1e9
            return any(stat is not None and stat[0] > young for stat in key)
        return now - self._pending[1] < self.settle_seconds

    def _divide(self, config: QueueConfig, bounded: list[Bounded], kept: KeptFiles) -> QueueConfig:
        return divide_tree(
            config, self.root, self.max_depth, self._watched, bounded=bounded, kept=kept
        )

    def _keep(self, error: str) -> Loaded:
        """A bad edit: the last good configuration stays in force."""
        kept = "keeping the last good configuration" if self._good else "no queues in force"
        if self._state is None or self._state.error != error:
            log.error("queue configuration %s is invalid (%s): %s", self.path, kept, error)
            self._generation += 1  # the next pass writes the error to the status, even if idle
        self._state = ConfigState(
            str(self.path), valid=False, error=error, in_force=self._good is not None
        )
        return Loaded(self._good, self._state, self._generation, self._bounded, self._policies)

    def write_status(self, document: dict[str, Any]) -> bool:
        """Atomically, and only when the content changes; False if nothing was written."""
        data = yaml.safe_dump(document, sort_keys=False, default_flow_style=False).encode()
        if data == self._written:
            return False
        try:
            self.status_path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.status_path, data)
        except OSError as exc:
            if not self._status_warned:
                log.warning("cannot write %s: %s", self.status_path, exc)
                self._status_warned = True
            return False
        self._written = data
        return True

    def _remove_status(self) -> None:
        self._written = None
        with contextlib.suppress(OSError):
            self.status_path.unlink()


def _stat(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def read_status(path: Path) -> dict[str, Any] | None:
    """`_queues.status.yaml` as written by serve (CLI and API); None if absent or unreadable."""
    try:
        data = yaml.safe_load(path.read_bytes())
    except (OSError, yaml.YAMLError):
        return None
    return data if isinstance(data, dict) else None


def to_json(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2)


class UsageBook:
    """The queues' decayed usage, advanced with the loop's clock (reconciler/core/queues/usage.py).

    At each pass the time since the last one is integrated at the rates (what each queue held)
    seen by the last pass; the result goes to the planner and into `_queues.status.yaml`, which
    is read back when serve starts: the time it was down is integrated at the last rates it
    wrote, so a restart forgets nothing (a run that kept going in Ray meanwhile is counted).
    When tracking began (`since`) is kept there too: the planner's decayed mean is corrected
    for how long there has been to remember (core/queues/usage.py)."""

    def __init__(self, status: dict[str, Any] | None = None) -> None:
        past, held, at = restore_usage(status)
        self.past: usage.Tracked = past
        self.rates: dict[str, Capacity] = held
        self.at: float | None = at

    def at_time(self, now: float, config: QueueConfig | None) -> usage.Tracked | None:
        """The decayed usage at `now`, not yet kept (`advance`); None without queues."""
        if config is None:
            return None
        # Tracking begins now, unless a status file said when it began (a file without
        # `usageSince` leaves it unknown: the mean is then U / tau).
        since = now if self.at is None and not self.past else self.past.since
        seconds = 0.0 if self.at is None else now - self.at
        half_life = config.spec.fair_sharing.usage_half_life
        advanced = usage.advance_all(
            self.past, self.rates, seconds, half_life, config.queue_names()
        )
        return usage.Tracked(advanced, since)

    def advance(
        self, now: float, config: QueueConfig | None, past: usage.Tracked | None = None
    ) -> usage.Tracked | None:
        """The decayed usage at `now`, kept: the next pass advances from it. `past`: what
        `at_time(now, config)` gave (for a pass that asked before it knew it would plan)."""
        if config is None:
            self.past, self.rates, self.at = usage.Tracked(), {}, None
            return None
        self.past = past if past is not None else self.at_time(now, config) or usage.Tracked()
        if self.at is None or now > self.at:
            self.at = now  # a clock set back waits for the last instant, counting nothing twice
        return self.past

    def observe(self, held: Mapping[str, Capacity]) -> None:
        """What each queue holds after this pass: the rate until the next one."""
        self.rates = dict(held)
