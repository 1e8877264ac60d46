"""The fastest path of specs/yamlio/parse.py: a spec in plain block style, read line by line.

A cold start reads every spec of the folder (50,000 of them), and even libyaml's composer
(specs/yamlio/fastyaml.py) builds a node per scalar in Python. Most specs are a few levels of
`key: value` lines, lists of `- item`, comments: this reads exactly that shape, in one pass
over the lines, and gives None ("take the next path") for anything else: flow style, quotes
with escapes, block scalars, anchors, tags, a value continued on the next line, a key that is
not a plain word, a repeated key, tabs, several documents. What it returns equals what the
slow path builds (tests/unit/specs/yamlio/test_blockyaml.py checks that on generated documents);
values are typed by PyYAML's own resolver and constructors, and timestamps stay text, as there. Each
distinct line is read once and kept (_line): the specs of one folder repeat most lines.
"""

from __future__ import annotations

import functools
import itertools
import re
import sys
from collections.abc import Iterator
from typing import Any

from yaml.constructor import SafeConstructor
from yaml.nodes import ScalarNode
from yaml.resolver import Resolver

_STR = "tag:yaml.org,2002:str"
_CONSTRUCTED = frozenset(
    {
        "tag:yaml.org,2002:null",
        "tag:yaml.org,2002:bool",
        "tag:yaml.org,2002:int",
        "tag:yaml.org,2002:float",
    }
)
_TEXT = frozenset({_STR, "tag:yaml.org,2002:timestamp"})
_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*):(?: +(.*))?")
# A plain value may not start with these (YAML's indicators); "-" and ":" and "?" only when
# followed by a space, which is checked apart.
_INDICATORS = frozenset("[]{}#&*!|>'\"%@`,")
_MAX_DEPTH = 64  # specs.yamlio.depth's limit: deeper goes the slow way, which names the line
# Tabs, and every line break YAML knows besides "\n" (and a byte order mark past the start).
_ODD = ("\t", "\r", "\x85", "\u2028", "\u2029", "\ufeff")
_resolver = Resolver()
# The first characters for which YAML's resolver may read a plain scalar as other than text:
# any other plain scalar is text, and is taken as it is without asking the resolver.
_RESOLVED_FIRST = frozenset(Resolver.yaml_implicit_resolvers)
_constructor = SafeConstructor()


class _Other(Exception):
    """Internal: not the shape this path reads."""


@functools.lru_cache(maxsize=8192)
def _plain(value: str) -> Any:
    tag = _resolver.resolve(ScalarNode, value, (True, False))  # type: ignore[no-untyped-call]
    if tag in _TEXT:
        return value
    if tag in _CONSTRUCTED:
        # The tag's constructor itself: construct_object would remember every node it built.
        return _constructor.yaml_constructors[tag](_constructor, ScalarNode(tag, value))
    raise _Other  # `<<` (merge), `=` (value): the slow path's


def _scalar(text: str) -> Any:
    """The value after `key: ` or `- `: a plain or simply quoted scalar, comments removed."""
    first = text[0]
    if first == "'":
        end = text.rfind("'")
        inner = text[1:end]
        rest = text[end + 1 :].strip()
        if end == 0 or (rest and not rest.startswith("#")) or "'" in inner.replace("''", ""):
            raise _Other
        return inner.replace("''", "'")
    if first == '"':
        end = text.rfind('"')
        inner = text[1:end]
        rest = text[end + 1 :].strip()
        if end == 0 or (rest and not rest.startswith("#")) or '"' in inner or "\\" in inner:
            raise _Other
        return inner
    if first in _INDICATORS or (first in "-?:" and (len(text) == 1 or text[1] == " ")):
        raise _Other
    comment = text.find(" #")
    if comment >= 0:
        text = text[:comment]
    text = text.rstrip(" ")
    if ": " in text or text.endswith(":"):
        raise _Other
    return _plain(text) if text[0] in _RESOLVED_FIRST else text


# What _line gives for a line: its indentation, its kind, and for a `key:` line the key and
# the value (_OPEN when the value is on the lines below); None: not the shape this path reads.
_OPEN = object()
_ITEM = 0  # `- value`
_ITEM_KEY = 1  # `- key: value`: a mapping as the item; `spaces` after the dash
_KEY_LINE = 2  # `key: value`
_Line = tuple[int, int, int, str, Any]  # (indent, kind, spaces, key, value)
_BLANK: _Line = (0, -1, 0, "", None)  # empty, spaces, or a comment: nothing to read
_START: _Line = (0, -2, 0, "", None)  # `---`, which only the first line read may be
_OTHER: _Line = (0, -3, 0, "", None)  # not the shape this path reads


def load(text: str) -> Any | None:
    """The data of `text` if it is a mapping in plain block style, else None."""
    if text.isascii():
        if "\t" in text or "\r" in text:  # the only odd ones in ASCII
            return None
    elif any(c in text for c in _ODD):
        return None
    try:
        return _load(text)
    except (_Other, ValueError, OverflowError, TypeError, RecursionError):
        return None


