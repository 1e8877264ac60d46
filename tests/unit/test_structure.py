"""The house rules that an import graph can check: no module reaches into another module's
`_private` names, and no import cycle, whether at run time, under `TYPE_CHECKING` or inside a
function. Importing `a.b.c` runs `a/__init__` and `a/b/__init__` first, so those count too."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("specs", "reconciler", "api")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _imports(path: Path) -> Iterator[tuple[str, str]]:
    """(module, name) for each `from module import name`; (module, "") for `import module`."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                yield node.module, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, ""


def _edges(module: str, path: Path) -> set[str]:
    own = {module.rsplit(".", k)[0] for k in range(module.count(".") + 1)}
    targets = set()
    for imported, name in _imports(path):
        full = f"{imported}.{name}"
        target = full if full in MODULES else imported
        if target not in MODULES:
            continue
        parts = target.split(".")
        targets |= {".".join(parts[:k]) for k in range(1, len(parts) + 1)} - own
    return targets


def test_no_module_imports_another_modules_private_name() -> None:
    reached = sorted(
        f"{module} imports {imported}.{name}"
        for module, path in MODULES.items()
        for imported, name in _imports(path)
        if imported in MODULES and imported != module
        and name.startswith("_") and not name.startswith("__")
    )  # fmt: skip
    assert reached == []


def test_no_import_cycles() -> None:
    graph = {module: _edges(module, path) for module, path in MODULES.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in graph[module]:
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1 or module in graph[module]:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    assert cycles == []
