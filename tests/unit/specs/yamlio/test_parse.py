"""Parsing task and status YAML: values, every validation error with its location, and fuzzing."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specs.task.errors import SpecError
from specs.task.models import Condition, Metadata, Phase, Resources
from specs.task.records import Task, TaskSpec
from specs.task.status import TaskStatus, TaskStatusBody
from specs.yamlio import nodes as yamlnodes
from specs.yamlio import parse
from specs.yamlio.depth import MAX_NESTING
from specs.yamlio.parse import (
    MAX_DEPTH,
    MAX_FILE_BYTES,
    SpecParseError,
    dump_status,
    dump_task,
    parse_status,
    parse_task,
    parse_tasks,
)

GIB = 2**30
FUZZ = settings(
    database=None,
    deadline=None,
    max_examples=300,
    suppress_health_check=[HealthCheck.too_slow],
)

# The example from the issue, comments and all.
ISSUE_EXAMPLE = """\
apiVersion: rayqueue/v1
kind: Task
metadata:
  name: train            # optional; if present it must equal the file's stem
  labels: {team: vision} # optional, string to string
  annotations: {}        # optional; see "runs" below
spec:
  entrypoint: python train.py --epochs 3       # required, non-empty
  runtimeEnv:                                 # optional; handed to Ray unchanged
    working_dir: /home/ray/src/mlumina
  priority: 5                                 # integer 0..9, default 0; 9 runs first
  resources:
    cpu: 2                                    # >= 0, may be fractional
    gpu: 0                                    # >= 0, may be fractional
    memory: 4Gi                               # a quantity or a bare number meaning GiB
  timeoutSeconds: 300                         # >= 0; 0 or absent: none
  suspend: false                              # true: do not run; stop it if it runs
  submissionId: null                          # optional explicit Ray submission id
"""

HEAD = "apiVersion: rayqueue/v1\nkind: Task\n"


def errors_of(text: str | bytes, expected_name: str | None = None) -> list[SpecError]:
    with pytest.raises(SpecParseError) as caught:
        parse_task(text, file="t.yaml", expected_name=expected_name)
    return caught.value.errors


def only_error(text: str | bytes, expected_name: str | None = None) -> SpecError:
    errors = errors_of(text, expected_name)
    assert len(errors) == 1, errors
    return errors[0]


def make_task(**spec: Any) -> Task:
    spec.setdefault("entrypoint", "python x.py")
    spec.setdefault("resources", Resources(cpu=1))
    return Task(api_version="rayqueue/v1", kind="Task", spec=TaskSpec(**spec))


# --- valid specs -----------------------------------------------------------------------------


def test_issue_example_parses() -> None:
    task = parse_task(ISSUE_EXAMPLE, file="train.yaml", expected_name="train")
    assert task.metadata.name == "train"
    assert task.metadata.labels == {"team": "vision"}
    assert task.spec.entrypoint == "python train.py --epochs 3"
    assert task.spec.runtime_env == {"working_dir": "/home/ray/src/mlumina"}
    assert task.spec.priority == 5
    assert task.spec.resources == Resources(cpu=2, gpu=0, memory="4Gi")
    assert task.spec.resources.memory == 4 * GIB
    assert task.spec.timeout_seconds == 300
    assert task.spec.suspend is False
    assert task.spec.submission_id is None


def test_bytes_and_str_give_the_same_task() -> None:
    as_bytes = parse_task(ISSUE_EXAMPLE.encode(), file="t.yaml")
    assert as_bytes == parse_task(ISSUE_EXAMPLE, file="t.yaml")


def test_utf8_bom_is_accepted() -> None:
    task = parse_task(b"\xef\xbb\xbf" + ISSUE_EXAMPLE.encode(), file="t.yaml")
    assert task.metadata.name == "train"


@pytest.mark.parametrize(
    ("memory", "expected"),
    [
        ("4", 4 * GIB),  # a bare number means GiB, as in the legacy API
        ("0.5", GIB // 2),
        ("'512Mi'", 512 * 2**20),
        ("512Mi", 512 * 2**20),
        ("2G", 2 * 10**9),
        ("2000000B", 2_000_000),
        ("1.5Gi", 3 * GIB // 2),
        ('"4"', 4 * GIB),
    ],
)
def test_memory_quantities(memory: str, expected: int) -> None:
    text = HEAD + f"spec:\n  entrypoint: x\n  resources:\n    memory: {memory}\n"
    assert parse_task(text, file="t.yaml").spec.resources.memory == expected


@pytest.mark.parametrize(
    ("resources", "named"),
    [
        ("{cpu: 5e-324}", "cpu 4.94066e-324 is below the smallest request, 0.01"),
        ("{cpu: 0.001, memory: 1Gi}", "cpu 0.001 is below the smallest request, 0.01"),
        ("{gpu: 0.001}", "gpu 0.001 is below the smallest request, 0.01"),
        ("{memory: 100B}", "memory 100 bytes is below the smallest request, 1Mi"),
    ],
)
def test_a_request_too_small_to_count_is_refused(resources: str, named: str) -> None:
    """Both readers (the plain fast path and the model) refuse it, with the model's words."""
    text = HEAD + f"spec:\n  entrypoint: x\n  resources: {resources}\n"
    with pytest.raises(SpecParseError) as caught:
        parse_task(text, file="t.yaml")
    assert named in str(caught.value) and "(0 means none)" in str(caught.value)


