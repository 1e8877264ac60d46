"""`rayqueue serve`: the composition root. Wires store, Ray, loop, watcher and the HTTP API."""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING

from reconciler.app.assembly import autoscaler_for, build_reconciler, start_loop
from reconciler.app.logsetup import route_foreign
from reconciler.app.runtime import first_pass_gc, tune_gc
from reconciler.shell.loop.faults import Faults, FaultSpecError
from reconciler.shell.loop.runner import Reconciler
from reconciler.shell.loop.writes import status_location_problem
from reconciler.shell.ops import head_record
from reconciler.shell.ops.history import HistoryView
from reconciler.shell.ops.lock import LOCK_NAME, LockHeld, StateLock
from reconciler.shell.raycluster.address import AddressRefused, Located, NotAnswering, locate
from specs.cluster import RayAdapter
from specs.settings.process import Settings
from specs.settings.rayaddress import DashboardUrl, parse_ray_address
from specs.tenancy.access import TOKEN_ENV, AccessError, Tokens, exposure_problem, load_tokens
from specs.tenancy.runtimepaths import unconfined_warning

if TYPE_CHECKING:
    from reconciler.shell.raycluster.local_head import LocalRayHead

log = logging.getLogger("rayqueue.serve")


class ServeError(Exception):
    """Start-up failed in a way the user can fix; the message says how. `usage`: a value
    given was refused (the CLI exits 2)."""

    def __init__(self, message: str, *, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


# While a Ray address that is not the dashboard's URL does not answer at start, how often it is
# asked again: which dashboard it leads to is not known before it answers.
_LOCATE_RETRY_SECONDS = 2.0


def serve(settings: Settings) -> None:
    """Run until SIGINT or SIGTERM. Stops the embedded Ray head, and only that one, on exit."""
    # Before anything starts: an unusable token file or an open listener is refused at once.
    try:
        tokens = load_tokens(settings)
    except AccessError as exc:
        raise ServeError(str(exc)) from exc
    problem = exposure_problem(settings, tokens)
    if problem is not None:
        raise ServeError(problem)
    if TOKEN_ENV in settings.head_env:
        raise ServeError(
            f"RAYQUEUE_HEAD_ENV names {TOKEN_ENV}: serve's own token never goes to the Ray "
            "head, where every job could read it"
        )
    for warning in (unconfined_warning(settings, tokens), shared_user_warning(settings)):
        if warning is not None:
            log.warning("%s", warning)
    # --insecure-no-auth: the API warns when it starts (api/app.py), every time.
    try:
        settings.tasks_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ServeError(f"cannot create tasks folder {settings.tasks_dir}: {exc}") from exc
    # A read-only tasks folder without --status-dir would plan a start every pass and submit
    # nothing (no run starts before its record is on disk): say so at once.
    location = settings.status_dir or settings.tasks_dir
    unwritable = status_location_problem(location, given=settings.status_dir is not None)
    if unwritable is not None:
        fatal, message = unwritable
        if fatal:
            raise ServeError(message)
        log.warning("%s", message)
    try:
        faults = Faults.from_env(os.environ)  # read once, here, never at import
    except FaultSpecError as exc:
        raise ServeError(str(exc)) from exc
    if faults.armed:
        log.warning("fault injection armed: SIGKILL at %s #%d", faults.point, faults.nth)
    located = _locate_at_start(settings)
    stop = threading.Event()
    lock = StateLock(settings.resolved_state_dir / LOCK_NAME)
    running = _Running()
    try:
        # A signal during start-up (a standby's wait, the Ray head's boot) must still end in
        # the clean shutdown below, not in a default death that leaks the head.
        with _stop_on_signal(stop):
            # The lock comes first, so a refused second instance starts no Ray head.
            if not _take_lock(settings, lock, stop):
                return  # a standby told to stop before it took over
            if located is None and _waits_for_ray(settings):
                located = _wait_for_ray(settings, stop)
                if located is None:
                    return  # told to stop while Ray did not answer
            ray, reconciler, address = _start(settings, faults, stop, running, tokens, located)
            if stop.is_set():
                return
            # For `rayqueue logs/plan/describe`, which otherwise have no way to find a
            # private head; removed on exit.
            try:
                head_record.write(
                    settings.resolved_state_dir, address, private=running.head is not None
                )
                running.recorded = True
            except OSError as exc:
                log.warning("cannot record the Ray address for the CLI: %s", exc)
            log.info(
                "watching %s (queue %s, policy %s, Ray %s)",
                settings.tasks_dir,
                settings.resolved_queue_id,
                settings.policy,
                address,
            )
            if not settings.api:
                while not stop.wait(0.5):
                    pass
                return
        # uvicorn installs its own SIGINT/SIGTERM handlers, shuts down, then restores the previous
        # handlers and raises the signal again. With the default ones that re-raise would kill the
        # process before the clean-up below and leak the Ray head; ours only set `stop`.
        # Imported here: only api/ imports the web stack, and --no-api never loads it.
        from api.ports import Observability
        from api.server import serve_api

        history = HistoryView(
            reconciler.history.path, heartbeat_seconds=settings.history_heartbeat_seconds
        )
        observability = Observability(
            metrics=reconciler.metrics.exposition if reconciler.metrics is not None else None,
            history=history.window,
            dashboard=address,
        )
        with _stop_on_signal(stop):
            # One store for both: the API lists what the loop last read, with its positions.
            serve_api(settings, reconciler, ray, tokens, observability, store=reconciler.store)
    finally:
        stop.set()
        if running.recorded:
            head_record.remove(settings.resolved_state_dir)
        for thread in running.threads:
            thread.join(timeout=30)
        if running.head is not None:
            log.info("stopping the local Ray head")
            running.head.stop()
        lock.release()


SHARED_USER_WARNING = (
    "team tokens with the embedded local Ray head: every team's job runs as this scheduler's "
    "user on this host, so it can read the team tokens file, every team's specs and statuses, "
    "and drive the Ray head itself. For teams that do not trust each other, run Ray as a "
    "separate cluster (--address) or at least as a separate OS user (docs/deploy.md, Threat "
    "model); set RAYQUEUE_SINGLE_USER_HEAD=true to accept this and silence the warning"
)


def shared_user_warning(settings: Settings) -> str | None:
    """The warning serve logs at start when team tokens meet the embedded head."""
    if settings.team_tokens is None or settings.address is not None:
        return None
    return None if settings.single_user_head else SHARED_USER_WARNING


@dataclass
class _Running:
    """What start-up has started so far, for the shutdown to undo."""

    head: LocalRayHead | None = None
    threads: list[threading.Thread] = field(default_factory=list)
    recorded: bool = False  # head.json written


def _locate_at_start(settings: Settings) -> Located | None:
    """The dashboard the given Ray address leads to, asked once before anything starts: an
    address that answers, but not as Ray does, is refused (exit 2). None: no address (a
    private head), or nothing answers yet, which serve outlives."""
    if settings.address is None:
        return None
    try:
        located = locate(settings.address, timeout_seconds=settings.ray_timeout_seconds)
    except AddressRefused as exc:
        raise ServeError(str(exc), usage=True) from None
    except NotAnswering as exc:
        log.warning("the Ray address %s does not answer yet: %s", settings.address, exc)
        return None
    log.info("Ray address %s: %s", settings.address, located.how)
    return located


def _waits_for_ray(settings: Settings) -> bool:
    """Whether the given address must answer before the loop starts: any but a dashboard URL,
    as which dashboard it leads to is known only once it answers."""
    if settings.address is None:
        return False
    return not isinstance(parse_ray_address(settings.address), DashboardUrl)


def _wait_for_ray(settings: Settings, stop: threading.Event) -> Located | None:
    """Ask a Ray address that did not answer at start again until it leads to a dashboard;
    None once `stop` is set."""
    assert settings.address is not None
    log.warning(
        "waiting for Ray at %s before the loop starts (which dashboard a GCS address or "
        "`auto` leads to is known only once it answers)",
        settings.address,
    )
    while not stop.wait(_LOCATE_RETRY_SECONDS):
        try:
            located = locate(settings.address, timeout_seconds=settings.ray_timeout_seconds)
        except AddressRefused as exc:
            raise ServeError(str(exc), usage=True) from None
        except NotAnswering as exc:
            log.debug("the Ray address %s does not answer yet: %s", settings.address, exc)
            continue
        log.info("Ray address %s: %s", settings.address, located.how)
        return located
    return None


def _start(
    settings: Settings,
    faults: Faults,
    stop: threading.Event,
    running: _Running,
    tokens: Tokens | None = None,
    located: Located | None = None,
) -> tuple[RayAdapter, Reconciler, str]:
    """Ray (a private head if no address), the store, and the loop and watcher threads.

    A dashboard URL that did not answer at start is used as it is: the loop says so each pass
    until Ray answers."""
    # Imported here, not at the top: importing Ray is slow and needs Ray installed, which the
    # CLI's other commands and the pure tests do not.
    from reconciler.shell.raycluster.adapter import RayJobsAdapter
    from reconciler.shell.raycluster.local_head import LocalRayHead

    # Importing ray gives its logger a handler and format of its own: route it through ours.
    route_foreign(access_log=settings.access_log)
    address: str | None = None
    if located is not None:
        address = located.dashboard
    elif settings.address is not None:
        form = parse_ray_address(settings.address)
        assert isinstance(form, DashboardUrl), "any other address is located before the start"
        address = form.url
    if address is None:
        log.info("no Ray address given; starting a private local Ray head on loopback")
        running.head = LocalRayHead()
        address = running.head.start(num_cpus=settings.local_num_cpus, passed_env=settings.head_env)
        log.info("local Ray head ready; dashboard at %s", address)
    ray = RayJobsAdapter(
        address,
        timeout_seconds=settings.ray_timeout_seconds,
        entrypoint_resources=settings.count_foreign_jobs,
    )
    # Here, in serve's composition root, not in build_reconciler: a test process that builds a
    # loop keeps the default GC.
    tune_gc()
    reconciler = build_reconciler(
        settings,
        ray,
        faults=faults,
        tokens=tokens,
        # A private head never autoscales; a given cluster may.
        autoscaler=(
            autoscaler_for(settings, address, located.gcs if located is not None else None)
            if running.head is None
            else None
        ),
    )
    threads = start_loop(reconciler, stop, first_pass_gc)
    running.threads.append(threads.loop)
    if threads.census is not None:
        running.threads.append(threads.census)
    return reconciler.ray, reconciler, address


def _take_lock(settings: Settings, lock: StateLock, stop: threading.Event) -> bool:
    """Hold the state folder's lock: at once, or (standby) once the holder is gone."""
    try:
        lock.acquire(tasks_dir=settings.tasks_dir)
        return True
    except LockHeld as exc:
        if not settings.standby:
            raise ServeError(
                f"another rayqueue serve is running on this folder: {exc.holder.describe()} "
                f"holds the lock {exc.path}. Stop it first, or start this one with --standby "
                "to take over when it exits."
            ) from None
        log.warning(
            "standby: %s is held by %s; waiting to take over", exc.path, exc.holder.describe()
        )
    except OSError as exc:
        raise ServeError(f"cannot create the lock file {lock.path}: {exc}") from exc
    taken = lock.wait(stop, tasks_dir=settings.tasks_dir)
    if taken:
        log.info("lock %s taken over; this instance is now active", lock.path)
    return taken


@contextmanager
def _stop_on_signal(stop: threading.Event) -> Iterator[None]:
    """SIGINT/SIGTERM set `stop` inside the block; the previous handlers come back after."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        del frame
        log.info("signal %d received; shutting down", signum)
        stop.set()

    previous: dict[int, Callable[[int, FrameType | None], object] | int | None] = {
        sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
