"""One status sidecar for a whole task array: `<name>.array.status.yaml`.

It holds the counts per phase, the failed elements (index, exit code, log tail), and every
element's status in a compact form: the value most elements share for a field is written once
(`common`), and each element lists only where it differs. Queue positions and estimated
starts are left out (the next pass derives them again), so a queue that merely moves does not
rewrite the file. The document is JSON, one element per line, which YAML also reads.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any, Final

from pydantic import ValidationError

from specs.task.arrays import element_name
from specs.task.models import API_VERSION, Phase
from specs.task.records import NameMetadata
from specs.task.status import TaskStatus, TaskStatusBody

KIND: Final = "TaskArrayStatus"
SUFFIX: Final = ".array.status.yaml"
# Derived again by every pass: never worth a write.
_DERIVED = ("queuePosition", "estimatedStartAt")
_MISSING: Final = None  # an element without a field that `common` has


class ArrayStatusError(ValueError):
    """The file is not an array status this version can read."""


def _body(status: TaskStatus) -> dict[str, Any]:
    doc = status.status.model_dump(by_alias=True, exclude_defaults=True, mode="json")
    for key in _DERIVED:
        doc.pop(key, None)
    if status.status.phase is Phase.QUEUED:
        doc.pop("message", None)  # why it waits: said again by the next pass, in its words
    return doc


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def counts(elements: Mapping[int, TaskStatus]) -> dict[str, int]:
    by_phase = Counter(s.status.phase.value for s in elements.values())
    return {phase.value: by_phase[phase.value] for phase in Phase if by_phase[phase.value]}


def dump(name: str, elements: Mapping[int, TaskStatus]) -> bytes:
    """The array's sidecar for these element statuses (by index)."""
    bodies = {index: _body(elements[index]) for index in sorted(elements)}
    common: dict[str, Any] = {}
    by_field: dict[str, Counter[str]] = {}
    for body in bodies.values():
        for field, value in body.items():
            by_field.setdefault(field, Counter())[_key(value)] += 1
    for field, seen in by_field.items():
        text, times = seen.most_common(1)[0]
        if times * 2 > len(bodies):
            common[field] = json.loads(text)
    failed = [
        {
            "index": index,
            "exitCode": elements[index].status.exit_code,
            "logTail": elements[index].status.log_tail,
        }
        for index in sorted(elements)
        if elements[index].status.phase in (Phase.FAILED, Phase.TIMED_OUT, Phase.LOST)
    ]
    lines = []
    for index, body in bodies.items():
        own = {k: v for k, v in body.items() if k not in common or _key(common[k]) != _key(v)}
        own.update({k: _MISSING for k in common if k not in body})
        lines.append(f'    "{index}": {json.dumps(own, separators=(",", ":"))}')
    head = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name},
        "size": len(elements),
        "counts": counts(elements),
        "failed": failed,
        "common": common,
    }
    text = json.dumps(head, indent=2)[:-2]  # reopen the mapping to append the elements
    return (text + ',\n  "elements": {\n' + ",\n".join(lines) + "\n  }\n}\n").encode()


def load(data: bytes) -> tuple[str, dict[int, TaskStatus]]:
    """(array name, element statuses by index); raises ArrayStatusError."""
    try:
        doc = json.loads(data)
        if doc.get("kind") != KIND:
            raise ArrayStatusError(f"kind is {doc.get('kind')!r}, not {KIND}")
        name = str(doc["metadata"]["name"])
        common: dict[str, Any] = doc.get("common") or {}
        out: dict[int, TaskStatus] = {}
        for index, own in (doc.get("elements") or {}).items():
            body = {**common, **own}
            body = {k: v for k, v in body.items() if v is not _MISSING}
            out[int(index)] = TaskStatus(
                metadata=NameMetadata(element_name(name, int(index))),
                status=TaskStatusBody.model_validate(body),
            )
        return name, out
    except (ValueError, KeyError, TypeError, AttributeError, ValidationError) as exc:
        if isinstance(exc, ArrayStatusError):
            raise
        raise ArrayStatusError(f"unreadable array status: {exc}") from None
