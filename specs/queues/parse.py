"""Parsing queue configuration: the top `_queues.yaml` and a team's own sub-queue files
(`<folder>/_queues.yaml`), with the checks a model cannot make field by field."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from specs.cluster import Capacity
from specs.queues.config import CONFIG_FILE, DEFAULT_QUEUE_DEPTH, QueueConfig
from specs.yamlio.errors import Problem
from specs.yamlio.parse import parse_document


def _check_queues(config: QueueConfig) -> Sequence[Problem]:
    problems: list[Problem] = []
    first: dict[str, int] = {}
    for index, entry in enumerate(config.spec.queues):
        if entry.name in first:
            message = f'queue "{entry.name}" is listed twice (first as queues[{first[entry.name]}])'
            problems.append((("spec", "queues", index, "name"), message))
        else:
            first[entry.name] = index
    cluster = config.spec.cluster
    kinds: dict[str, int] = {}
    for index, kind in enumerate(cluster.node_types if cluster is not None else ()):
        where = ("spec", "cluster", "nodeTypes", index)
        if kind.name in kinds:
            message = (
                f'node type "{kind.name}" is listed twice (first as nodeTypes[{kinds[kind.name]}])'
            )
            problems.append(((*where, "name"), message))
        else:
            kinds[kind.name] = index
        if kind.min_count > kind.max_count:
            message = f"minCount {kind.min_count} is more than maxCount {kind.max_count}"
            problems.append(((*where, "minCount"), message))
        if kind.resources.capacity() == Capacity():
            problems.append(((*where, "resources"), "a node type must have some resource"))
    return problems


def parse_queue_config(
    text: str | bytes, *, file: str = CONFIG_FILE, max_depth: int = DEFAULT_QUEUE_DEPTH
) -> QueueConfig:
    """Parse `_queues.yaml`; raises SpecParseError naming file, line and field."""

    def check(config: QueueConfig) -> Sequence[Problem]:
        problems = list(_check_queues(config))
        for index, entry in enumerate(config.spec.queues):
            depth = config.depth_of(entry.name)
            if depth > max_depth:
                problems.append((_name_at(index), _too_deep(entry.name, depth, max_depth)))
        return problems

    return parse_document(text, file=file, model=QueueConfig, check=check)


_TOP_ONLY = {"default": "default", "cluster": "cluster", "fair_sharing": "fairSharing"}


def parse_sub_queue_config(
    text: str | bytes,
    *,
    file: str,
    folder: str,
    folder_depth: int,
    listed: Collection[str] = (),
    max_depth: int = DEFAULT_QUEUE_DEPTH,
) -> QueueConfig:
    """Parse `<folder>/_queues.yaml`, a queue's own division into sub-queues (nested queues):
    it lists only queues under `folder` (full folder paths), each at most `max_depth` deep
    counting `folder_depth` above; `default`, `cluster` and `fairSharing` are the top file's.
    `listed`: queues other files list already. Raises SpecParseError naming file, line, field."""

    def check(config: QueueConfig) -> Sequence[Problem]:
        problems = list(_check_queues(config))
        for key, word in _TOP_ONLY.items():
            if key in config.spec.model_fields_set:
                message = f"{word} is set in the top _queues.yaml only, not in a queue's own"
                problems.append((("spec", word), message))
        for index, entry in enumerate(config.spec.queues):
            name = entry.name
            if name == folder:
                message = f'"{name}" is the queue this file divides: a queue is not its own part'
                problems.append((_name_at(index), message + " (a cycle)"))
            elif not name.startswith(folder + "/"):
                message = (
                    f'"{name}" is outside {folder}/: {file} may list only sub-queues of '
                    f'"{folder}" (folders under {folder}/)'
                )
                problems.append((_name_at(index), message))
            elif name in listed:
                message = f'queue "{name}" is listed in another _queues.yaml already'
                problems.append((_name_at(index), message))
            else:
                depth = folder_depth + config.depth_of(name)
                if depth > max_depth:
                    problems.append((_name_at(index), _too_deep(name, depth, max_depth)))
        return problems

    return parse_document(text, file=file, model=QueueConfig, check=check)


def _name_at(index: int) -> tuple[str | int, ...]:
    return ("spec", "queues", index, "name")


def _too_deep(name: str, depth: int, limit: int) -> str:
    return (
        f'queue "{name}" would be {depth} levels deep; queues nest at most {limit} '
        "(RAYQUEUE_QUEUE_DEPTH)"
    )
