"""A real Reconciler on a real folder over FakeRay, driven pass by pass on a fake clock."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.shell.loop.runner import Reconciler
from reconciler.shell.ops.census import CensusPoller
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import META_QUEUE, Autoscaler, Capacity, RayJob
from specs.folder.store import TaskStore
from specs.settings.process import Settings
from tests.support.clock import DEFAULT_START, FakeClock
from tests.support.specs import read_status, write_task

GIB = 2**30
DEFAULT_CAPACITY = Capacity(4, 0, 16 * GIB)


@dataclass
class World:
    tasks: Path
    ray: FakeRay
    clock: FakeClock
    reconciler: Reconciler
    tick: float = 1.0  # seconds the clock moves before each pass of step()

    @classmethod
    def build(
        cls,
        tasks: Path,
        capacity: Capacity = DEFAULT_CAPACITY,
        *,
        ray: FakeRay | None = None,
        settle_seconds: float = 0.0,
        start: float = DEFAULT_START,
        tick: float = 1.0,
        autoscaler: Autoscaler | None = None,
        store_options: dict[str, Any] | None = None,
        census: bool = False,
        **settings: Any,
    ) -> World:
        """Reconciler, store and FakeRay all on one new FakeClock set to `start`; `settings`
        are Settings fields (queue_id defaults to "q-test", the API is off). `store_options`:
        more TaskStore arguments (a file reader, a sidecar writer, ... of the test's own).
        `census`: a census poller on the FakeRay, taken by the test (`reconciler.census.take()`)."""
        clock = FakeClock(start)
        fake = ray if ray is not None else FakeRay(capacity, clock=clock)
        fake.clock = clock  # a FakeRay passed in follows the same clock
        fields: dict[str, Any] = {"queue_id": "q-test", "api": False} | settings
        config = Settings(tasks_dir=tasks, **fields)
        store = TaskStore(
            tasks,
            config.status_dir,
            settle_seconds=settle_seconds,
            clock=clock,
            **(store_options or {}),
        )
        poller = CensusPoller(fake, config.census_seconds) if census else None
        reconciler = Reconciler(
            config, store, fake, clock=clock, autoscaler=autoscaler, census=poller
        )
        return cls(tasks, fake, clock, reconciler, tick)

    def step(self, passes: int = 1, seconds: float | None = None) -> None:
        """`passes` reconcile passes, each `seconds` (by default `tick`) after the one before."""
        for _ in range(passes):
            self.clock.advance(self.tick if seconds is None else seconds)
            self.reconciler.run_pass()

    def status(self, name: str) -> dict[str, Any]:
        path = self.reconciler.store.status_path(name)
        return read_status(path.parent, path.name.removesuffix(".status.yaml"))

    def write(self, name: str, entrypoint: str = "echo hi", **spec: Any) -> Path:
        return write_task(self.tasks, name, entrypoint, **spec)

    def our_jobs(self) -> list[RayJob]:
        queue = self.reconciler.options.queue_id
        return [j for j in self.ray.jobs.values() if j.metadata.get(META_QUEUE) == queue]
