"""The fast path of specs/yamlio/parse.py: plain data from a YAML text, or None for "take the slow
path".

A cold start reads every spec and sidecar of the folder. The slow path (specs/yamlio/parse.py) keeps
every node's line and column for its messages and walks the nodes with guards against alias
bombs; most files are valid and need neither. Here libyaml composes the document with a
memoizing resolver (specs repeat the same words: a scalar's tag is looked up once per value,
not matched against the resolver's regular expressions each time), and one lean recursion
builds the data. Whatever this path does not handle exactly as the slow path would gives None:
an anchor or alias, a repeated key at one level, a merge key, a key that is not a plain string,
a tag beyond JSON's (timestamps stay text, as there), a value the constructors refuse, any YAML
error. The caller validates the data and, when that fails, parses again the slow way for
line-accurate errors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

_STR = "tag:yaml.org,2002:str"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_PLAIN = frozenset(
    {
        "tag:yaml.org,2002:null",
        "tag:yaml.org,2002:bool",
        "tag:yaml.org,2002:int",
        "tag:yaml.org,2002:float",
    }
)
_MEMO_LIMIT = 50_000  # distinct scalars remembered; beyond, resolved the usual way
_MEMO_CHARS = 64  # longer ones (entrypoints) rarely repeat
_memo: dict[tuple[str, bool], str] = {}

_Parser: Any
try:
    from yaml.cyaml import CParser as _Parser  # type: ignore[attr-defined]
except ImportError:  # PyYAML without libyaml: the slow path only
    _Parser = None


class _Slow(Exception):
    """Internal: this text is for the slow path."""


class _MemoResolver(Resolver):
    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is ScalarNode and implicit[0] and len(value) <= _MEMO_CHARS:
            key = (value, bool(implicit[1]))
            tag = _memo.get(key)
            if tag is None:
                tag = super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]
                if len(_memo) < _MEMO_LIMIT:
                    _memo[key] = tag
            return tag
        return super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]

    # The safe resolver has no path resolvers: these only do bookkeeping for them.
    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        return None

    def ascend_resolver(self) -> None:
        return None


if _Parser is not None:

    class _Loader(_Parser, SafeConstructor, _MemoResolver):  # type: ignore[misc]
        def __init__(self, stream: str) -> None:
            _Parser.__init__(self, stream)
            SafeConstructor.__init__(self)
            _MemoResolver.__init__(self)


def load(text: str) -> Any | None:
    """The plain data of a one-document `text`, or None: take the slow path. `text` is already
    decoded and checked for size, characters and nesting depth."""
    if _Parser is None or "&" in text:  # an anchor (aliases need one): the guarded walk
        return None
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        return _build(node, loader.construct_object)
    except (_Slow, yaml.YAMLError, ValueError, OverflowError, TypeError):
        return None
    finally:
        loader.dispose()


def _build(node: Node, construct: Callable[..., Any]) -> Any:
    tag = node.tag
    if isinstance(node, ScalarNode):
        if tag in (_STR, _TIMESTAMP):
            return node.value
        if tag in _PLAIN:
            return construct(node)
        raise _Slow
    if isinstance(node, MappingNode) and tag == _MAP:
        out: dict[str, Any] = {}
        for key, value in node.value:
            if key.tag != _STR or not isinstance(key, ScalarNode):
                raise _Slow  # merge keys, `on:` read as a boolean, numbers: the slow path's
            out[key.value] = _build(value, construct)
        if len(out) != len(node.value):
            raise _Slow  # a repeated key: the slow path names both lines
        return out
    if isinstance(node, SequenceNode) and tag == _SEQ:
        return [_build(item, construct) for item in node.value]
    raise _Slow
