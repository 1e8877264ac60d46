"""specs/yamlio/blockyaml.py reads plain block style exactly as the slow path does, or not at
all."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specs.yamlio import blockyaml, parse
from specs.yamlio.errors import FatalSpecError


def slow(text: str) -> Any:
    """What the line-accurate slow path builds, or an error marker."""
    try:
        docs = parse.load_nodes(text, "f.yaml", single=True)
    except FatalSpecError:
        return "<error>"
    return docs[0][1] if docs else "<empty>"


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (True is not 1 here)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b) or (a != a and b != b)  # NaN


def check(text: str) -> Any:
    fast = blockyaml.load(text)
    if fast is not None:
        reference = slow(text)
        assert same(fast, reference), (text, fast, reference)
    return fast


WORDS = [
    "a",
    "b",
    "true",
    "no",
    "on",
    "null",
    "~",
    "12",
    "-3",
    "0x1f",
    "1_000",
    "1e3",
    "1.5e+3",
    ".5",
    ".inf",
    "-.inf",
    ".nan",
    "0o7",
    "07",
    "08",
    "1:20",
    "2026-12-01",
    "2026-12-01T15:41:10Z",
    "=",
    "<<",
    "a b",
    "a:b",
    "a: b",
    "a:",
    "a #b",
    "a#b",
    "#x",
    "- x",
    "-x",
    "-",
    "?x",
    "? x",
    ":x",
    "'q'",
    "'it''s'",
    "'a'b'",
    '"q"',
    '"a\\"b"',
    '"a\\nb"',
    "[a]",
    "{a: 1}",
    "a, b",
    "|",
    ">",
    "&a x",
    "*a",
    "!!str 1",
    "%x",
    "@x",
    "`x",
    "é",
    "python train.py --lr 0.1",
    "''",
    '""',
    "' '",
    "'a' # c",
    '"a" # c',
    "x # c",
    "x #",
    "  x",
    "x  ",
]
KEYS = ["a", "b", "spec", "cpu", "on", "yes", "null", "True", "x-y", "k_1", "a.b", "<<", "'q'", "1"]


@st.composite
def documents(draw: st.DrawFn, depth: int = 0) -> str:
    lines: list[str] = []
    indent = draw(st.sampled_from([2, 3, 4]))
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=4))
    for key in keys:
        kind = draw(
            st.sampled_from(
                ["scalar", "scalar", "map", "list", "empty"] if depth < 3 else ["scalar"]
            )
        )
        gap = draw(st.sampled_from([" ", " ", "  "]))
        if kind == "scalar":
            lines.append(f"{key}:{gap}{draw(st.sampled_from(WORDS))}")
        elif kind == "empty":
            lines.append(f"{key}:" + draw(st.sampled_from(["", " ", " # c"])))
        elif kind == "map":
            lines.append(f"{key}:")
            inner = draw(documents(depth + 1))
            lines += [" " * indent + line if line else line for line in inner.split("\n")]
        else:
            lines.append(f"{key}:")
            lead = " " * draw(st.sampled_from([0, indent]))
            for _ in range(draw(st.integers(1, 3))):
                if draw(st.booleans()):
                    lines.append(f"{lead}- {draw(st.sampled_from(WORDS))}")
                else:
                    inner = draw(documents(depth + 1)).split("\n")
                    lines.append(f"{lead}- {inner[0]}")
                    lines += [f"{lead}  {line}" if line else line for line in inner[1:]]
        if draw(st.integers(0, 5)) == 0:
            lines.append(
                draw(st.sampled_from(["# note", "", "  # indented note", "  stray", "- x"]))
            )
    return "\n".join(lines)


@given(
    documents(),
    st.sampled_from(["", "---\n", "# head\n", " "]),
    st.sampled_from(["", "\n", "\n...\n"]),
)
@settings(max_examples=600, deadline=None)
def test_generated_documents_read_as_the_slow_path_reads_them(
    body: str, head: str, tail: str
) -> None:
    check(head + body + tail)


@given(documents(), st.data())
@settings(max_examples=200, deadline=None)
def test_damaged_documents_read_as_the_slow_path_reads_them(body: str, data: st.DataObject) -> None:
    at = data.draw(st.integers(0, len(body)))
    inserted = data.draw(
        st.sampled_from([" ", "\n", ":", "-", "#", "'", '"', "\t", "x", "\u2028", "[", "&"])
    )
    check(body[:at] + inserted + body[at + 1 :])
    check(body[:at] + inserted + body[at:])


TASK = """\
# A task as users write them
apiVersion: rayqueue/v1
kind: Task
metadata:
  name: train  # the file's stem
