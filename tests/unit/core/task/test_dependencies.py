"""Dependencies on their own: conditions against the latest run, missing tasks, cycles."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.core.task.dependencies import (
    RunView,
    find_cycles,
    judge,
    satisfies,
    strongly_connected,
)
from specs.task.models import Phase, Reason
from specs.task.pipeline import DependencySpec

if TYPE_CHECKING:
    from _typeshed import TraceFunction


def dep(name: str, condition: str = "Succeeded") -> DependencySpec:
    return DependencySpec.model_validate({"name": name, "condition": condition})


ENDED = [Phase.SUCCEEDED, Phase.FAILED, Phase.TIMED_OUT, Phase.STOPPED, Phase.LOST]
NOT_ENDED = [
    Phase.QUEUED,
    Phase.STARTING,
    Phase.RUNNING,
    Phase.SUSPENDED,
    Phase.INVALID,
    Phase.UNSCHEDULABLE,
]


@pytest.mark.parametrize(
    ("condition", "phase", "expected"),
    [
        ("Succeeded", Phase.SUCCEEDED, True),
        *[("Succeeded", p, False) for p in ENDED[1:]],
        ("Failed", Phase.SUCCEEDED, False),
        *[("Failed", p, True) for p in ENDED[1:]],
        *[("Finished", p, True) for p in ENDED],
        *[(c, p, None) for c in ("Succeeded", "Failed", "Finished") for p in NOT_ENDED],
    ],
)
def test_conditions(condition: str, phase: Phase, expected: bool | None) -> None:
    assert satisfies(condition, phase) is expected


def test_unknown_condition_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown dependency condition"):
        satisfies("Done", Phase.SUCCEEDED)


# The latest run decides: one table, one row per situation of `prep`, for a dependent that
# needs prep to succeed.
@pytest.mark.parametrize(
    ("prep", "gate", "words"),
    [
        (RunView(Phase.SUCCEEDED, 100.0), Reason.DEPENDENCIES_MET, "dependencies met"),
        (RunView(Phase.RUNNING), Reason.WAITING_FOR_DEPENDENCY, "waits for prep (Running)"),
        # Failed, and a retry or a rerun is queued: its latest run has not ended yet.
        (RunView(Phase.QUEUED), Reason.WAITING_FOR_DEPENDENCY, "waits for prep (Queued)"),
        # Failed and nothing queues a new run: say it cannot happen as things stand.
        (
            RunView(Phase.FAILED, 100.0),
            Reason.DEPENDENCY_FAILED,
            "prep ended Failed, needs Succeeded",
        ),
        (RunView(Phase.SUSPENDED), Reason.WAITING_FOR_DEPENDENCY, "prep (Suspended)"),
        (None, Reason.DEPENDENCY_MISSING, "prep: no such task"),
    ],
)
def test_judged_against_the_latest_run(prep: RunView | None, gate: Reason, words: str) -> None:
    views = {} if prep is None else {"prep": prep}
    judgement = judge([dep("prep")], views)
    assert judgement.gate is gate
    assert words in judgement.message
    assert judgement.met == (gate is Reason.DEPENDENCIES_MET)
    assert [s.name for s in judgement.states] == ["prep"]


def test_failed_then_rerun_then_succeeded_lets_the_dependent_go() -> None:
    history = [
        (RunView(Phase.FAILED, 10.0), Reason.DEPENDENCY_FAILED),
        (RunView(Phase.QUEUED), Reason.WAITING_FOR_DEPENDENCY),  # rayqueue rerun prep
        (RunView(Phase.RUNNING), Reason.WAITING_FOR_DEPENDENCY),
        (RunView(Phase.SUCCEEDED, 50.0), Reason.DEPENDENCIES_MET),
    ]
    for view, gate in history:
        assert judge([dep("prep")], {"prep": view}).gate is gate


def test_last_dependency_met_sets_the_fifo_start() -> None:
    views = {"a": RunView(Phase.SUCCEEDED, 30.0), "b": RunView(Phase.FAILED, 70.0)}
    judgement = judge([dep("a"), dep("b", "Failed")], views)
    assert judgement.met and judgement.met_at == 70.0
    # An adopted run with no recorded end gives no time; the caller keeps its own.
    assert judge([dep("a")], {"a": RunView(Phase.SUCCEEDED)}).met_at is None


def test_the_worst_dependency_gives_the_reason_and_all_are_named() -> None:
    views = {
        "done": RunView(Phase.SUCCEEDED, 1.0),
        "busy": RunView(Phase.RUNNING),
        "broke": RunView(Phase.TIMED_OUT, 2.0),
    }
    judgement = judge([dep("done"), dep("busy"), dep("ghost"), dep("broke")], views)
    assert judgement.gate is Reason.DEPENDENCY_FAILED
    for words in ("broke ended TimedOut", "ghost: no such task", "busy (Running)"):
        assert words in judgement.message
    assert "done" not in judgement.message
    assert [s.gate for s in judgement.states] == [
        Reason.DEPENDENCIES_MET,
        Reason.WAITING_FOR_DEPENDENCY,
        Reason.DEPENDENCY_MISSING,
        Reason.DEPENDENCY_FAILED,
    ]
    assert judgement.states[2].describe() == "ghost (Succeeded): missing, waiting"
    assert judgement.states[3].describe() == "broke (Succeeded): TimedOut, cannot be met"
    missing_and_waiting = judge([dep("busy"), dep("ghost")], views)
    assert missing_and_waiting.gate is Reason.DEPENDENCY_MISSING


@pytest.mark.parametrize(
    ("edges", "cycles"),
    [
        ({"a": ["b"], "b": ["c"], "c": []}, {}),
        ({"a": ["a"]}, {"a": "a -> a"}),
        ({"a": ["b"], "b": ["a"]}, {"a": "a -> b -> a", "b": "a -> b -> a"}),
        # A task that depends on a cycle is not in it.
        ({"x": ["a"], "a": ["b"], "b": ["c"], "c": ["a"]},
         dict.fromkeys("abc", "a -> b -> c -> a")),
        # Two separate cycles, and edges to tasks that do not exist.
        ({"a": ["b", "zz"], "b": ["a"], "p": ["q"], "q": ["p"], "r": ["p"]},
         {"a": "a -> b -> a", "b": "a -> b -> a", "p": "p -> q -> p", "q": "p -> q -> p"}),
    ],
)  # fmt: skip
def test_find_cycles(edges: dict[str, list[str]], cycles: dict[str, str]) -> None:
    found = find_cycles(edges)
    assert {
        name: message.removeprefix("dependency cycle: ") for name, message in found.items()
    } == (cycles)


def test_members_off_the_shown_path_are_named() -> None:
    # a -> b -> a is the shortest cycle through a; c is in the component through b -> c -> a.
    found = find_cycles({"a": ["b"], "b": ["a", "c"], "c": ["a"]})
    assert set(found) == {"a", "b", "c"}
    assert found["c"] == "dependency cycle: a -> b -> a (also in the cycle: c)"


def _reachable(edges: dict[str, list[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(edges.get(start, []))
    while todo:
        v = todo.pop()
        if v in seen or v not in edges:
            continue
        seen.add(v)
        todo.extend(edges[v])
    return seen


graphs = st.integers(1, 12).flatmap(
    lambda n: st.lists(st.lists(st.integers(0, n - 1), max_size=4), min_size=n, max_size=n).map(
        lambda rows: {f"t{i}": [f"t{j}" for j in row] for i, row in enumerate(rows)}
    )
)


@settings(max_examples=300, deadline=None)
@given(graphs)
def test_cycles_agree_with_brute_force(edges: dict[str, list[str]]) -> None:
    found = find_cycles(edges)
    expected = {v for v in edges if v in _reachable(edges, v)}
    assert set(found) == expected
    for name, message in found.items():
        path = message.split(": ", 1)[1].split(" (")[0].split(" -> ")
        assert path[0] == path[-1]
        if "more)" in message:  # a long cycle: its first names, then a count
            assert message.startswith("dependency cycle of ")
            path = [p for p in path[:-1] if not p.startswith("...")]
        assert all(b in edges[a] for a, b in itertools.pairwise(path))
        # The shown cycle and this task are in one component: they reach each other.
        assert name == path[0] or (path[0] in _reachable(edges, name))
    components = strongly_connected(edges)
    assert sorted(v for c in components for v in c) == sorted(edges)


def _lines_run(call: Callable[[], object]) -> int:
    """How many Python lines `call` runs: a measure of work that, unlike time, does not
    depend on the machine's load."""
    count = 0

    def trace(frame: FrameType, event: str, arg: Any) -> TraceFunction:
        nonlocal count
        if event == "line":
            count += 1
        return trace

    sys.settrace(trace)
    try:
        call()
    finally:
        sys.settrace(None)
    return count


