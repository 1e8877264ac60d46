"""YAML out for tasks and statuses: top-level fields in their usual order, text as literal
blocks where it has several lines."""

from __future__ import annotations

from typing import Any, ClassVar

import yaml

from specs.models import Task, TaskStatus

_FastDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

_STR_TAG = "tag:yaml.org,2002:str"


def dump_task(task: Task) -> str:
    return _dump(task.to_document())


def dump_status(status: TaskStatus) -> str:
    return _dump(status.to_document())


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    # Multi-line text (log tails) reads best as a literal block; the emitter falls back to
    # quoting by itself when a block cannot hold the string exactly.
    style = "|" if "\n" in data else None
    return dumper.represent_scalar(_STR_TAG, data, style=style)


# mypy cannot subclass a base chosen at run time (C dumper if built, else the pure one).
class _Dumper(_FastDumper):  # type: ignore[misc, valid-type]
    yaml_representers: ClassVar[dict[Any, Any]] = {
        **_FastDumper.yaml_representers,
        str: _represent_str,
    }


_TOP_ORDER = ("apiVersion", "kind", "metadata", "spec", "status")


def _dump(document: dict[str, Any]) -> str:
    ordered = {k: document[k] for k in _TOP_ORDER if k in document}
    ordered.update((k, v) for k, v in document.items() if k not in ordered)
    return yaml.dump(
        ordered,
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=10_000,  # long entrypoints stay on one line
    )
