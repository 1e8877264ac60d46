"""YAML out for tasks and statuses: top-level fields in their usual order, text as literal
blocks where it has several lines."""

from __future__ import annotations

import functools
import re
from datetime import datetime
from enum import Enum
from typing import Any, ClassVar

import yaml
from pydantic import BaseModel
from yaml.nodes import ScalarNode
from yaml.resolver import Resolver

from specs.task.models import Condition, SourceRef, format_timestamp
from specs.task.records import Task
from specs.task.status import TaskStatus, TaskStatusBodyModel

_FastDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

_STR_TAG = "tag:yaml.org,2002:str"


def dump_task(task: Task) -> str:
    return _dump(task.to_document())


def dump_status(status: TaskStatus) -> str:
    direct = _direct(status)
    if direct is not None:
        return direct
    document = status.to_document()
    fast = _plain_block(document)
    return fast if fast is not None else _dump(document)


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


# --- the fast path for sidecars ----------------------------------------------------------------
# A start writes a sidecar for every task (50,000 of them), and PyYAML's representer costs
# more than the write. A status is a few levels of mappings (and the list of conditions) of
# short words, numbers and timestamps: for such a document this writes, by hand, exactly the
# text _dump writes (tests/unit/specs/yamlio/test_dump.py compares them); anything else takes _dump.

# Text the emitter writes plain when it resolves to a string: no indicator at its start, none
# of ": ", " #" inside, no space at either end, one line.
_PLAIN_TEXT = re.compile(
    r"[A-Za-z0-9_(][A-Za-z0-9_ .,;:/()@+=-]*[A-Za-z0-9_.;/()@+=-]|[A-Za-z0-9_]"
)
_QUOTABLE = re.compile(r"[ -~]*")  # printable ASCII only: single quotes hold it as it is
_MAX_SCALAR = 200  # longer text takes _dump (the emitter's own rules for long scalars)
_resolver = Resolver()
_QUOTED_START = frozenset("#,[]{}&*!|>'\"%@`")
# A word of letters and digits with at least one letter (names, uids, hashes: unique per task,
# so the cache below misses on them) resolves to a string, and is written plain, unless it is
# one of YAML 1.1's words for a boolean or null, or an int in base 2 or 16. Floats and
# timestamps need a "." or "-", other ints only digits.
_WORD = re.compile(r"[A-Za-z0-9]*[A-Za-z][A-Za-z0-9]*")
_NOT_STR_WORDS = frozenset({"yes", "no", "true", "false", "on", "off", "null"})


def _scalar(text: str) -> str | None:
    """`text` as _dump writes it in block context, or None when unsure."""
    if (
        _WORD.fullmatch(text)
        and text.lower() not in _NOT_STR_WORDS
        and not text.startswith(("0b", "0x"))
    ):
        return text  # not cached: it would push the repeated words out
    return _resolved(text)


@functools.lru_cache(maxsize=4096)
def _resolved(text: str) -> str | None:
    if len(text) > _MAX_SCALAR or not _QUOTABLE.fullmatch(text):
        return None
    resolved = _resolver.resolve(ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
    if (
        resolved == _STR_TAG
        and _PLAIN_TEXT.fullmatch(text)
        and ": " not in text
        and " #" not in text
        and not text.endswith(":")
    ):
        return text
    if not text or text[0] == " " or text[-1] == " ":
        return None  # the emitter's choice here is subtle: let it decide
    if resolved != _STR_TAG or text[0] in _QUOTED_START:
        # Plain would read back as another type, or cannot start so: PyYAML quotes it, with
        # single quotes when the text is printable on one line.
        return "'" + text.replace("'", "''") + "'"
    return None  # plain or quoted: the emitter's rules decide (it writes a#b plain)


def _plain_block(document: dict[str, Any]) -> str | None:
    ordered = {k: document[k] for k in _TOP_ORDER if k in document}
    ordered.update((k, v) for k, v in document.items() if k not in ordered)
    out: list[str] = []
    return "".join(out) if _mapping(ordered, "", out) else None


def _mapping(data: dict[str, Any], indent: str, out: list[str]) -> bool:
    if not data:
        return False
    for key, value in data.items():
        if not isinstance(key, str) or _scalar(key) != key:
            return False
        if isinstance(value, dict):
            out.append(f"{indent}{key}:\n")
            if not _mapping(value, indent + "  ", out):
                return False
        elif isinstance(value, list):
            out.append(f"{indent}{key}:\n")
            if not value:
                return False
            for item in value:  # PyYAML writes a mapping's list without extra indentation
                if not isinstance(item, dict) or not item:
                    return False
                part: list[str] = []
                if not _mapping(item, indent + "  ", part):
                    return False
                first = part[0]
                part[0] = f"{indent}- {first[len(indent) + 2 :]}"
                out.extend(part)
        else:
            written = _value(value)
            if written is None:
                return False
            out.append(f"{indent}{key}: {written}\n")
    return True


def _value(value: object) -> str | None:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Enum):  # a Phase: its value, as mode="json" writes it
        value = value.value
    if isinstance(value, str):
        return _scalar(value)
    return None  # floats and anything else: _dump


