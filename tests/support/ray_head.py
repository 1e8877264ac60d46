"""The real local Ray head as a pytest plugin, registered by the root conftest.

Nothing here imports `ray` at import time (the adapter is imported inside its fixture), so
the pure suites collect and run on a machine without Ray; only tests that ask for
`ray_head` start one.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from reconciler.shell.raycluster.local_head import LocalRayHead, find_ray_executable

if TYPE_CHECKING:
    from reconciler.shell.raycluster.adapter import RayJobsAdapter

RAY_HEAD_CPUS = 4
RAY_HEAD_MEMORY = 8 * 2**30

_startup_key = pytest.StashKey[float]()


@pytest.fixture(scope="session")
def ray_head(request: pytest.FixtureRequest) -> Iterator[str]:
    """The dashboard address of a LocalRayHead with 4 CPUs and 8 GiB, shared by the session."""
    if find_ray_executable() is None:
        pytest.skip("the `ray` executable is not installed")
    head = LocalRayHead()
    # Registered before start(): a head that fails halfway is still torn down.
    request.addfinalizer(head.stop)
    started = time.monotonic()
    address = head.start(num_cpus=RAY_HEAD_CPUS, memory_bytes=RAY_HEAD_MEMORY)
    request.config.stash[_startup_key] = time.monotonic() - started
    yield address


@pytest.fixture
def ray_adapter(ray_head: str) -> RayJobsAdapter:
    from reconciler.shell.raycluster.adapter import RayJobsAdapter

    return RayJobsAdapter(ray_head, timeout_seconds=10)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    seconds = terminalreporter.config.stash.get(_startup_key, None)
    if seconds is not None:
        terminalreporter.write_line(f"local Ray head started in {seconds:.1f} s")
