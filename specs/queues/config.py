"""The QueueConfig document (`_queues.yaml`): one queue per team folder, with quotas and weights.

The file is the admin's, not a team's: it lives at the root of the tasks folder (or anywhere,
given `--queues PATH`), and names like `_queues.yaml` are reserved, so no team can drop a task
that looks like one. `specs.queues.parse.parse_queue_config` reads it with the task parser's
machinery, so errors read `_queues.yaml:7:9: spec.queues[1].name: ...`. This module holds only
the model, so the pure planner depends on it and not on the parser.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator
from pydantic.alias_generators import to_camel

from specs.cluster import Capacity, NodeType
from specs.task.quantity import QuantityError, parse_memory

CONFIG_FILE = "_queues.yaml"
STATUS_FILE = "_queues.status.yaml"
DEFAULT_QUEUE = "default"
DEFAULT_QUEUE_DEPTH = 3  # levels of nested queues (RAYQUEUE_QUEUE_DEPTH)
RESERVED_PREFIX = "_"
"""File names starting with this are configuration, never tasks."""

UNLIMITED = float("inf")

_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_MAX_NAME = 200

Amount = Annotated[float, Field(ge=0, allow_inf_nan=False, le=1e9)]


def _memory(value: object) -> int:
    try:
        return parse_memory(value)
    except OverflowError:  # float() overflow on absurd numbers; pydantic wants a ValueError
        raise QuantityError("is larger than any cluster could hold") from None


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class Quota(_Model):
    """A nominal quota: a resource left out is 0."""

    cpu: Amount = 0.0
    gpu: Amount = 0.0
    memory: int = Field(default=0, description="bytes; YAML takes 256Gi, 512Mi, 2G or GiB")

    @field_validator("memory", mode="before")
    @classmethod
    def _parse_memory(cls, value: object) -> int:
        return _memory(value)

    def capacity(self) -> Capacity:
        return Capacity(self.cpu, self.gpu, float(self.memory))


class Limit(_Model):
    """A borrowing or lending limit: a resource left out has no limit."""

    cpu: Amount | None = None
    gpu: Amount | None = None
    memory: int | None = Field(default=None, description="bytes; as in nominalQuota")

    @field_validator("memory", mode="before")
    @classmethod
    def _parse_memory(cls, value: object) -> int | None:
        return None if value is None else _memory(value)

    def capacity(self) -> Capacity:
        def bound(value: float | None) -> float:
            return UNLIMITED if value is None else float(value)

        return Capacity(bound(self.cpu), bound(self.gpu), bound(self.memory))


NO_LIMIT = Limit()


_MAX_SECONDS = 7 * 86400.0  # a week: anything longer is a typo, not a grace period


class PreemptionConfig(_Model):
    """A queue's `preemption:` block, the one place preemption is set when there is a queue
    file. A field left out takes its default: Never, 30, 0, 0 and 3, those of the settings
    (specs/settings/process.py) for a folder without a queue file; `reclaimWithinCohort`: Never."""

    within_queue: Literal["Never", "LowerPriority"] | None = Field(
        default=None, description="Never | LowerPriority: its waiting head may stop lower runs"
    )
    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] | None = Field(
        default=None,
        description="Never | LowerPriority | Any: below its nominal quota, take lent quota back",
    )
    grace_period_seconds: float | None = Field(
        default=None, ge=0, le=_MAX_SECONDS, allow_inf_nan=False, description="SIGTERM to SIGKILL"
    )
    min_runtime_seconds: float | None = Field(
        default=None, ge=0, le=_MAX_SECONDS, allow_inf_nan=False, description="younger: exempt"
    )
    # A task's priority is 0..9; 0 lets every higher priority preempt, as before the field.
    min_preemptor_priority: int | None = Field(
        default=None, ge=0, le=9, description="a waiting head below this priority never preempts"
    )
    # After this many preemptions a task is never a victim again: its run goes to the end.
    max_per_task: int | None = Field(
        default=None,
        ge=0,
        le=1000,
        description="a task preempted this often is spared; 0: no limit",
    )


NO_PREEMPTION_BLOCK = PreemptionConfig()

OveruseMode = Literal["Charge", "Warn", "Stop"]
DEFAULT_OVERUSE: OveruseMode = "Charge"
DEFAULT_OVERUSE_GRACE_SECONDS = 300.0
OVERUSE_STRICTNESS: dict[str, int] = {"Warn": 0, "Charge": 1, "Stop": 2}
"""How strictly each `overuse:` holds a run to its declaration: a team's own file may only
make its queue's stricter than its parent's (specs/queues/bounds.py)."""


@dataclass(frozen=True)
class Overuse:
    """What a queue does about a run that holds more than it declares (defaults filled in):
    `Charge` counts what it holds, `Warn` only flags it (its declaration counts), `Stop`
    also stops the run once it has been over for `grace_seconds`."""

    mode: OveruseMode = DEFAULT_OVERUSE
    grace_seconds: float = DEFAULT_OVERUSE_GRACE_SECONDS


DEFAULT_OVERUSE_POLICY = Overuse()


class _Sharing(_Model):
    borrowing_limit: Limit = Field(default=NO_LIMIT, description="most it may use above nominal")
    lending_limit: Limit = Field(default=NO_LIMIT, description="most of its idle quota lent")
    weight: float = Field(default=1.0, gt=0, le=1e6, allow_inf_nan=False)
    preemption: PreemptionConfig = Field(default=NO_PREEMPTION_BLOCK)
    max_running: int | None = Field(
        default=None, ge=1, le=1_000_000, description="most tasks Starting or Running at once"
    )
    max_queued: int | None = Field(
        default=None,
        ge=0,
        le=1_000_000,
        description="most tasks Queued; more are QueueFull (a file) or refused (API, 429)",
    )
    overuse: OveruseMode | None = Field(
        default=None,
        description="Charge | Warn | Stop: a run holding more than it declares is charged what "
        "it holds (default), only flagged, or also stopped after overuseGraceSeconds",
    )
    overuse_grace_seconds: float | None = Field(
        default=None,
        ge=0,
        le=_MAX_SECONDS,
        allow_inf_nan=False,
        description="with overuse: Stop, how long a run may stay over before it is stopped",
    )

    def overuse_policy(self) -> Overuse:
        return Overuse(
            self.overuse or DEFAULT_OVERUSE,
            DEFAULT_OVERUSE_GRACE_SECONDS
            if self.overuse_grace_seconds is None
            else self.overuse_grace_seconds,
        )


class QueueEntry(_Sharing):
    """One team folder's queue."""

    name: str
    nominal_quota: Quota = Field(default_factory=Quota)

    @field_validator("name")
    @classmethod
    def _folder(cls, name: str) -> str:
        check_queue_name(name)
        return name


