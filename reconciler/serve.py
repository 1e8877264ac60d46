"""`rayqueue serve`: the composition root. Wires store, Ray, loop, watcher and the HTTP API."""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

from reconciler.local_ray import LocalRayHead
from reconciler.loop import Reconciler
from reconciler.ray_adapter import RayJobsAdapter
from reconciler.settings import Settings
from reconciler.watcher import Watcher
from specs.store import TaskStore

log = logging.getLogger("rayqueue.serve")


class ServeError(Exception):
    """Start-up failed in a way the user can fix; the message says how."""


def serve(settings: Settings) -> None:
    """Run until SIGINT or SIGTERM. Stops the embedded Ray head, and only that one, on exit."""
    try:
        settings.tasks_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ServeError(f"cannot create tasks folder {settings.tasks_dir}: {exc}") from exc
    head: LocalRayHead | None = None
    stop = threading.Event()
    threads: list[threading.Thread] = []
    try:
        address = settings.address
        if address is None:
            log.info("no Ray address given; starting a private local Ray head on loopback")
            head = LocalRayHead()
            address = head.start(num_cpus=settings.local_num_cpus)
            log.info("local Ray head ready; dashboard at %s", address)
        ray = RayJobsAdapter(address, timeout_seconds=settings.ray_timeout_seconds)
        store = TaskStore(settings.tasks_dir, settings.status_dir)
        reconciler = Reconciler(settings, store, ray)
        watcher = Watcher(settings.tasks_dir, reconciler.wake, stop)
        watcher.start()
        loop = threading.Thread(
            target=reconciler.run, args=(stop,), name="rayqueue-loop", daemon=True
        )
        loop.start()
        threads.append(loop)
        log.info(
            "watching %s (queue %s, policy %s, Ray %s)",
            settings.tasks_dir,
            settings.resolved_queue_id,
            settings.policy,
            address,
        )
        if settings.api:
            _serve_api(settings, reconciler, ray)
        else:
            _wait_for_signal(stop)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        if head is not None:
            log.info("stopping the local Ray head")
            head.stop()


def _serve_api(settings: Settings, reconciler: Reconciler, ray: RayJobsAdapter) -> None:
    import uvicorn

    from api.app import create_app

    app = create_app(settings, reconciler=reconciler, ray=ray)
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level="info")
    # uvicorn installs its own SIGINT/SIGTERM handlers and returns when told to stop.
    uvicorn.Server(config).run()


def _wait_for_signal(stop: threading.Event) -> None:
    def handler(signum: int, frame: FrameType | None) -> None:
        del frame
        log.info("signal %d received; shutting down", signum)
        stop.set()

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    while not stop.wait(0.5):
        pass