@functools.lru_cache(maxsize=4096)
def _line(line: str) -> _Line:
    """One line read on its own, kept by its text: the specs of a folder share most of their
    lines (apiVersion, kind, resources...), so a cold start reads each distinct line once.
    The values are scalars (str, int, float, bool, None): nothing a caller could change."""
    colon = line.find(": ")
    if colon > 0:
        # `key: value`, whose value most often is the line's own (a run's seed, its name):
        # the part up to the colon, `key:`, is read (and kept) as a line of its own, and only
        # the value is read here: what _read_line gives, as the key is all that precedes.
        head = _line(line[: colon + 1])
        if head[4] is _OPEN:
            value = line[colon + 2 :].lstrip(" ")
            if not value or value[0] == "#":
                return head
            try:
                return (head[0], head[1], head[2], head[3], _scalar(value))
            except (_Other, ValueError, OverflowError, TypeError, RecursionError):
                return _OTHER
    body = line.lstrip(" ")
    if not body or body[0] == "#":
        return _BLANK
    if body.rstrip(" ") == "---":
        return _START if len(body) == len(line) else _OTHER
    try:
        return _read_line(line, body)
    except (_Other, ValueError, OverflowError, TypeError, RecursionError):
        return _OTHER


def _read_line(line: str, body: str) -> _Line:
    indent = len(line) - len(body)
    if body[0] == "-" and (len(body) == 1 or body[1] == " "):
        rest = body[2:]
        spaces = len(rest) - len(rest.lstrip(" "))
        rest = rest[spaces:]
        if not rest:
            raise _Other  # `-` alone, or `- ` and spaces: an empty item, the slow path's
        if _KEY.fullmatch(rest) is None:
            return (indent, _ITEM, spaces, "", _scalar(rest))
        key, value = _key_value(rest)
        return (indent, _ITEM_KEY, spaces, key, value)
    key, value = _key_value(body)
    return (indent, _KEY_LINE, 0, key, value)


def _key_value(body: str) -> tuple[str, Any]:
    found = _KEY.fullmatch(body)
    if found is None:
        raise _Other
    # A key is kept in the dicts it names (runtimeEnv's): one object per distinct key.
    key, value = sys.intern(found.group(1)), found.group(2)
    if _plain(key) != key:
        raise _Other  # `on:`, `null:`, `1:`: keys YAML would read as something else
    if value is None or not value.strip(" ") or value.lstrip(" ")[0] == "#":
        return key, _OPEN
    return key, _scalar(value)


def _load(text: str) -> dict[str, Any] | None:
    root: dict[str, Any] = {}
    # Open collections, innermost last: (indentation of their items, the collection); the
    # innermost is also kept in locals (at, into, in_list), read on every line.
    stack: list[tuple[int, dict[str, Any] | list[Any]]] = [(0, root)]
    into: dict[str, Any] | list[Any] = root
    at, in_list = 0, False
    into_map: dict[str, Any] = root
    opened: tuple[dict[str, Any], str, int] | None = None  # `key:` waiting for its value
    lines: Iterator[_Line] = map(_line, text.split("\n"))
    for read in lines:  # up to the first line read: a document start marker may come first
        if read is _BLANK:
            continue
        if read is not _START:
            if read[1] < 0 or read[0]:
                raise _Other
            lines = itertools.chain((read,), lines)
        break
    for read in lines:
        indent, kind, spaces, key, value = read
        if kind < 0:
            if read is _BLANK:
                continue
            raise _Other
        item = kind != _KEY_LINE
        if opened is not None:
            parent, opened_key, opened_at = opened
            opened = None
            if item and indent >= opened_at:
                child: dict[str, Any] | list[Any] | None = []
            elif indent > opened_at and not item:
                child = {}
            else:
                child = None
            parent[opened_key] = child
            if child is not None:
                stack.append((indent, child))
                if len(stack) > _MAX_DEPTH:
                    raise _Other
                at, into, in_list = indent, child, item
        while at > indent or (at == indent and in_list and not item):
            stack.pop()
            if not stack:
                raise _Other
            at, into = stack[-1]
            in_list = isinstance(into, list)
        if at != indent:
            raise _Other
        if in_list:
            if not item:
                raise _Other
            if kind == _ITEM:
                into.append(value)  # type: ignore[union-attr]
                continue
            into_map = {}  # `- key: value`: a mapping as the item
            into.append(into_map)  # type: ignore[union-attr]
            at = indent + 2 + spaces
            stack.append((at, into_map))
            if len(stack) > _MAX_DEPTH:
                raise _Other
            into, in_list = into_map, False
        elif item:
            raise _Other
        else:
            into_map = into  # type: ignore[assignment]
        if key in into_map:
            raise _Other  # a repeated key: the slow path names both lines
        if value is _OPEN:
            opened = (into_map, key, at)
        else:
            into_map[key] = value
    if opened is not None:
        opened[0][opened[1]] = None
    return root or None
