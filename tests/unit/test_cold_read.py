"""The read of a cold start, made cheaper without changing what it gives (issue 27,
session 7, helper `cold2`): blockyaml's text shortcut and spec_hash's JSON."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from yaml.nodes import ScalarNode

from specs import blockyaml, models

_HASH = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(),
    st.dates(),  # not JSON: the encoder's default (str) writes it
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=6), st.integers()), inner, max_size=4),
    ),
    max_leaves=12,
)


@settings(max_examples=800, deadline=None)
@given(values)
def test_hash_json_is_the_encoders_text(value: Any) -> None:
    assert _outcome(models._hash_json, value) == _outcome(_HASH.encode, value)


def _outcome(encode: Any, value: Any) -> object:
    """The text, or the error's type and words (keys of mixed types do not sort)."""
    try:
        return encode(value)
    except (TypeError, ValueError) as exc:
        return type(exc), str(exc)


def test_hash_json_takes_the_c_encoder_for_containers() -> None:
    # The shortcut is taken (else the property above compares the encoder with itself).
    assert models._MAKE_ENCODER is not None
    assert models._hash_json({"b": [1, 2.5, None], "a": "é"}) == '{"a":"\\u00e9","b":[1,2.5,null]}'
    assert models._hash_json({"d": datetime.date(2026, 1, 2)}) == '{"d":"2026-01-02"}'


def test_hash_json_refuses_a_circular_value_as_the_encoder_does() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(ValueError, match="Circular reference"):
        models._hash_json(loop)
    # and nothing is left behind: the same value without the cycle encodes after it
    loop["self"] = 1
    assert models._hash_json(loop) == '{"self":1}'


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
