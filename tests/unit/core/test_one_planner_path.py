"""One planner path: no production module plans with the reference `planner.plan`; the loop,
the simulator and `rayqueue plan` call `reconciler.core.incremental.plan_incremental`, and the
property tests compare it with the reference."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PRODUCTION = ("reconciler", "api", "specs", "benchmarks")


def _uses_the_reference(tree: ast.AST) -> list[int]:
    """The lines that import `plan` from the planner module or call `planner.plan`."""
    lines = []
    for node in ast.walk(tree):
        imported = (
            isinstance(node, ast.ImportFrom)
            and node.module == "reconciler.core.planner"
            and any(alias.name == "plan" for alias in node.names)
        )
        called = (
            isinstance(node, ast.Attribute)
            and node.attr == "plan"
            and isinstance(node.value, ast.Name)
            and node.value.id == "planner"
        )
        if imported or called:
            lines.append(node.lineno)
    return lines


def test_no_production_module_plans_with_the_reference() -> None:
    found = {
        str(path.relative_to(ROOT)): lines
        for package in PRODUCTION
        for path in sorted((ROOT / package).rglob("*.py"))
        if (lines := _uses_the_reference(ast.parse(path.read_text())))
    }
    assert found == {}


def test_the_check_finds_a_use_of_the_reference() -> None:
    source = "from reconciler.core import planner\nplanner.plan({}, {}, None, None)\n"
    assert _uses_the_reference(ast.parse(source)) == [2]
    assert _uses_the_reference(ast.parse("from reconciler.core.planner import plan\n")) == [1]
