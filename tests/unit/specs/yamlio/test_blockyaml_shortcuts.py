"""blockyaml's shortcuts (the plain-scalar resolver's first-character test and the like) give
exactly what PyYAML's full resolution gives."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from yaml.nodes import ScalarNode

from specs.yamlio import blockyaml


def _resolved(text: str) -> str:
    return str(blockyaml._resolver.resolve(ScalarNode, text, (True, False)))  # type: ignore[no-untyped-call]


@settings(max_examples=1500, deadline=None)
@given(st.text(min_size=1, max_size=12))
def test_a_scalar_whose_first_character_no_resolver_reads_is_text(text: str) -> None:
    # blockyaml takes such a scalar as text without asking the resolver: exact only if the
    # resolver would say text for every one of them.
    if text[0] not in blockyaml._RESOLVED_FIRST:
        assert _resolved(text) == "tag:yaml.org,2002:str"


@pytest.mark.parametrize("text", ["true", "null", "12", "1.5", "2026-01-02", "~", "<<", "=", "-1"])
def test_the_resolved_first_characters_cover_what_is_not_text(text: str) -> None:
    assert text[0] in blockyaml._RESOLVED_FIRST
    assert _resolved(text) != "tag:yaml.org,2002:str" or text == "2026-01-02"


@pytest.mark.parametrize(
    ("line", "value"),
    [("a: python x", "python x"), ("a: 12", 12), ("a: yes", True), ("a: r # c", "r")],
)
def test_lines_read_with_the_shortcut(line: str, value: object) -> None:
    assert blockyaml.load(line + "\n") == {"a": value}


def test_ascii_text_with_a_tab_or_carriage_return_goes_the_slow_way() -> None:
    assert blockyaml.load("a: 1\n") == {"a": 1}
    assert blockyaml.load("a:\t1\n") is None
    assert blockyaml.load("a: 1\r\n") is None
    assert blockyaml.load("a: é\u2028\n") is None


@pytest.mark.parametrize(
    "text",
    [
        "a:\n  - k: v1\n    j: 2\n  -  k: yes # c\n",
        "a: \nb: # open\n  c: 1\n",
        "a: b: c\n",
        "a:\n  - 'x: y'\n  - \"p: q\"\n",
        "a: 'x: y'\nb: x #: y\n",
        "# k: v\na: 1\n",
        "a: ---\nb: - x\n",
        "on: 1\n",
        "a:: 1\n",
    ],
)
def test_key_lines_read_by_their_value_alone_equal_yaml(text: str) -> None:
    # A key line seen for the first time reads its `key:` part as a line of its own (kept)
    # and only its value: what it gives is what YAML gives, or None (the slow path's).
    blockyaml._line.cache_clear()
    fast = blockyaml.load(text)
    if fast is not None:
        assert fast == yaml.safe_load(text)


def test_the_shapes_the_shortcut_reads() -> None:
    assert blockyaml.load("a:\n  - k: v1\n    j: 2\n") == {"a": [{"k": "v1", "j": 2}]}
    assert blockyaml.load("a: b: c\n") is None  # a colon and a space in a plain value
    assert blockyaml.load("a: 'x: y'\n") == {"a": "x: y"}
    assert blockyaml.load("on: 1\n") is None  # a key YAML reads as a boolean