@pytest.mark.parametrize("resources", ["{cpu: 0.01}", "{cpu: 0, gpu: 1}", "{memory: 1Mi, cpu: 0}"])
def test_the_smallest_request_and_a_zero_are_allowed(resources: str) -> None:
    text = HEAD + f"spec:\n  entrypoint: x\n  resources: {resources}\n"
    assert not parse_task(text, file="t.yaml").spec.resources.is_empty()


def test_nothing_requested_keeps_its_words() -> None:
    text = HEAD + "spec:\n  entrypoint: x\n  resources: {cpu: 0}\n"
    with pytest.raises(SpecParseError, match="task must request at least one resource"):
        parse_task(text, file="t.yaml")


def test_metadata_name_may_be_absent_even_with_expected_name() -> None:
    text = HEAD + "spec: {entrypoint: x, resources: {cpu: 1}}\n"
    assert parse_task(text, file="t.yaml", expected_name="t").metadata.name is None


def test_name_is_not_checked_without_expected_name() -> None:
    text = HEAD + "metadata: {name: other}\nspec: {entrypoint: x, resources: {gpu: 1}}\n"
    assert parse_task(text, file="t.yaml").metadata.name == "other"


def test_merge_keys_and_anchors_work() -> None:
    # A spec mapping built from an anchor, with one key overridden.
    text = HEAD + "spec:\n  <<: &d {entrypoint: python a.py, priority: 2, resources: {cpu: 1}}\n"
    text += "  priority: 7\n"
    task = parse_task(text, file="t.yaml")
    assert (task.spec.entrypoint, task.spec.priority) == ("python a.py", 7)


def test_errors_inside_merged_mappings_point_at_their_source() -> None:
    text = HEAD + "spec:\n  <<: {entrypoint: x, priority: 11, resources: {cpu: 1}}\n"
    error = only_error(text)
    assert (error.field, error.line, error.column) == ("spec.priority", 4, 33)


def test_timestamps_stay_strings_for_ray() -> None:
    text = HEAD + (
        "spec:\n  entrypoint: x\n  resources: {cpu: 1}\n"
        "  runtimeEnv: {env_vars: {DAY: 2024-01-01}}\n"
    )
    task = parse_task(text, file="t.yaml")
    assert task.spec.runtime_env == {"env_vars": {"DAY": "2024-01-01"}}


# --- invalid specs: one row per rule ---------------------------------------------------------


def spec_with(*lines: str, resources: str | None = "  resources: {cpu: 1}") -> str:
    body = list(lines) + ([resources] if resources else [])
    return HEAD + "spec:\n" + "".join(f"{line}\n" for line in body)


