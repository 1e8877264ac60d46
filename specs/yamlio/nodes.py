"""YAML text to data with its nodes: libyaml composes (after the nesting check), and our own
builder makes the data from the nodes, so every value keeps its line and column and the limits
on size, depth and aliases hold before anything walks the expanded structure."""

from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from specs.task.errors import SpecError
from specs.yamlio.depth import TooDeep, check_nesting
from specs.yamlio.errors import (
    MAX_ERRORS,
    FatalSpecError,
    SpecParseError,
    document_error,
    dotted_path,
    node_error,
)

# Expanded size of the node graph (aliases counted each time they are used). Real specs have
# tens of nodes; this stops "billion laughs" before anything walks the expanded structure.
MAX_NODES = 100_000
# Deeper structures would later overflow recursive code (json.dumps, Ray's runtime_env).
MAX_DEPTH = 100
# libyaml's composer recurses in C (it segfaults on deeply nested collections): every text is
# checked by specs.yamlio.depth first, so it only ever composes shallow documents.

_FastLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_STR_TAG = "tag:yaml.org,2002:str"
_NULL_TAG = "tag:yaml.org,2002:null"
MERGE_TAG = "tag:yaml.org,2002:merge"
_VALUE_TAG = "tag:yaml.org,2002:value"
_BOOL_TAG = "tag:yaml.org,2002:bool"
_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
# Timestamps stay text (as in Kubernetes): everything we build must be JSON for Ray, and
# `DATE: 2024-01-01` in env_vars must not turn into a date object.
_TEXT_TAGS = frozenset({_STR_TAG, "tag:yaml.org,2002:timestamp"})
_PLAIN_TAGS = frozenset(
    {_NULL_TAG, "tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"}
)
# Field names that YAML 1.1 reads as booleans when unquoted, accepted as text where our schema
# has such a field (`spec.retry.on`, spelled as GitHub Actions spells `on:`). Elsewhere an
# unquoted `on:` key stays an error, since Ray would get the key True.
_WORD_KEYS: dict[tuple[str | int, ...], frozenset[str]] = {("spec", "retry"): frozenset({"on"})}


def load_nodes(text: str, file: str, *, single: bool) -> list[tuple[Node, Any]]:
    """Compose once, then build the data from the nodes: nodes give marks, data gives values."""
    try:
        check_nesting(text)  # before composing: a nesting bomb costs a scan, not a parse
    except TooDeep as deep:
        raise FatalSpecError(SpecError(file, None, deep.line, deep.column, deep.reason)) from None
    loader = None
    try:
        loader = _FastLoader(text)
        nodes: list[Node] = []
        if single:
            node = loader.get_single_node()
            if node is not None:
                nodes.append(node)
        else:
            while loader.check_node():
                more = loader.get_node()
                # A stray "---" at the end is an empty document, as kubectl allows.
                if more is not None and not is_empty(more):
                    nodes.append(more)
        builder = _Builder(loader, file)
        return [(node, builder.document(node)) for node in nodes]
    except yaml.MarkedYAMLError as exc:
        raise FatalSpecError(_yaml_error(file, exc, single=single)) from None
    except yaml.YAMLError as exc:
        raise FatalSpecError(document_error(file, str(exc))) from None
    finally:
        if loader is not None:
            loader.dispose()


def is_empty(node: Node) -> bool:
    return isinstance(node, ScalarNode) and node.tag == _NULL_TAG and node.value in ("", "~")


def _yaml_error(file: str, exc: yaml.MarkedYAMLError, *, single: bool) -> SpecError:
    mark = exc.problem_mark or exc.context_mark
    if (
        single
        and isinstance(exc, yaml.composer.ComposerError)
        and "single document" in str(exc.context)
    ):
        message = "expected one document, found several"
    elif exc.problem and exc.context:
        message = f"{exc.problem} ({exc.context})"
    else:
        message = exc.problem or exc.context or "invalid YAML"
    if mark is None:
        return document_error(file, message)
    return SpecError(file, None, mark.line + 1, mark.column + 1, message)


