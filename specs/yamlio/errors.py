"""Errors for spec files: SpecParseError (all of a file's problems, each a SpecError of
specs.task.errors: file, field, line and column), and the helpers that word and place them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from yaml.nodes import Node

from specs.task.errors import SpecError

_PREFIXES = ("Input should ", "String should ", "Value should ", "List should ")
_TYPE_MESSAGES = {
    "missing": "required field is missing",
    "extra_forbidden": "unknown field",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "dict_type": "must be a mapping",
}
MAX_ERRORS = 20  # the most problems one file reports

Problem = tuple[tuple[str | int, ...], str]
"""A problem found after validation: the field's path in the document, and what is wrong."""


class SpecParseError(ValueError):
    """A file is not a valid task (or status); `errors` lists every problem found."""

    def __init__(self, errors: Sequence[SpecError]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(str(e) for e in self.errors))


class FatalSpecError(Exception):
    """One problem that ends the parse at once (bad YAML, a file too large, an empty one); the
    parser's boundary raises it as a SpecParseError of that one error."""

    def __init__(self, error: SpecError) -> None:
        self.error = error


def validation_message(err: Any) -> str:
    """One pydantic error (an item of ValidationError.errors()) in our words."""
    kind: str = err["type"]
    if kind in _TYPE_MESSAGES:
        return _TYPE_MESSAGES[kind]
    message: str = err["msg"]
    if kind == "value_error":
        return message.removeprefix("Value error, ")
    for prefix in _PREFIXES:
        if message.startswith(prefix):
            message = "must " + message.removeprefix(prefix)
            break
    value = err.get("input")
    if isinstance(value, bool | int | float | str) or value is None:
        shown = repr(value) if not isinstance(value, str) or len(value) <= 40 else "a long string"
        message += f" (got {shown})"
    return message


def dotted_path(path: Sequence[str | int]) -> str:
    """A field's path as a user writes it: spec.dependsOn[0].name."""
    out = ""
    for segment in path:
        out += f"[{segment}]" if isinstance(segment, int) else (f".{segment}" if out else segment)
    return out


def line_of(node: Node | None) -> int | None:
    """The 1-based line a node starts on."""
    return None if node is None else node.start_mark.line + 1


def node_error(file: str, field: str | None, node: Node | None, message: str) -> SpecError:
    """A problem placed at the line and column where `node` starts (unplaced without one)."""
    if node is None:
        return SpecError(file, field, None, None, message)
    mark = node.start_mark
    return SpecError(file, field, mark.line + 1, mark.column + 1, message)


def document_error(file: str, message: str) -> SpecError:
    """A problem of the whole file, with no field, line or column."""
    return SpecError(file, None, None, None, message)