INVALID = [
    # (id, text, field, line, column, message)
    (
        "missing entrypoint",
        spec_with(),
        "spec.entrypoint",
        4,
        3,
        "required field is missing",
    ),
    (
        "blank entrypoint",
        spec_with("  entrypoint: '   '"),
        "spec.entrypoint",
        4,
        15,
        "entrypoint must not be blank",
    ),
    (
        "empty entrypoint",
        spec_with("  entrypoint: ''"),
        "spec.entrypoint",
        4,
        15,
        "must have at least 1 character (got '')",
    ),
    (
        "entrypoint not a string",
        spec_with("  entrypoint: [python, x.py]"),
        "spec.entrypoint",
        4,
        15,
        "must be a valid string",
    ),
    (
        "priority 10",
        spec_with("  entrypoint: x", "  priority: 10"),
        "spec.priority",
        5,
        13,
        "must be less than or equal to 9 (got 10)",
    ),
    (
        "priority -1",
        spec_with("  entrypoint: x", "  priority: -1"),
        "spec.priority",
        5,
        13,
        "must be greater than or equal to 0 (got -1)",
    ),
    (
        "priority not a number",
        spec_with("  entrypoint: x", "  priority: high"),
        "spec.priority",
        5,
        13,
        "must be a valid integer, unable to parse string as an integer (got 'high')",
    ),
    (
        "negative cpu",
        spec_with("  entrypoint: x", resources="  resources: {cpu: -1}"),
        "spec.resources.cpu",
        5,
        20,
        "must be greater than or equal to 0 (got -1)",
    ),
    (
        "NaN cpu",
        spec_with("  entrypoint: x", resources="  resources: {cpu: .nan}"),
        "spec.resources.cpu",
        5,
        20,
        "must be a finite number (got nan)",
    ),
    (
        "infinite gpu",
        spec_with("  entrypoint: x", resources="  resources: {gpu: .inf}"),
        "spec.resources.gpu",
        5,
        20,
        "must be a finite number (got inf)",
    ),
    (
        "infinite memory",
        spec_with("  entrypoint: x", resources="  resources: {memory: -.inf}"),
        "spec.resources.memory",
        5,
        23,
        "must be a finite number",
    ),
    (
        "bad memory string",
        spec_with("  entrypoint: x", resources="  resources: {memory: 4Gb}"),
        "spec.resources.memory",
        5,
        23,
        "'4Gb' is not a quantity; use a number of GiB or 512Mi, 4Gi, 2G, 1024B",
    ),
    (
        "negative memory",
        spec_with("  entrypoint: x", resources="  resources: {memory: -2}"),
        "spec.resources.memory",
        5,
        23,
        "must be >= 0",
    ),
    (
        "absurd memory overflows float",  # was an OverflowError escaping pydantic
        spec_with("  entrypoint: x", resources="  resources: {memory: " + "9" * 400 + "}"),
        "spec.resources.memory",
        5,
        23,
        "is larger than any cluster could hold",
    ),
    (
        "no resources at all",
        spec_with("  entrypoint: x", resources=None),
        "spec.resources",
        4,
        3,
        "task must request at least one resource",
    ),
    (
        "all resources zero",
        spec_with("  entrypoint: x", resources="  resources: {cpu: 0, gpu: 0, memory: 0}"),
        "spec.resources",
        5,
        14,
        "task must request at least one resource",
    ),
    (
        "unknown field (typo)",
        spec_with("  entrypoint: x", "  priorty: 3"),
        "spec.priorty",
        5,
        3,
        "unknown field",
    ),
    (
        "unknown top-level field",
        HEAD + "status: {}\nspec: {entrypoint: x, resources: {cpu: 1}}\n",
        "status",
        3,
        1,
        "unknown field",
    ),
    (
        "wrong apiVersion",
        "apiVersion: rayqueue/v2\nkind: Task\nspec: {entrypoint: x, resources: {cpu: 1}}\n",
        "apiVersion",
        1,
        13,
        "must be 'rayqueue/v1' (got 'rayqueue/v2')",
    ),
    (
        "wrong kind",
        "apiVersion: rayqueue/v1\nkind: Job\nspec: {entrypoint: x, resources: {cpu: 1}}\n",
        "kind",
        2,
        7,
        "must be 'Task' (got 'Job')",
    ),
    (
        "negative timeout",
        spec_with("  entrypoint: x", "  timeoutSeconds: -5"),
        "spec.timeoutSeconds",
        5,
        19,
        "must be greater than or equal to 0 (got -5)",
    ),
    (
        "empty submission id",
        spec_with("  entrypoint: x", "  submissionId: ''"),
        "spec.submissionId",
        5,
        17,
        "must have at least 1 character (got '')",
    ),
    (
        "label value not a string",
        HEAD + "metadata:\n  labels: {team: 7}\nspec: {entrypoint: x, resources: {cpu: 1}}\n",
        "metadata.labels.team",
        4,
        18,
        "must be a valid string (got 7)",
    ),
    (
        "spec is a list",
        HEAD + "spec: [entrypoint]\n",
        "spec",
        3,
        7,
        "must be a mapping",
    ),
    (
        "spec is empty",
        HEAD + "spec:\n",
        "spec",
        3,
        6,
        "must be a mapping",
    ),
    (
        "runtimeEnv not a mapping",
        spec_with("  entrypoint: x", "  runtimeEnv: pip"),
        "spec.runtimeEnv",
        5,
        15,
        "must be a mapping",
    ),
    (
        "name differs from the file's stem",
        HEAD + "metadata: {name: other}\nspec: {entrypoint: x, resources: {cpu: 1}}\n",
        "metadata.name",
        3,
        18,
        'metadata.name "other" must equal the file\'s stem "t"',
    ),
    (
        "duplicate key",
        spec_with("  entrypoint: x", "  entrypoint: y"),
        "spec.entrypoint",
        5,
        3,
        'duplicate key "entrypoint" (lines 4 and 5)',
    ),
    (
        "non-string key",
        spec_with("  entrypoint: x", "  runtimeEnv: {1: one}"),
        "spec.runtimeEnv",
        5,
        16,
        "mapping key 1 must be a string (quote it)",
    ),
    (
        "yaml 1.1 boolean key",
        spec_with("  entrypoint: x", "  runtimeEnv: {on: push}"),
        "spec.runtimeEnv",
        5,
        16,
        "mapping key on must be a string (quote it)",
    ),
    (
        "unsupported tag",
        spec_with("  entrypoint: !!binary aGVsbG8="),
        "spec.entrypoint",
        4,
        15,
        "unsupported tag tag:yaml.org,2002:binary",
    ),
    (
        "python object tag",
        HEAD + "spec: !!python/object:os.system {}\n",
        "spec",
        3,
        7,
        "unsupported tag tag:yaml.org,2002:python/object:os.system",
    ),
]


