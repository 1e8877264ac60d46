"""How `rayqueue serve` puts its loop together: store, reconciler, watcher and loop thread.

The daemon and the benchmarks both build the loop here, so a benchmark measures the loop a
user runs (same store, same settle time, same wiring), not a hand-made variant of it.
"""

from __future__ import annotations

import importlib.metadata
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from reconciler.shell.loop.faults import Faults
from reconciler.shell.loop.runner import Reconciler
from reconciler.shell.ops.census import CensusMetrics, CensusPoller
from reconciler.shell.ops.metrics import CountingRayAdapter, QueueMetrics
from reconciler.shell.watch.watcher import Watcher
from specs.cluster import Autoscaler, CensusReader, RayAdapter
from specs.folder.store import TaskStore
from specs.settings.process import Settings
from specs.tenancy.access import Tokens, load_tokens
from specs.tenancy.runtimepaths import OFF, RuntimePaths


def build_store(settings: Settings, paths: RuntimePaths = OFF) -> TaskStore:
    """The loop's store; with `paths` confining runtimeEnv, a spec naming a local path outside
    the roots that apply to it reads as Invalid."""
    return TaskStore(
        settings.tasks_dir,
        settings.status_dir,
        settle_seconds=settings.settle_seconds,
        check=paths.store_check(),
        max_array_elements=settings.max_array_elements,
    )


def build_reconciler(
    settings: Settings,
    ray: RayAdapter,
    *,
    faults: Faults | None = None,
    clock: Callable[[], float] = time.time,
    tokens: Tokens | None = None,
    autoscaler: Autoscaler | None = None,
) -> Reconciler:
    """The store and the reconciler as `serve` builds them (serve's daemon also tunes GC,
    there, so a test process that builds a loop keeps the default GC).
    `tokens`: the API's, whose workingDirRoots apply to the specs they may write (default:
    read from the settings)."""
    if tokens is None:
        tokens = load_tokens(settings)
    paths = RuntimePaths.from_settings(settings, tokens)
    store = build_store(settings, paths)
    metrics = QueueMetrics(version())
    # Counted at the adapter's edge, so the loop's and the API's calls to Ray are all seen.
    counted = CountingRayAdapter(ray, metrics)
    # What every Ray job holds, where the adapter can tell (the real one and the fake both
    # can), on a thread of its own that start_loop starts.
    census = (
        CensusPoller(ray, settings.census_seconds, CensusMetrics(metrics.registry))
        if settings.census_seconds > 0 and isinstance(ray, CensusReader)
        else None
    )
    return Reconciler(
        settings,
        store,
        counted,
        faults=faults,
        clock=clock,
        metrics=metrics,
        paths=paths,
        autoscaler=autoscaler,
        census=census,
    )


def autoscaler_for(settings: Settings, dashboard: str, gcs: str | None = None) -> Autoscaler:
    """Ray's autoscaler behind the dashboard at `dashboard`: its report read from there, its
    request sent to --ray-gcs-address (default: `gcs`, the GCS the dashboard was found
    through, else the dashboard's host, port 6379). On a cluster without one, its report says
    so and nothing is ever requested."""
    from reconciler.shell.raycluster.autoscaler import RayAutoscaler, gcs_address_for

    return RayAutoscaler(
        dashboard,
        gcs_address_for(dashboard, settings.ray_gcs_address or gcs),
        timeout_seconds=settings.ray_timeout_seconds,
    )


def version() -> str:
    try:
        return importlib.metadata.version("rayqueue")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"  # run from a source tree that was never installed


@dataclass
class LoopThreads:
    """The watcher, the loop thread and the census thread (if any) of a started reconciler."""

    watcher: Watcher
    loop: threading.Thread
    census: threading.Thread | None = None

    def join(self, timeout: float | None = None) -> None:
        self.loop.join(timeout)
        self.watcher.join(timeout)
        if self.census is not None:
            self.census.join(timeout)


# How long serve's first pass waits for the watcher to be armed (setting up the watches is quick;
# a watcher that cannot arm only costs the second pass a walk).
ARM_WAIT_SECONDS = 2.0


def start_loop(
    reconciler: Reconciler,
    stop: threading.Event,
    first: Callable[[], AbstractContextManager[object]] = nullcontext,
) -> LoopThreads:
    """File events wake the loop early; `stop` ends both threads. The loop's first pass runs
    inside `first()` (serve's: reconciler/app/runtime.first_pass_gc; tests keep the GC as is).

    The loop starts once the watcher is armed: the first pass walks the whole folder anyway,
    and begun after the watches were set up, it covers whatever changed before them, so the
    next pass reads only what events name. Started at once, the first pass (long on a big folder)
    nearly always begins first, and the pass after it walks everything again, reading each
    spec's stat and every sidecar."""
    watcher = start_watcher(reconciler, stop)
    reconciler.events.wait_armed(ARM_WAIT_SECONDS)
    loop = threading.Thread(
        target=reconciler.run, args=(stop, first), name="rayqueue-loop", daemon=True
    )
    loop.start()
    census = reconciler.census.start(stop) if reconciler.census is not None else None
    return LoopThreads(watcher, loop, census)


def start_watcher(reconciler: Reconciler, stop: threading.Event) -> Watcher:
    """File events wake `reconciler` and tell it which paths changed."""
    watcher = Watcher(reconciler.settings.tasks_dir, reconciler.wake, stop, reconciler.events)
    watcher.start()
    return watcher


def describe(reconciler: Reconciler) -> dict[str, Any]:
    """What decides how a built loop behaves; equal descriptions mean the same loop."""
    store = reconciler.store
    return {
        "reconciler": type(reconciler).__qualname__,
        "store": type(store).__qualname__,
        "root": store.root,
        "status_dir": store.status_dir,
        "settle_seconds": store.settle_seconds,
        "settings": reconciler.settings,
        "options": reconciler.options,
        "faults_armed": reconciler.faults.armed,
        "ray": type(reconciler.ray).__qualname__,
        "metrics": type(reconciler.metrics).__qualname__,
        "paths": reconciler.paths,
        "autoscaler": None if reconciler.autoscaler is None else repr(reconciler.autoscaler),
    }
