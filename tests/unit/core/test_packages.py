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
    # One interpreter for all: before each module, every module of ours is forgotten, so each
    # is imported as if first (third-party packages stay loaded: they are not what is tested).
    script = (
        "import importlib, sys, traceback\n"
        "failed = []\n"
        "for name in sys.argv[1:]:\n"
        "    for loaded in [m for m in sys.modules if m.split('.')[0] in OURS]:\n"
        "        del sys.modules[loaded]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception:\n"
        "        failed.append((name, traceback.format_exc()[-2000:]))\n"
        "print(failed)\n"
        "sys.exit(1 if failed else 0)\n"
    ).replace("OURS", repr(("reconciler", "specs", "api")))
    done = subprocess.run(
        [sys.executable, "-c", script, *names], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