@pytest.mark.parametrize(
    ("text", "field", "line", "column", "message"),
    [row[1:] for row in INVALID],
    ids=[row[0] for row in INVALID],
)
def test_invalid_spec(text: str, field: str, line: int, column: int, message: str) -> None:
    error = only_error(text, expected_name="t")
    assert error == SpecError("t.yaml", field, line, column, message)


def test_several_errors_are_all_reported_in_field_order() -> None:
    text = spec_with("  entrypoint: ''", "  priority: 10", "  priorty: 1")
    fields = [e.field for e in errors_of(text)]
    assert fields == ["spec.entrypoint", "spec.priority", "spec.priorty"]


DOCUMENT_ERRORS = [
    # (id, text, line, column, message)
    ("empty file", "", None, None, "empty file"),
    ("only comments", "# nothing here\n\n", None, None, "empty file"),
    ("a list", "- a\n- b\n", 1, 1, "expected a mapping with apiVersion, kind, metadata and spec"),
    ("a scalar", "hello\n", 1, 1, "expected a mapping with apiVersion, kind, metadata and spec"),
    ("explicit null document", "---\n", 2, 1, "expected a mapping"),
    (
        "several documents",
        HEAD + "spec: {entrypoint: x, resources: {cpu: 1}}\n---\n" + HEAD,
        4,
        1,
        "expected one document, found several",
    ),
    (
        "tab indentation",
        HEAD + "spec:\n\tentrypoint: x\n",
        4,
        1,
        "found character that cannot start any token (while scanning for the next token)",
    ),
    (
        "unclosed flow mapping",
        HEAD + "spec: {entrypoint: x\nfoo: bar\n",
        4,
        4,
        "did not find expected ',' or '}' (while parsing a flow mapping)",
    ),
    (
        "bad indentation",
        HEAD + "spec:\n  entrypoint: x\n   priority: 1\n",
        5,
        12,
        "mapping values are not allowed in this context",
    ),
    ("NUL character", HEAD + "spec:\x00\n", 3, 6, "character U+0000 is not allowed in YAML"),
    ("escape character", "a: b\nc: \x1b[0m\n", 2, 4, "character U+001B is not allowed in YAML"),
]


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [row[1:] for row in DOCUMENT_ERRORS],
    ids=[row[0] for row in DOCUMENT_ERRORS],
)
def test_document_errors(text: str, line: int | None, column: int | None, message: str) -> None:
    error = only_error(text)
    assert (error.line, error.column) == (line, column)
    assert error.message.startswith(message)
    assert error.field is None


def test_duplicate_keys_name_the_key_and_both_lines() -> None:
    text = "apiVersion: rayqueue/v1\nkind: Task\nspec: {}\nkind: Task\n"
    error = only_error(text)
    assert error.message == 'duplicate key "kind" (lines 2 and 4)'
    assert (error.field, error.line) == ("kind", 4)