class _Builder:
    """Builds plain data from composed nodes, in the same pass rejecting what would hurt later.

    We do not call loader.construct_document: building here is several times faster (it dominates
    a cold scan of thousands of specs), and the one walk also catches duplicate and non-string keys,
    alias bombs (expanded size, memoized by node id), alias cycles and deep nesting. Numbers,
    booleans and nulls still go through the loader's safe constructors, so they are exactly what
    yaml.safe_load gives. Only JSON-like data comes out: timestamps stay strings, and other
    tags (!!binary, !!set, custom ones) are errors.
    """

    def __init__(self, loader: Any, file: str) -> None:
        self.loader = loader
        self.file = file
        self.budget = MAX_NODES  # shared by all documents of one file
        self.memo: dict[int, tuple[Any, int]] = {}
        self.open: set[int] = set()
        self.errors: list[SpecError] = []

    def document(self, root: Node) -> Any:
        data, size = self.build(root, (), 1)
        self.budget -= size
        if self.errors:
            raise SpecParseError(self.errors[:MAX_ERRORS])
        return data

    def build(self, node: Node, path: tuple[str | int, ...], depth: int) -> tuple[Any, int]:
        """(value, expanded node count) of `node`."""
        if isinstance(node, ScalarNode):
            if node.tag in _TEXT_TAGS:
                return node.value, 1
            if node.tag not in _PLAIN_TAGS:
                message = f"unsupported tag {node.tag}"
                raise FatalSpecError(
                    node_error(self.file, dotted_path(path) or None, node, message)
                )
            try:
                return self.loader.construct_object(node, deep=True), 1
            except (ValueError, OverflowError) as exc:  # e.g. an int of 5000 digits
                message = f"cannot read this value: {exc}"
                raise FatalSpecError(
                    node_error(self.file, dotted_path(path) or None, node, message)
                ) from None
        nid = id(node)
        if nid in self.memo:  # an alias: same object, as the YAML constructor would share it
            return self.memo[nid]
        if nid in self.open:
            raise FatalSpecError(
                node_error(self.file, dotted_path(path), node, "an alias refers to itself")
            )
        if depth > MAX_DEPTH:
            message = f"nesting is deeper than {MAX_DEPTH} levels"
            raise FatalSpecError(
                node_error(self.file, dotted_path(path[:3]) or None, node, message)
            )
        self.open.add(nid)
        value: dict[str, Any] | list[Any]
        if isinstance(node, MappingNode) and node.tag == _MAP_TAG:
            value, size = self._mapping(node, path, depth)
        elif isinstance(node, SequenceNode) and node.tag == _SEQ_TAG:
            value, size = self._sequence(node, path, depth)
        else:
            message = f"unsupported tag {node.tag}"
            raise FatalSpecError(node_error(self.file, dotted_path(path) or None, node, message))
        self.open.discard(nid)
        if size > self.budget:
            message = f"document has more than {MAX_NODES} nodes once aliases are expanded"
            raise FatalSpecError(node_error(self.file, dotted_path(path) or None, node, message))
        self.memo[nid] = (value, size)
        return value, size

    def _sequence(
        self, node: SequenceNode, path: tuple[str | int, ...], depth: int
    ) -> tuple[list[Any], int]:
        items: list[Any] = []
        size = 1
        for index, item in enumerate(node.value):
            value, item_size = self.build(item, (*path, index), depth + 1)
            items.append(value)
            size += item_size
        return items, size

    def _mapping(
        self, node: MappingNode, path: tuple[str | int, ...], depth: int
    ) -> tuple[dict[str, Any], int]:
        result: dict[str, Any] = {}
        merged: list[dict[str, Any]] = []
        first_line: dict[str, int] = {}
        size = 1
        for key, value in node.value:
            size += 1
            if key.tag == MERGE_TAG:  # "<<: *defaults"
                sources, merged_size = self._merge_sources(value, path, depth)
                merged.extend(sources)
                size += merged_size
                continue
            if not isinstance(key, ScalarNode) or (
                key.tag not in (_STR_TAG, _VALUE_TAG) and not self._word_key(key, path)
            ):
                shown = f" {key.value}" if isinstance(key, ScalarNode) else ""
                message = f"mapping key{shown} must be a string (quote it)"
                self.errors.append(node_error(self.file, dotted_path(path) or None, key, message))
                continue
            name: str = key.value
            line = key.start_mark.line + 1
            if name in first_line:
                message = f'duplicate key "{name}" (lines {first_line[name]} and {line})'
                self.errors.append(node_error(self.file, dotted_path((*path, name)), key, message))
                continue
            first_line[name] = line
            result[name], value_size = self.build(value, (*path, name), depth + 1)
            size += value_size
        if not merged:
            return result, size
        combined: dict[str, Any] = {}
        for source in reversed(merged):  # earlier sources win, explicit keys win over all
            combined.update(source)
        combined.update(result)
        return combined, size

    @staticmethod
    def _word_key(key: ScalarNode, path: tuple[str | int, ...]) -> bool:
        return key.tag == _BOOL_TAG and key.value in _WORD_KEYS.get(path, ())

    def _merge_sources(
        self, value: Node, path: tuple[str | int, ...], depth: int
    ) -> tuple[list[dict[str, Any]], int]:
        nodes = value.value if isinstance(value, SequenceNode) else [value]
        sources: list[dict[str, Any]] = []
        size = 0
        for source in nodes:
            if not isinstance(source, MappingNode):
                message = "<< must be given a mapping or a list of mappings"
                raise FatalSpecError(
                    node_error(self.file, dotted_path(path) or None, source, message)
                )
            data, source_size = self.build(source, path, depth + 1)
            sources.append(data)
            size += source_size
        return sources, size