spec:
  entrypoint: python train.py --epochs 3
  priority: 5
  resources:
    cpu: 1
    gpu: 0.5
  dependsOn:
  - name: prep
  runtimeEnv:
    env_vars:
      DATE: 2024-01-01
      QUOTED: 'it''s'
"""


def test_a_usual_spec_takes_this_path() -> None:
    data = check(TASK)
    assert data is not None
    assert data["spec"]["dependsOn"] == [{"name": "prep"}]
    assert data["spec"]["runtimeEnv"]["env_vars"] == {"DATE": "2024-01-01", "QUOTED": "it's"}
    assert data["spec"]["resources"] == {"cpu": 1, "gpu": 0.5}


def test_numbers_read_leave_nothing_behind() -> None:
    for n in range(100):
        assert blockyaml.load(f"a: {n}.5\nb: 0x{n:x}\n") == {"a": n + 0.5, "b": n}
    assert not blockyaml._constructor.constructed_objects  # a long-running serve keeps none


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\na: 2\n",  # a repeated key: the slow path names both lines
        "on: 1\n",  # a key YAML 1.1 reads as a boolean
        "a: |\n  text\n",  # block scalar
        "a: [1, 2]\n",  # flow style
        "a: &x 1\nb: *x\n",  # anchors
        "a: b\n  continued\n",  # a plain value on two lines
        "a: 1\n---\nb: 2\n",  # two documents
        "a:\tb\n",  # a tab
        "- a\n- b\n",  # not a mapping
        "",
    ],
)
def test_other_shapes_take_another_path(text: str) -> None:
    assert blockyaml.load(text) is None


def test_deep_nesting_takes_the_slow_path_which_names_the_line() -> None:
    text = "".join(f"{'  ' * i}k{i}:\n" for i in range(70)) + f"{'  ' * 70}v: 1\n"
    assert blockyaml.load(text) is None
    assert slow(text) == "<error>"


@pytest.mark.parametrize("text", ["a:\n  - \n  - x\n", "a:\n- \n", "a:\n  -   \n"])
def test_an_empty_item_with_trailing_spaces_takes_the_slow_path(text: str) -> None:
    # It raised IndexError here, and the spec read as "could not parse: IndexError".
    assert blockyaml.load(text) is None
    assert slow(text) != "<error>"


def test_a_spec_with_an_empty_list_item_reads_as_yaml_says() -> None:
    text = TASK.replace("  - name: prep\n", "  - name: prep\n  - \n")
    assert blockyaml.load(text) is None
    with pytest.raises(parse.SpecParseError) as info:
        parse.parse_task(text, file="train.yaml")
    assert "IndexError" not in str(info.value)
    assert str(info.value).startswith("train.yaml:14:")  # the line of the empty item


def test_lines_shared_between_documents_give_separate_collections() -> None:
    # Lines are read once and kept (_line); what a document builds from them is its own.
    first, second = blockyaml.load(TASK), blockyaml.load(TASK)
    assert first is not None and first == second and first is not second
    first["spec"]["dependsOn"].append({"name": "other"})
    first["spec"]["resources"]["cpu"] = 8
    assert second == blockyaml.load(TASK) == check(TASK)