def test_file_over_one_mebibyte_is_rejected_before_parsing(monkeypatch: Any) -> None:
    def no_parsing(*args: object, **kwargs: object) -> None:
        raise AssertionError("parsed a file over the limit")

    monkeypatch.setattr(parse, "load_nodes", no_parsing)
    big = ISSUE_EXAMPLE + "#" * MAX_FILE_BYTES
    for text in (big, big.encode()):
        error = only_error(text)
        assert error.message == "file is larger than the 1024 KiB limit"
    # Multi-byte characters: under the limit in characters, over it in bytes.
    error = only_error("é" * (MAX_FILE_BYTES // 2 + 1))
    assert error.message == "file is larger than the 1024 KiB limit"


def test_file_at_the_limit_is_parsed() -> None:
    padding = "#" * (MAX_FILE_BYTES - len(ISSUE_EXAMPLE) - 1) + "\n"
    text = (ISSUE_EXAMPLE + padding).encode()
    assert len(text) == MAX_FILE_BYTES
    assert parse_task(text, file="t.yaml").metadata.name == "train"


@pytest.mark.parametrize(
    ("data", "line", "column", "message"),
    [
        (b"a: \xff\n", 1, 4, "not valid UTF-8 (byte 0xff at offset 3)"),
        (b"a: 1\nbb: x\xc3(\n", 2, 6, "not valid UTF-8 (byte 0xc3 at offset 10)"),
        (b"\xef\xbb\xbfa: \xff", 1, 4, "not valid UTF-8 (byte 0xff at offset 6)"),
        ("a: é\n".encode("latin-1"), 1, 4, "not valid UTF-8 (byte 0xe9 at offset 3)"),
        (b"\xff\xfea\x00:\x00", 1, 1, "not valid UTF-8 (byte 0xff at offset 0)"),  # UTF-16
    ],
)
def test_non_utf8(data: bytes, line: int, column: int, message: str) -> None:
    assert only_error(data) == SpecError("t.yaml", None, line, column, message)


def billion_laughs(levels: int) -> str:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels):
        refs = ", ".join([f"*a{i - 1}"] * 10)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + "\n"


def test_alias_bomb_is_rejected_cheaply() -> None:
    error = only_error(billion_laughs(9))  # 10**9 nodes if expanded
    assert error.message == "document has more than 100000 nodes once aliases are expanded"
    assert error.line is not None


def test_small_alias_expansion_is_fine() -> None:
    text = billion_laughs(3) + HEAD + "spec: {entrypoint: x, resources: {cpu: 1}}\n"
    errors = errors_of(text)
    # Not a bomb: the only complaints are the unknown top-level fields.
    assert {e.message for e in errors} == {"unknown field"}


def test_many_plain_nodes_are_rejected_too() -> None:
    text = "a: [" + ", ".join(["1"] * (yamlnodes.MAX_NODES + 10)) + "]\n"
    assert "more than 100000 nodes" in only_error(text).message


def test_alias_cycle_is_rejected() -> None:
    error = only_error("a: &x [1, *x]\n")
    assert error.message == "an alias refers to itself"
    assert (error.field, error.line) == ("a[1]", 1)


@pytest.mark.parametrize("depth", [MAX_DEPTH + 5, 3000, 300_000])
def test_deep_nesting_is_rejected(depth: int) -> None:
    # 300k would crash libyaml's recursive composer; specs.yamlio.depth refuses it before.
    error = only_error("a: " + "[" * depth + "]" * depth + "\n")
    assert "nesting is" in error.message


def test_nesting_at_the_limit_is_fine() -> None:
    depth = MAX_NESTING - 3  # the root mapping, spec and runtimeEnv are levels too
    nested = "[" * depth + "]" * depth
    text = spec_with("  entrypoint: x", f"  runtimeEnv: {{deep: {nested}}}")
    assert parse_task(text, file="t.yaml").spec.runtime_env is not None


def test_unexpected_exceptions_become_spec_errors(monkeypatch: Any) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("surprise")

    monkeypatch.setattr(yamlnodes._Builder, "document", broken)
    monkeypatch.setattr(parse.fastyaml, "load", broken)  # the fast path, tried first
    error = only_error(ISSUE_EXAMPLE)
    assert error.message == "could not parse: KeyError: 'surprise'"


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (SpecError("a.yaml", "spec.cpu", 3, 7, "bad"), "a.yaml:3:7: spec.cpu: bad"),
        (SpecError("a.yaml", None, 3, 7, "bad"), "a.yaml:3:7: bad"),
        (SpecError("a.yaml", "spec", None, None, "bad"), "a.yaml: spec: bad"),
        (SpecError("a.yaml", None, None, None, "empty file"), "a.yaml: empty file"),
        (SpecError("a.yaml", None, 3, None, "bad"), "a.yaml:3: bad"),
    ],
)
def test_spec_error_str(error: SpecError, text: str) -> None:
    assert str(error) == text