# --- the direct path: from the status's fields, without model_dump -----------------------------
# model_dump(by_alias, exclude_defaults, mode="json") and the walk above cost more than the
# file's system calls. A status is a fixed, flat set of fields: this reads them in declaration
# order (model_dump's order), leaves out those equal to their default (exclude_defaults), and
# writes each as _plain_block would; whatever it is unsure of (labels, annotations, text that
# needs the emitter's judgement, a type it does not know) returns None and takes the path above.
# tests/unit/specs/yamlio/test_dump.py checks the bytes equal the general path's on generated
# statuses.


def _fields_of(model: type[BaseModel]) -> tuple[tuple[str, str, object], ...]:
    """(attribute, alias, default) of each field, in declaration order."""
    return tuple(
        (name, field.alias or name, field.get_default(call_default_factory=True))
        for name, field in model.model_fields.items()
    )


def _field(value: object) -> str | None:
    """A field's value as the general path writes it, or None when unsure."""
    if isinstance(value, datetime):
        # Every datetime of a status is a Timestamp, which model_dump writes with
        # format_timestamp; such text resolves to YAML's timestamp type, so PyYAML quotes it.
        return "'" + format_timestamp(value) + "'"
    return _value(value)


_BODY = _fields_of(TaskStatusBodyModel)  # the record's fields, in its order (lean's test)
_CONDITION = _fields_of(Condition)
_SOURCE = _fields_of(SourceRef)


def _direct(status: TaskStatus) -> str | None:
    metadata = status.metadata
    if metadata.labels or metadata.annotations or metadata.name is None:
        return None
    name = _scalar(metadata.name)
    if name is None:
        return None
    out = ["apiVersion: rayqueue/v1\nkind: TaskStatus\nmetadata:\n  name: ", name, "\nstatus:\n"]
    body = status.status
    for attr, alias, default in _BODY:
        value = getattr(body, attr)
        if value == default:
            continue
        if attr == "conditions":
            out.append("  conditions:\n")
            for condition in value:
                if not isinstance(condition, Condition) or not _fields(
                    condition, _CONDITION, "  - ", "    ", out
                ):
                    return None
        elif attr == "source":
            if not isinstance(value, SourceRef):
                return None
            out.append("  source:\n")
            if not _fields(value, _SOURCE, "    ", "    ", out):
                return None
        else:
            written = _field(value)
            if written is None:
                return None
            out.append(f"  {alias}: {written}\n")
    return "".join(out)


def _fields(
    model: BaseModel,
    fields: tuple[tuple[str, str, object], ...],
    first: str,
    indent: str,
    out: list[str],
) -> bool:
    """The non-default fields of a flat `model`, one a line; the first line starts `first`."""
    lead, start = first, len(out)
    for attr, alias, default in fields:
        value = getattr(model, attr)
        if value == default:
            continue
        written = _field(value)
        if written is None:
            return False
        out.append(f"{lead}{alias}: {written}\n")
        lead = indent
    return len(out) > start  # an empty mapping: the general path writes {}
