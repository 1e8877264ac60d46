"""The core's sub-packages export their public names lazily: each name in a package's
`__all__` resolves to the object its module defines."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = ["task", "admission", "queues", "preemption"]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_resolves_to_its_module_s_object(package: str) -> None:
    module = importlib.import_module(f"reconciler.core.{package}")
    for name in module.__all__:
        found = getattr(module, name)
        source = importlib.import_module(f"reconciler.core.{package}.{module._MODULE_OF[name]}")
        assert found is getattr(source, name)


@pytest.mark.parametrize("package", PACKAGES)
def test_an_unknown_name_is_an_attribute_error(package: str) -> None:
    module = importlib.import_module(f"reconciler.core.{package}")
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018