def test_spec_parse_error_joins_errors_by_line() -> None:
    exc = SpecParseError([SpecError("a", None, 1, 1, "x"), SpecError("a", "f", 2, 1, "y")])
    assert str(exc) == "a:1:1: x\na:2:1: f: y"
    assert isinstance(exc, ValueError)


# --- several tasks per file (CLI apply -f) ---------------------------------------------------


def named(name: str, cpu: int = 1) -> str:
    spec = f"spec: {{entrypoint: x, resources: {{cpu: {cpu}}}}}\n"
    return HEAD + f"metadata: {{name: {name}}}\n" + spec


def test_parse_tasks_reads_every_document() -> None:
    tasks = parse_tasks(named("a") + "---\n" + named("b", 2) + "---\n", file="all.yaml")
    assert [(t.metadata.name, t.spec.resources.cpu) for t in tasks] == [("a", 1), ("b", 2)]


def test_parse_tasks_single_document() -> None:
    assert [t.metadata.name for t in parse_tasks(named("a"), file="a.yaml")] == ["a"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", [(None, None, "empty file")]),
        (
            named("a") + "---\n" + HEAD + "spec: {entrypoint: x, resources: {cpu: 1}}\n",
            [("metadata.name", 6, "required field is missing")],
        ),
        (
            named("a") + "---\n" + named("a"),
            [("metadata.name", 8, 'task "a" is defined twice (first on line 3)')],
        ),
        (
            named("a") + "---\n" + named("b").replace("cpu: 1", "cpu: -1"),
            [("spec.resources.cpu", 9, "must be greater than or equal to 0 (got -1)")],
        ),
        (named("a") + "---\n[\n", [(None, 7, "did not find expected node content")]),
    ],
)
def test_parse_tasks_errors(text: str, expected: list[tuple[str | None, int, str]]) -> None:
    with pytest.raises(SpecParseError) as caught:
        parse_tasks(text, file="all.yaml")
    got = [(e.field, e.line, e.message.split(" (while")[0]) for e in caught.value.errors]
    assert got == expected


# --- dumping ---------------------------------------------------------------------------------


def test_dump_task_is_block_style_in_kubernetes_order() -> None:
    task = parse_task(ISSUE_EXAMPLE, file="train.yaml")
    text = dump_task(task)
    top = [line.split(":")[0] for line in text.splitlines() if not line.startswith(" ")]
    assert top == ["apiVersion", "kind", "metadata", "spec"]
    assert "{" not in text
    assert "  resources:\n    cpu: 2.0\n    memory: 4Gi\n" in text
    assert "suspend" not in text  # defaults the user did not set are left out
    assert parse_task(text, file="train.yaml") == task


def test_dump_task_keeps_long_entrypoints_on_one_line() -> None:
    task = make_task(entrypoint="python train.py" + " --flag value" * 30)
    assert f"entrypoint: {task.spec.entrypoint.strip()}" in dump_task(task)


def status_example() -> TaskStatus:
    at = datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    body = TaskStatusBody(
        phase=Phase.FAILED,
        reason="JobFailed",
        message="exit code 1",
        submission_id="rq-train-1",
        queued_at=at,
        finished_at=at,
        log_tail="Traceback (most recent call last):\n  boom\nValueError: bad\n",
        conditions=[Condition(type="Failed", reason="JobFailed", last_transition_time=at)],
    )
    return TaskStatus(metadata=Metadata(name="train"), status=body)


def test_status_round_trip_and_readable_log_tail() -> None:
    status = status_example()
    text = dump_status(status)
    assert text.startswith("apiVersion: rayqueue/v1\nkind: TaskStatus\nmetadata:\n")
    assert "logTail: |" in text  # a literal block, not an escaped one-liner
    assert "queuedAt: '2025-01-02T03:04:05.678Z'" in text
    assert parse_status(text) == status


def test_parse_status_ignores_unknown_fields_but_not_bad_ones() -> None:
    text = dump_status(status_example()) + "extra: 1\n"
    assert parse_status(text).status.phase is Phase.FAILED
    with pytest.raises(SpecParseError) as caught:
        parse_status(text.replace("phase: Failed", "phase: Exploded"), file="s.yaml")
    assert caught.value.errors[0].field == "status.phase"
    with pytest.raises(SpecParseError):
        parse_status(b"\xff")


