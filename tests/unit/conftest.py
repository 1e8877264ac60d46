"""The unit tests' shared `world`: a real loop on a real folder over FakeRay, on a fake clock.

A test or a module that needs another cluster or other settings marks itself
`@pytest.mark.world(...)` (module-wide: `pytestmark = pytest.mark.world(...)`) with
`tests.support.world.World.build` arguments; they replace the defaults below.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from specs.cluster import Capacity
from tests.support.world import GIB, World


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "world(**build): World.build arguments for the `world` fixture"
    )


@pytest.fixture
def world(request: pytest.FixtureRequest, tmp_path: Path) -> World:
    """A World over an empty `tasks` folder: 8 CPUs, 64 GiB, queue id "q", unless marked."""
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    build: dict[str, Any] = {"capacity": Capacity(8, 0, 64 * GIB), "queue_id": "q"}
    marker = request.node.get_closest_marker("world")
    if marker is not None:
        build |= marker.kwargs
    return World.build(tasks, **build)
