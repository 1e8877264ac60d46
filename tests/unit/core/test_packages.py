"""The core's sub-packages export their public names, and importing any one of the core's
modules on its own works: no package's `__init__` takes part in an import cycle."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pytest

import reconciler.core

PACKAGES = ["task", "admission", "queues", "preemption"]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_is_defined(package: str) -> None:
    module = importlib.import_module(f"reconciler.core.{package}")
    for name in module.__all__:
        assert getattr(module, name) is not None


def test_each_module_of_the_core_imports_on_its_own() -> None:
    names = [m.name for m in pkgutil.walk_packages(reconciler.core.__path__, "reconciler.core.")]
    script = "import importlib, sys\nimportlib.import_module(sys.argv[1])"
    for name in names:
        done = subprocess.run(
            [sys.executable, "-c", script, name], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, (name, done.stderr[-2000:])