# --- properties ------------------------------------------------------------------------------

names = st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True)
texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=10,
)
tasks = st.builds(
    Task,
    apiVersion=st.just("rayqueue/v1"),  # the signature uses the alias
    kind=st.just("Task"),
    metadata=st.builds(
        Metadata,
        name=st.none() | names,
        labels=st.dictionaries(names, texts, max_size=3),
    ),
    spec=st.builds(
        TaskSpec,
        entrypoint=texts.filter(lambda s: s.strip() != ""),
        runtime_env=st.none() | st.dictionaries(texts, json_values, max_size=3),
        priority=st.integers(0, 9),
        resources=st.builds(
            Resources,
            cpu=st.floats(0.5, 64),
            gpu=st.sampled_from([0.0, 0.25, 1.0, 8.0]),
            # Resources takes memory as the YAML does (ints mean GiB), so give it bytes as "<n>B".
            memory=(st.just(0) | st.integers(2**20, 2**45)).map(lambda n: f"{n}B"),
        ),
        timeout_seconds=st.floats(0, 1e6),
        suspend=st.booleans(),
        submission_id=st.none() | names.filter(lambda s: not s.startswith("rq-")),
    ),
)


@FUZZ
@given(tasks)
def test_dump_then_parse_is_identity(task: Task) -> None:
    assert parse_task(dump_task(task), file="t.yaml") == task


@FUZZ
@given(json_values)
def test_builder_agrees_with_yaml_safe_load(value: Any) -> None:
    # Our own node-to-data builder must give exactly what PyYAML's constructor gives.
    document = {"v": value}
    for flow in (False, True, None):
        text = yaml.safe_dump(document, default_flow_style=flow, allow_unicode=True)
        nodes = parse.load_nodes(parse._decode(text, "t"), "t", single=True)
        assert json.dumps(nodes[0][1]) == json.dumps(yaml.safe_load(text))


@pytest.mark.parametrize(
    "text",
    [
        "a: [0x1F, 0o17, 017, 1_000, 190:20:30, +5, -0, .5, 1e3, 1.0e3, .NaN, -.inf]\n",
        "a: [yes, No, on, OFF, true, False, ~, null, '', 'yes']\n",
        "base: &b {x: 1, y: [1, 2]}\nc: {<<: *b, y: 3}\nd: {<<: [*b, {z: 4}], x: 0}\n",
        "a: !!str 123\nb: !!int '7'\nc: !!float 1\n",
        "a: |\n  line one\n  line two\nb: >\n  folded\n  text\n",
        "= : equals\n",
    ],
)
def test_builder_agrees_with_yaml_safe_load_on_tricky_scalars(text: str) -> None:
    nodes = parse.load_nodes(text, "t", single=True)
    assert _typed(nodes[0][1]) == _typed(yaml.safe_load(text))