def test_a_long_chain_and_a_long_cycle_are_linear_and_not_recursive() -> None:
    n = 30_000
    chain = {f"t{i}": [f"t{i + 1}"] if i + 1 < n else [] for i in range(n)}
    assert find_cycles(chain) == {}
    ring = {f"t{i}": [f"t{(i + 1) % n}"] for i in range(n)}
    found = find_cycles(ring)
    assert len(found) == n
    assert found["t5"] == (
        f"dependency cycle of {n} tasks: t0 -> t1 -> t2 -> t3 -> t4 -> t5 -> t6 -> t7 -> "
        f"... ({n - 8} more) -> t0"
    )  # the first names and a count: one message of the same few bytes for each of n tasks
    assert n > sys.getrecursionlimit()

    # Linear: twice the chain runs about twice the lines (a quadratic walk would run four
    # times as many).
    def chain_of(k: int) -> dict[str, list[str]]:
        return {f"t{i}": [f"t{i + 1}"] if i + 1 < k else [] for i in range(k)}

    small, large = chain_of(2_000), chain_of(4_000)
    ratio = _lines_run(lambda: find_cycles(large)) / _lines_run(lambda: find_cycles(small))
    assert ratio < 2.2


def test_a_cycle_names_at_most_a_few_of_its_tasks() -> None:
    # A short shown cycle with many members off it: eight named, the rest counted.
    edges = {"a": ["b"], "b": ["a", *(f"c{i:02}" for i in range(20))]}
    edges |= {f"c{i:02}": ["a"] for i in range(20)}
    found = find_cycles(edges)
    listed = ", ".join(f"c{i:02}" for i in range(8))
    assert found["c05"] == (
        f"dependency cycle of 22 tasks: a -> b -> a (also in the cycle: {listed} and 12 more)"
    )