class DefaultQueue(_Sharing):
    """Tasks outside every listed folder; its nominal quota is what no other queue holds."""


class NodeTypeEntry(_Model):
    """One kind of node an autoscaler may launch (`spec.cluster.nodeTypes[]`)."""

    name: str = Field(min_length=1, max_length=_MAX_NAME)
    resources: Quota = Field(description="what one node of this type has")
    max_count: int = Field(ge=0, le=100_000, description="most nodes of this type")
    min_count: int = Field(default=0, ge=0, le=100_000)

    def node_type(self) -> NodeType:
        return NodeType(self.name, self.resources.capacity(), self.max_count, self.min_count)


class ClusterSection(_Model):
    """`spec.cluster`: what an autoscaling cluster can grow to, where Ray's autoscaler does not
    report it. `maxCapacity` caps the whole cluster (and lowers what Ray reports);
    `nodeTypes` lists every kind of node, the head too, when Ray reports none."""

    max_capacity: Limit | None = None  # a resource left out is not capped
    node_types: list[NodeTypeEntry] = Field(default_factory=list, max_length=1000)

    def node_type_values(self) -> tuple[NodeType, ...]:
        return tuple(entry.node_type() for entry in self.node_types)

    def max_capacity_value(self) -> Capacity | None:
        return self.max_capacity.capacity() if self.max_capacity is not None else None


