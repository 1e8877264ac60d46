"""JSON merge patch (RFC 7386) applied to a spec file's YAML text, keeping comments where it can.

Users hand-write spec files, so an API edit such as "priority: 7" should change that one value
and leave comments, key order and quoting alone. Each change is tried as a targeted text edit;
the result is re-read and compared with the patched document, and if anything differs (anchors,
block scalars, odd layouts) the whole document is re-dumped instead. Correctness never depends
on the text edit being clever.

Pure functions, no I/O. Callers only pass text that `specs.yamlio.parse.parse_task` already
accepted,
so loading it here cannot meet alias bombs or duplicate keys.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

import yaml
from yaml.nodes import CollectionNode, MappingNode, Node, ScalarNode

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

Path = tuple[str, ...]
_DELETE = object()  # marks a key removal in the list of edits
_SIMPLE = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")


def load_document(text: str) -> Any:
    """The plain data of a YAML document that the spec parser has already accepted."""
    return yaml.load(text, Loader=_Loader)


class _Dumper(yaml.SafeDumper):
    """Block style; no &id001 anchors for values that merely came from one alias."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    # Multi-line entrypoints read best as literal blocks; the emitter quotes when it must.
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _represent_str)


def dump_document(document: Mapping[str, Any]) -> str:
    """A readable block-style YAML document, keys in the order given."""
    return yaml.dump(
        dict(document),
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=10_000,  # long entrypoints stay on one line
    )


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null removes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def patch_text(text: str, document: Mapping[str, Any], patch: Mapping[str, Any]) -> tuple[str, Any]:
    """Apply `patch` to the YAML `text` whose data is `document`: (new text, new document)."""
    expected = merge_patch(document, patch)
    if expected == document:
        return text, expected
    edited: str | None = text
    for path, value in _edits(document, patch, ()):
        edited = _apply(edited, path, value) if edited is not None else None
        if edited is None:
            break
    if edited is not None:
        try:
            if load_document(edited) == expected:
                return edited, expected
        except yaml.YAMLError:
            pass
    return dump_document(expected), expected


def _edits(
    target: Mapping[str, Any], patch: Mapping[str, Any], path: Path
) -> Iterator[tuple[Path, Any]]:
    """The leaf changes a merge patch makes, as (path, value or _DELETE)."""
    for key, value in patch.items():
        here = (*path, key)
        if value is None:
            if key in target:
                yield here, _DELETE
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            yield from _edits(target[key], value, here)
        else:
            new = merge_patch(None, value)
            if key not in target or target[key] != new:
                yield here, new


def _apply(text: str, path: Path, value: Any) -> str | None:
    """One targeted edit, or None when the layout is not one we edit safely."""
    loader = yaml.SafeLoader(text)  # the pure loader: its marks are str indices
    try:
        root = loader.get_single_node()
    except yaml.YAMLError:
        return None
    finally:
        loader.dispose()
    node: Node | None = root
    for depth, key in enumerate(path):
        if not isinstance(node, MappingNode) or node.flow_style:
            return None
        found = _find(node, key)
        last = depth == len(path) - 1
        if found is None:
            if value is _DELETE:
                return text
            rest = path[depth + 1 :]
            for inner in reversed(rest):
                value = {inner: value}
            return _insert(text, node, key, value)
        key_node, value_node = found
        if last:
            if value is _DELETE:
                return _delete(text, node, key_node, value_node)
            return _replace(text, value_node, value)
        node = value_node
    return None


def _find(mapping: MappingNode, key: str) -> tuple[Node, Node] | None:
    for key_node, value_node in mapping.value:
        if isinstance(key_node, ScalarNode) and key_node.value == key:
            return key_node, value_node
    return None


def _replace(text: str, node: Node, value: Any) -> str | None:
    start, end = node.start_mark.index, node.end_mark.index
    if not isinstance(node, ScalarNode) or node.style not in (None, '"', "'") or start == end:
        return None  # block scalars, nested blocks and empty values: re-dump instead
    return text[:start] + _render(value) + text[end:]


def _insert(text: str, mapping: MappingNode, key: str, value: Any) -> str | None:
    """Add `key: value` as the mapping's last entry, on its own line at the same indent."""
    if not mapping.value:
        return None
    first_key = mapping.value[0][0]
    indent = _line_prefix(text, first_key.start_mark.index)
    if indent is None:
        return None
    last = _last_leaf(mapping)
    if last is None:
        return None
    newline = "\r\n" if "\r\n" in text else "\n"
    end = text.find("\n", last.end_mark.index)
    line = newline.join(_block(key, value, indent))
    if end == -1:
        return text + newline + line + newline
    return text[: end + 1] + line + newline + text[end + 1 :]


def _block(key: str, value: Any, indent: str) -> list[str]:
    """`key: value` as block lines; a non-empty mapping nests on the lines below (as a person
    would write it), anything else is one flow value."""
    if isinstance(value, dict) and value:
        lines = [f"{indent}{_render_key(key)}:"]
        for sub_key, sub_value in value.items():
            lines.extend(_block(str(sub_key), sub_value, indent + "  "))
        return lines
    return [f"{indent}{_render_key(key)}: {_render(value)}"]


def _last_leaf(node: Node) -> Node | None:
    """The node that ends a block collection, if its end mark is exact (not a block scalar)."""
    while isinstance(node, CollectionNode) and not node.flow_style:
        if not node.value:
            return None
        last = node.value[-1]
        node = last[1] if isinstance(node, MappingNode) else last
    if isinstance(node, ScalarNode) and node.style not in (None, '"', "'"):
        return None
    return node


def _delete(text: str, mapping: MappingNode, key_node: Node, value_node: Node) -> str | None:
    """Remove a one-line `key: scalar` entry, with the rest of its line (a trailing comment)."""
    if len(mapping.value) < 2 or not isinstance(value_node, ScalarNode):
        return None
    if value_node.style not in (None, '"', "'"):
        return None
    if key_node.start_mark.line != value_node.end_mark.line:
        return None
    start = key_node.start_mark.index
    if _line_prefix(text, start) is None:
        return None
    line_start = text.rfind("\n", 0, start) + 1
    end = text.find("\n", value_node.end_mark.index)
    return text[:line_start] + ("" if end == -1 else text[end + 1 :])


def _line_prefix(text: str, index: int) -> str | None:
    """The indentation before `index`, or None if anything else precedes it on its line."""
    prefix = text[text.rfind("\n", 0, index) + 1 : index]
    return prefix if prefix.strip(" ") == "" else None


def _render(value: Any) -> str:
    """A YAML flow rendering. JSON is valid YAML flow syntax for everything a patch can hold."""
    if isinstance(value, str) and _plain_ok(value):
        return value
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def _render_key(key: str) -> str:
    return key if _plain_ok(key) else json.dumps(key, ensure_ascii=False)


def _plain_ok(value: str) -> bool:
    # "yes", "null", "1e3" and friends would change type unquoted; re-reading is the test.
    if not _SIMPLE.fullmatch(value):
        return False
    try:
        return bool(yaml.safe_load(value) == value)
    except yaml.YAMLError:
        return False
