"""Merge patch semantics (RFC 7386) and the comment-keeping text edits behind PATCH."""

from __future__ import annotations

from typing import Any

import pytest

from specs.yamlio.mergepatch import load_document, merge_patch, patch_text

# RFC 7386, Appendix A, row by row.
RFC_CASES = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "expected"), RFC_CASES)
def test_merge_patch_follows_rfc_7386(target: Any, patch: Any, expected: Any) -> None:
    assert merge_patch(target, patch) == expected


SPEC = """\
# Nightly training; ask #ml-infra before raising the priority.
apiVersion: rayqueue/v1
kind: Task
metadata:
  labels:
    team: vision   # owner
spec:
  entrypoint: "python train.py --epochs 3"
  priority: 2      # normal
  resources:
    cpu: 2
    memory: 4Gi
  timeoutSeconds: 300
"""


@pytest.mark.parametrize(
    ("patch", "old", "new"),
    [
        ({"spec": {"priority": 7}}, "priority: 2 ", "priority: 7 "),
        ({"spec": {"resources": {"cpu": 0.5}}}, "cpu: 2", "cpu: 0.5"),
        ({"metadata": {"labels": {"team": "nlp"}}}, "team: vision", "team: nlp"),
        ({"spec": {"timeoutSeconds": None}}, "  timeoutSeconds: 300\n", ""),
        (
            {"spec": {"suspend": True}},
            "timeoutSeconds: 300\n",
            "timeoutSeconds: 300\n  suspend: true\n",
        ),
        ({"spec": {"entrypoint": "python train.py --epochs 5"}}, "--epochs 3", "--epochs 5"),
    ],
)
def test_targeted_edits_keep_everything_else(patch: dict[str, Any], old: str, new: str) -> None:
    text, document = patch_text(SPEC, load_document(SPEC), patch)
    assert text == SPEC.replace(old, new)
    assert load_document(text) == document


@pytest.mark.parametrize(
    "patch",
    [
        {"metadata": {"labels": {"tier": "yes"}}},  # "yes" must stay a string
        {"metadata": {"annotations": {"rayqueue/restartedAt": "2024-01-01T00:00:00Z"}}},
        {"spec": {"runtimeEnv": {"env_vars": {"A": "1"}}}},
        {"spec": {"resources": None}},
        {"metadata": None},
        {"spec": {"entrypoint": "echo 'quoted' \"both\" # not a comment\nsecond line"}},
    ],
)
def test_any_patch_gives_the_patched_document(patch: dict[str, Any]) -> None:
    text, document = patch_text(SPEC, load_document(SPEC), patch)
    assert document == merge_patch(load_document(SPEC), patch)
    assert load_document(text) == document


def test_layouts_we_do_not_edit_in_place_are_redumped_faithfully() -> None:
    flow = "apiVersion: rayqueue/v1\nkind: Task\nspec: {entrypoint: x, priority: 1}\n"
    text, document = patch_text(flow, load_document(flow), {"spec": {"priority": None}})
    assert (
        load_document(text)
        == document
        == {"apiVersion": "rayqueue/v1", "kind": "Task", "spec": {"entrypoint": "x"}}
    )
    assert "&" not in text and "*" not in text


def test_a_no_op_patch_returns_the_text_unchanged() -> None:
    text, _ = patch_text(SPEC, load_document(SPEC), {"spec": {"priority": 2, "nothing": None}})
    assert text is SPEC