DECAYED_USAGE = "DecayedUsage"
CURRENT_USAGE = "CurrentUsage"
DEFAULT_HALF_LIFE = 7 * 86400.0  # Slurm's PriorityDecayHalfLife default
_MAX_HALF_LIFE = 3650 * 86400.0
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(d|h|m|s)")
_UNIT_SECONDS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}


def parse_duration(value: object) -> float:
    """Seconds from a number (seconds) or a string such as `168h`, `7d`, `1h30m`, `90s`."""
    if isinstance(value, bool):
        raise ValueError("must be a duration such as 168h, 7d or 3600 (seconds)")
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        raise ValueError("must be a duration such as 168h, 7d or 3600 (seconds)")
    text = value.strip()
    try:
        return float(text)
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"{value!r} is not a duration: write e.g. 168h, 7d, 1h30m or 3600")
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)


LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"


class FairSharing(_Model):
    """`spec.fairSharing`: how the queues' past use counts when they share.
    `DecayedUsage` (the default) orders starts by what each queue used, decayed with
    `usageHalfLife`, plus what it uses now; `CurrentUsage` only by what it uses now."""

    mode: Literal["DecayedUsage", "CurrentUsage"] = Field(
        default="DecayedUsage",
        description="DecayedUsage | CurrentUsage: whether past use counts",
    )
    usage_half_life: float = Field(
        default=DEFAULT_HALF_LIFE,
        gt=0,
        le=_MAX_HALF_LIFE,
        allow_inf_nan=False,
        description="seconds, or 168h, 7d: past use counts half after this long",
    )

    # Kueue's fairSharing.preemptionStrategies; empty (the default): no queue preempts
    # another by share. Only the one strategy that rules out preempting back is offered.
    preemption_strategies: tuple[Literal["LessThanOrEqualToFinalShare"], ...] = Field(
        default=(),
        max_length=1,
        description="[LessThanOrEqualToFinalShare]: with no nominal quota, a queue below "
        "another's weighted share may stop its runs (default []: off)",
    )

    @field_validator("usage_half_life", mode="before")
    @classmethod
    def _duration(cls, value: object) -> float:
        return parse_duration(value)

    @property
    def decays(self) -> bool:
        return self.mode == DECAYED_USAGE

    @property
    def preempts(self) -> bool:
        """Whether a queue of lower weighted share may stop runs of a sibling of higher."""
        return LESS_THAN_OR_EQUAL_TO_FINAL_SHARE in self.preemption_strategies


DEFAULT_FAIR_SHARING = FairSharing()


class QueueConfigSpec(_Model):
    queues: list[QueueEntry] = Field(default_factory=list)
    default: DefaultQueue = Field(default_factory=DefaultQueue)
    cluster: ClusterSection | None = None
    fair_sharing: FairSharing = Field(default=DEFAULT_FAIR_SHARING)


class ConfigMetadata(_Model):
    name: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class QueueConfig(_Model):
    api_version: Literal["rayqueue/v1"] = Field(alias="apiVersion")
    kind: Literal["QueueConfig"]
    metadata: ConfigMetadata = Field(default_factory=ConfigMetadata)
    spec: QueueConfigSpec = Field(default_factory=QueueConfigSpec)
    _queue_of: dict[str, str] = PrivateAttr(default_factory=dict)  # memo: asked every pass

    def queue_names(self) -> list[str]:
        """Every queue, listed ones first in file order, then `default`."""
        return [q.name for q in self.spec.queues] + [DEFAULT_QUEUE]

    def preemption_of(self, queue: str) -> PreemptionConfig:
        """A queue's `preemption:` block as written (fields left out are None)."""
        if queue == DEFAULT_QUEUE:
            return self.spec.default.preemption
        entry = next((q for q in self.spec.queues if q.name == queue), None)
        return entry.preemption if entry is not None else NO_PREEMPTION_BLOCK

    def overuse_of(self, queue: str) -> Overuse:
        """A queue's `overuse:` policy, defaults filled in."""
        if queue == DEFAULT_QUEUE:
            return self.spec.default.overuse_policy()
        entry = next((q for q in self.spec.queues if q.name == queue), None)
        return entry.overuse_policy() if entry is not None else DEFAULT_OVERUSE_POLICY

    def parent_of(self, queue: str) -> str | None:
        """The listed queue whose folder holds `queue`'s folder most closely, if any: queues are
        folders, so `team-a/x` is a sub-queue of `team-a` (nested queues)."""
        best: str | None = None
        for entry in self.spec.queues:
            if queue.startswith(entry.name + "/") and (best is None or len(entry.name) > len(best)):
                best = entry.name
        return best

    def depth_of(self, queue: str) -> int:
        """1 for a top-level queue, 2 for its sub-queue, and so on."""
        depth = 1
        parent = self.parent_of(queue)
        while parent is not None:
            depth += 1
            parent = self.parent_of(parent)
        return depth

    def queue_of(self, task: str) -> str:
        """The queue of a task name: the longest listed folder it lies under, else default."""
        known = self._queue_of.get(task)
        if known is not None:
            return known
        best = DEFAULT_QUEUE
        length = -1
        for entry in self.spec.queues:
            if task.startswith(entry.name + "/") and len(entry.name) > length:
                best, length = entry.name, len(entry.name)
        if len(self._queue_of) > 100_000:  # bounded: task names come and go
            self._queue_of.clear()
        self._queue_of[task] = best
        return best


