"""Nesting bombs: thousands of levels of nested flow YAML in a few bytes would cost seconds of
CPU in the pure-Python loader to refuse. specs.yamlio.depth refuses them before any parser
composes a node; these tests prove the composer is never reached."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from specs.folder.store import TaskStore
from specs.queues.parse import parse_queue_config
from specs.service.tasks import ConfigRejected, TaskService
from specs.tenancy.access import AccessError, parse_tokens_file
from specs.yamlio import nodes as yamlnodes
from specs.yamlio.depth import MAX_NESTING, TooDeep, check_nesting
from specs.yamlio.parse import SpecParseError, parse_status, parse_task

BOMBS = {
    "flow lists": "[" * 2000 + "]" * 2000,
    "flow mappings": "{a: " * 2000 + "1" + "}" * 2000,
    "block sequences": "- " * 2000 + "x\n",
    "block mappings": "".join(" " * i + "a:\n" for i in range(200)) + " " * 200 + "b\n",
    "inside a spec": "apiVersion: rayqueue/v1\nkind: Task\nspec:\n  entrypoint: x\n"
    "  runtimeEnv: {deep: " + "[" * 3000 + "]" * 3000 + "}\n",
}


class _NoComposer:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("the YAML composer ran on a nesting bomb")


@pytest.mark.parametrize("text", BOMBS.values(), ids=BOMBS.keys())
def test_a_nesting_bomb_is_refused_before_parsing(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    """Fails on main: the bomb reached the (pure-Python) composer."""
    monkeypatch.setattr(yamlnodes, "_FastLoader", _NoComposer)
    monkeypatch.setattr(yamlnodes.yaml, "SafeLoader", _NoComposer)
    for call in (parse_task, parse_status, parse_queue_config):
        with pytest.raises(SpecParseError) as caught:
            call(text, file="bomb.yaml")
        (error,) = caught.value.errors
        assert error.message == (
            f"nesting is deeper than {MAX_NESTING} levels (lists and mappings inside each other)"
        )
        assert error.file == "bomb.yaml" and error.line is not None


def test_the_tokens_file_and_config_writes_are_checked_too(tmp_path: Path) -> None:
    bomb = ("tokens: " + "[" * 2000 + "]" * 2000).encode()
    with pytest.raises(AccessError, match=f"nesting is deeper than {MAX_NESTING}"):
        parse_tokens_file(bomb, "tokens.yaml")
    service = TaskService(TaskStore(tmp_path))
    with pytest.raises(ConfigRejected, match=f"nesting is deeper than {MAX_NESTING}"):
        service.write_config("_other.yaml", b"a: " + b"{b: " * 500 + b"1" + b"}" * 500)
    assert not (tmp_path / "_other.yaml").exists()


QUIET = {
    "brackets in quotes": "a: '" + "[" * 200 + "'\n",
    "brackets in a comment": "a: 1  # " + "[" * 200 + "\n",
    "brackets in a block scalar": "a: |\n  " + "{" * 200 + "\n",
    "many flat entries": "".join(f"k{i}: [{i}, {{x: -{i}}}]\n" for i in range(500)),
}


@pytest.mark.parametrize("text", QUIET.values(), ids=QUIET.keys())
def test_text_that_only_looks_deep_passes(text: str) -> None:
    check_nesting(text)  # no TooDeep
    check_nesting(text.encode())


def test_the_limit_is_exact() -> None:
    at = "[" * MAX_NESTING + "]" * MAX_NESTING
    check_nesting(at)
    with pytest.raises(TooDeep) as caught:
        check_nesting("[" + at + "]")
    assert (caught.value.line, caught.value.column) == (1, MAX_NESTING + 1)


def test_every_example_spec_passes() -> None:
    examples = Path(__file__).parents[4] / "examples"
    files = [*examples.rglob("*.yaml"), *examples.rglob("*.yml")]
    assert files
    for path in files:
        check_nesting(path.read_bytes())
