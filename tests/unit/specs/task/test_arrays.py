"""Task arrays, the spec: `spec.array` parses, expands into elements, and bad input is Invalid
with file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.cli.main import main
from specs.folder.store import TaskStore
from specs.service.tasks import SpecRejected, TaskService
from specs.task import arrays
from specs.task.models import MAX_ARRAY_ELEMENTS
from specs.task.schema import task_schema
from specs.yamlio.parse import SpecParseError, parse_task

HEAD = """apiVersion: rayqueue/v1
kind: Task
spec:
  entrypoint: python train.py --lr $LR --seed $SEED
  resources: {cpu: 1}
  array:
"""


def _parse(array: str):  # type: ignore[no-untyped-def]
    return parse_task(HEAD + array, file="sweep.yaml")


def _error(array: str) -> str:
    with pytest.raises(SpecParseError) as info:
        _parse(array)
    return str(info.value)


def test_matrix_expands_to_the_product_in_index_order() -> None:
    task = _parse("    matrix: {LR: ['1e-3', 3e-4], SEED: [1, 2]}\n    maxParallel: 2\n")
    assert task.spec.array is not None and task.spec.array.size == 4
    elements = arrays.expand("team/sweep", task)
    assert list(elements) == [f"team/sweep[{i}]" for i in range(4)]
    env = elements["team/sweep[3]"].spec.runtime_env
    assert env == {
        "env_vars": {
            "LR": "3e-4",
            "SEED": "2",
            "RAYQUEUE_ARRAY_INDEX": "3",
            "RAYQUEUE_ARRAY_SIZE": "4",
        }
    }
    # each element has its own hash, so its own runs and ids
    assert len({t.spec_hash() for t in elements.values()}) == 4


def test_count_and_values_keep_the_tasks_own_env() -> None:
    text = HEAD.replace("  array:\n", "  runtimeEnv: {env_vars: {A: x}}\n  array:\n")
    task = parse_task(text + "    count: 3\n", file="c.yaml")
    env = arrays.expand("c", task)["c[2]"].spec.runtime_env
    assert env == {"env_vars": {"A": "x", "RAYQUEUE_ARRAY_INDEX": "2", "RAYQUEUE_ARRAY_SIZE": "3"}}
    listed = arrays.expand("v", _parse("    values: [{LR: a}, {LR: b, SEED: 1, FLAG: true}]\n"))
    assert listed["v[1]"].spec.runtime_env["env_vars"]["SEED"] == "1"  # type: ignore[index]
    assert listed["v[1]"].spec.runtime_env["env_vars"]["FLAG"] == "true"  # type: ignore[index]


def test_a_plain_task_is_its_own_only_element() -> None:
    task = parse_task(HEAD.removesuffix("  array:\n"), file="p.yaml")
    assert arrays.expand("p", task) == {"p": task}


@pytest.mark.parametrize(
    ("array", "where", "words"),
    [
        ("    matrix: {}\n", "sweep.yaml:7:13: spec.array.matrix", "must not be empty"),
        ("    matrix: {LR: []}\n", "sweep.yaml:7:13: spec.array.matrix", "LR has no values"),
        ("    matrix: {1LR: [1]}\n", "spec.array.matrix", "not a valid environment variable"),
        ("    values: [{a-b: 1}]\n", "spec.array.values", "not a valid environment variable"),
        ("    count: 2\n    matrix: {A: [1]}\n", "sweep.yaml:7:5: spec.array", "exactly one"),
        ("    maxParallel: 2\n", "sweep.yaml:7:5: spec.array", "got none"),
        ("    values: []\n", "spec.array.values", "must not be empty"),
        ("    matrix: {RAYQUEUE_X: [1]}\n", "spec.array.matrix", "RAYQUEUE_ are reserved"),
        (
            "    count: 3\n    maxParallel: 0\n",
            "spec.array.maxParallel",
            "greater than or equal to 1",
        ),
        (f"    count: {MAX_ARRAY_ELEMENTS + 1}\n", "spec.array", "the limit is 10000"),
        (
            "    matrix: {A: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], B: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],"
            " C: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], D: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]}\n",
            "spec.array",
            "11000 elements",
        ),
    ],
)
def test_bad_arrays_are_invalid_with_file_line_and_field(
    array: str, where: str, words: str
) -> None:
    message = _error(array)
    assert where in message and words in message


def test_submission_id_cannot_be_shared_by_elements() -> None:
    text = HEAD.replace("  array:\n", "  submissionId: mine\n  array:\n") + "    count: 2\n"
    with pytest.raises(SpecParseError, match=r"spec\.array: cannot be combined with submissionId"):
        parse_task(text, file="s.yaml")


def test_element_names_split_and_sort_by_index() -> None:
    assert arrays.split("team-a/sweep[12]") == ("team-a/sweep", 12)
    assert arrays.split("sweep") is None and arrays.split("sweep[01]") is None
    names = ["s[10]", "s[2]", "r", "s[1]"]
    assert sorted(names, key=arrays.order_key) == ["r", "s[1]", "s[2]", "s[10]"]


def test_the_schema_knows_array() -> None:
    schema = task_schema()
    assert "array" in schema["definitions"]["TaskSpec"]["properties"]
    props = schema["definitions"]["ArraySpec"]["properties"]
    assert set(props) == {"matrix", "count", "values", "maxParallel"}


# --- the element limit is a setting (max_array_elements, RAYQUEUE_MAX_ARRAY_ELEMENTS) -------


def test_the_limit_is_the_setting_and_the_message_names_it() -> None:
    with pytest.raises(SpecParseError) as info:
        parse_task(HEAD + "    count: 6\n", file="sweep.yaml", max_array_elements=5)
    assert str(info.value) == (
        "sweep.yaml:7:5: spec.array: has 6 elements; the limit is 5 "
        "(the setting RAYQUEUE_MAX_ARRAY_ELEMENTS)"
    )
    assert parse_task(HEAD + "    count: 5\n", file="s.yaml", max_array_elements=5)
    big = MAX_ARRAY_ELEMENTS + 1
    task = parse_task(HEAD + f"    count: {big}\n", file="s.yaml", max_array_elements=big)
    assert task.spec.array is not None and task.spec.array.size == big


def test_the_store_and_the_api_service_apply_the_setting(tmp_path: Path) -> None:
    (tmp_path / "sweep.yaml").write_text(HEAD + "    count: 4\n")
    entry = TaskStore(tmp_path, max_array_elements=3).scan()["sweep"]
    assert entry.task is None and entry.error is not None
    assert str(entry.error).startswith("sweep.yaml:7:5: spec.array: has 4 elements")
    scanned = TaskStore(tmp_path, max_array_elements=4).scan()  # one entry per element
    assert sorted(scanned) == [f"sweep[{i}]" for i in range(4)]
    service = TaskService(TaskStore(tmp_path, max_array_elements=3))
    with pytest.raises(SpecRejected, match="the limit is 3"):
        service.create("other", (HEAD + "    count: 4\n").encode())


def test_validate_reads_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "sweep.yaml"
    spec.write_text(HEAD + "    count: 4\n")
    monkeypatch.setenv("RAYQUEUE_MAX_ARRAY_ELEMENTS", "3")
    assert main(["validate", str(spec)]) == 1
    assert "spec.array: has 4 elements; the limit is 3" in capsys.readouterr().err
    assert main(["validate", str(tmp_path)]) == 1
    assert "the limit is 3 (the setting RAYQUEUE_MAX_ARRAY_ELEMENTS)" in capsys.readouterr().err
    monkeypatch.setenv("RAYQUEUE_MAX_ARRAY_ELEMENTS", "4")
    assert main(["validate", str(spec), str(tmp_path)]) == 0
    monkeypatch.setenv("RAYQUEUE_MAX_ARRAY_ELEMENTS", "0")
    assert main(["validate", str(spec)]) == 2
    assert "RAYQUEUE_MAX_ARRAY_ELEMENTS must be at least 1" in capsys.readouterr().err