def check_queue_name(name: str) -> None:
    """A queue name is a relative folder path: `team-a` or `org/team-a`."""
    if not name:
        raise ValueError("queue name must not be empty")
    if len(name) > _MAX_NAME:
        raise ValueError(f"queue name is {len(name)} characters long; the limit is {_MAX_NAME}")
    if name == DEFAULT_QUEUE:
        raise ValueError('"default" is the queue of unlisted folders; set it under spec.default')
    if "\\" in name:
        raise ValueError(f"queue name {name!r} must use '/' between folders, not '\\'")
    if name.startswith("/") or name.endswith("/"):
        raise ValueError(f"queue name {name!r} must be a relative folder path without '/' at ends")
    for segment in name.split("/"):
        if segment in ("", ".", ".."):
            raise ValueError(
                f"queue name {name!r} must be a folder path: no empty, '.' or '..' segments"
            )
        if not _SEGMENT.fullmatch(segment):
            raise ValueError(
                f"queue name {name!r}: folder {segment!r} may use ASCII letters, digits, '.', "
                "'_' and '-', and must start with a letter or digit"
            )


def is_reserved(file_name: str) -> bool:
    """Whether a file name (no folders) is reserved for configuration."""
    return file_name.startswith(RESERVED_PREFIX)


def config_path(tasks_dir: Path, queues_path: Path | None) -> Path:
    """`--queues PATH`, else `<tasks>/_queues.yaml`."""
    return queues_path or tasks_dir / CONFIG_FILE


def status_path(config: Path, status_dir: Path | None) -> Path:
    """`_queues.status.yaml`: under --status-dir if given, else beside the configuration."""
    return (status_dir or config.parent) / STATUS_FILE


def parse_capacity(text: str) -> Capacity:
    """`cpu=64,gpu=8,memory=512Gi` (the --max-capacity flag): a resource left out is not
    capped (UNLIMITED), as in `maxCapacity`. ValueError naming what is wrong."""
    amounts = {"cpu": UNLIMITED, "gpu": UNLIMITED, "memory": UNLIMITED}
    seen: set[str] = set()
    for part in text.split(","):
        key, sep, value = part.strip().partition("=")
        key = key.strip().lower()
        if not sep or key not in amounts:
            raise ValueError(
                f"{part.strip()!r} is not cpu=N, gpu=N or memory=QUANTITY (e.g. "
                "cpu=64,gpu=8,memory=512Gi)"
            )
        if key in seen:
            raise ValueError(f"{key} is given twice")
        seen.add(key)
        try:
            number = float(_memory(value.strip())) if key == "memory" else float(value)
        except ValueError as exc:
            raise ValueError(f"{key}={value.strip()}: {exc}") from None
        if not 0 <= number <= 1e15:  # also refuses NaN and inf
            raise ValueError(f"{key}={value.strip()} must be a finite number >= 0")
        amounts[key] = number
    return Capacity(amounts["cpu"], amounts["gpu"], amounts["memory"])