def _typed(value: Any) -> Any:
    """A comparable form that keeps every value *and its type* (1, 1.0 and True differ, NaN
    equals NaN) but not mapping order: a spec's meaning never depends on key order, and
    PyYAML 6.0.4 changed the order in which merge keys (`<<`) land."""
    if isinstance(value, dict):
        return ("map", sorted((repr(_typed(k)), _typed(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("seq", [_typed(v) for v in value])
    return (type(value).__name__, repr(value))


def test_typed_comparison_sees_values_and_types_but_not_order() -> None:
    assert _typed({"x": 0, "z": 4}) == _typed({"z": 4, "x": 0})
    assert _typed({"x": 1}) != _typed({"x": 1.0})
    assert _typed({"x": 1}) != _typed({"x": True})
    assert _typed({"x": [1, 2]}) != _typed({"x": [2, 1]})
    assert _typed(float("nan")) == _typed(float("nan"))


@FUZZ
@given(st.text(max_size=300))
def test_fuzz_random_text(text: str) -> None:
    try:
        result = parse_task(text, file="fuzz.yaml", expected_name="fuzz")
    except SpecParseError as exc:
        assert exc.errors
        assert all(isinstance(e, SpecError) for e in exc.errors)
    else:
        assert isinstance(result, Task)


@FUZZ
@given(st.binary(max_size=300))
def test_fuzz_random_bytes(data: bytes) -> None:
    try:
        result = parse_task(data, file="fuzz.yaml")
    except SpecParseError as exc:
        assert exc.errors
    else:
        assert isinstance(result, Task)


YAML_CHARS = st.sampled_from([*":-[]{}&*!|>'\"#%@`,?<=~\t\n  \\0123abcxyz.", "\x00", "é"])


@FUZZ
@given(
    st.lists(
        st.tuples(st.integers(0, len(ISSUE_EXAMPLE)), st.integers(0, 3), YAML_CHARS),
        min_size=1,
        max_size=6,
    )
)
def test_fuzz_mutated_valid_spec(edits: list[tuple[int, int, str]]) -> None:
    text = ISSUE_EXAMPLE
    for position, delete, insert in edits:
        text = text[:position] + insert + text[position + delete :]
    for payload in (text, text.encode("utf-8", "surrogatepass")):
        try:
            result = parse_task(payload, file="train.yaml", expected_name="train")
        except SpecParseError as exc:
            assert exc.errors
            assert all(isinstance(e.message, str) and e.message for e in exc.errors)
        else:
            assert isinstance(result, Task)
        try:
            many = parse_tasks(payload, file="train.yaml")
        except SpecParseError as exc:
            assert exc.errors
        else:
            assert all(isinstance(t, Task) for t in many)


# --- the fast path (specs/yamlio/fastyaml.py) -----------------------------------------------------

FAST_VALID = [
    "apiVersion: rayqueue/v1\nkind: Task\nspec:\n  entrypoint: python a.py\n"
    "  resources: {cpu: 2}\n  priority: 5\n",
    "apiVersion: rayqueue/v1\nkind: Task\nspec:\n  entrypoint: echo\n  resources: {cpu: 1}\n"
    "  runtimeEnv:\n    env_vars:\n      DATE: 2024-01-01\n      N: '3'\n",
    "apiVersion: rayqueue/v1\nkind: Task\nmetadata: {name: t}\nspec:\n  entrypoint: 'x'\n"
    "  resources: {gpu: 1}\n  dependsOn: [{name: other}]\n  retry:\n    on: [Failed]\n",
]


@pytest.mark.parametrize("text", FAST_VALID)
def test_the_fast_path_gives_what_the_slow_path_gives(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = parse_task(text, file="t.yaml")
    monkeypatch.setattr(parse.fastyaml, "load", lambda text: None)
    assert parse_task(text, file="t.yaml") == fast


def test_the_fast_path_reads_a_plain_spec_and_keeps_timestamps_as_text() -> None:
    data = parse.fastyaml.load(FAST_VALID[1])
    assert data is not None
    assert data["spec"]["runtimeEnv"]["env_vars"] == {"DATE": "2024-01-01", "N": "3"}


@pytest.mark.parametrize(
    "text",
    [
        "a: 1\nb: 2\na: 3\n",  # a repeated key at the top
        "spec:\n  runtimeEnv:\n    env_vars:\n      A: '1'\n      A: '2'\n",  # deep down
        "a: &x {b: 1}\nc: *x\n",  # an alias: the guarded walk counts its expansion
        "a: {<<: {b: 1}}\n",  # a merge key
        "1: a\n",  # a key that is not a string
        "on: x\n",  # YAML 1.1 reads it as a boolean
        "a: !!binary aGk=\n",  # beyond JSON
        "a: [1\n",  # a syntax error
    ],
)
def test_the_fast_path_leaves_to_the_slow_path_what_it_does_not_decide(text: str) -> None:
    assert parse.fastyaml.load(text) is None


def test_a_repeated_key_where_any_value_is_valid_is_still_refused() -> None:
    # runtimeEnv takes any mapping: validation alone would accept the second A.
    text = (
        "apiVersion: rayqueue/v1\nkind: Task\nspec:\n  entrypoint: echo\n  resources: {cpu: 1}\n"
        "  runtimeEnv:\n    env_vars:\n      A: '1'\n      A: '2'\n"
    )
    with pytest.raises(SpecParseError) as info:
        parse_task(text, file="t.yaml")
    [error] = info.value.errors
    assert (error.file, error.line, error.column) == ("t.yaml", 9, 7)
    assert error.message == 'duplicate key "A" (lines 8 and 9)'


def test_a_status_with_a_repeated_key_is_refused_with_its_line() -> None:
    status = dump_status(
        TaskStatus(metadata=Metadata(name="a"), status=TaskStatusBody(phase=Phase.QUEUED))
    )
    text = status + "kind: TaskStatus\n"
    with pytest.raises(SpecParseError, match="duplicate key"):
        parse_status(text)
    assert parse_status(status).status.phase is Phase.QUEUED
