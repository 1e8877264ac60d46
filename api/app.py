"""The HTTP API's app factory. Nothing happens at import; everything is built in create_app.

The API never asks Ray to create, change or cancel anything. It writes and edits spec files in
the tasks folder and reads the sidecars; the reconcile loop does the rest. Ray is only read
(job logs), and the loop's last observations are shown as they are.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from api.errors import install_handlers
from api.middleware import MAX_BODY_BYTES, BearerAuth, BodyLimit
from api.ports import Loop, Observability
from api.routes import cluster, legacy, metrics, queues, tasks, ui
from specs.cluster import RayAdapter
from specs.service import TaskService
from specs.settings import Settings
from specs.store import TaskStore

log = logging.getLogger("rayqueue.api")

TOKEN_ENV = "RAYQUEUE_API_TOKEN"
UNAUTHENTICATED_PATHS = frozenset({"/healthz"})


def unauthenticated_paths(settings: Settings) -> frozenset[str]:
    """/healthz; /metrics unless --metrics-auth (a scrape should need no secret); and the web
    view's page and script, which hold no data (the JSON they fetch needs the token)."""
    paths = UNAUTHENTICATED_PATHS | ui.PUBLIC_PATHS
    return paths if settings.metrics_auth else paths | {"/metrics"}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: assume it is reachable from elsewhere


def api_token(settings: Settings) -> str | None:
    """From settings.api_token, else $RAYQUEUE_API_TOKEN; empty means none."""
    token = settings.api_token or os.environ.get(TOKEN_ENV) or ""
    return token or None


def create_app(
    settings: Settings,
    *,
    reconciler: Loop | None = None,
    ray: RayAdapter | None = None,
    observability: Observability | None = None,
) -> FastAPI:
    """Build the app. With no reconciler, cluster answers are unknown and /readyz is 503.

    `reconciler` is the running loop (anything shaped like api.ports.Loop); `ray` reads job
    logs, by default through the loop's adapter. `observability` feeds /metrics and the web
    view (/ui/); without it /metrics and the plot's history answer 404.
    """
    token = api_token(settings)
    store = TaskStore(settings.tasks_dir, settings.status_dir)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if token is None and not is_loopback(settings.host):
            log.warning(
                "the HTTP API listens on %s without a token: anyone who can reach it can "
                "create, change and delete tasks. Set %s to require a bearer token.",
                settings.host,
                TOKEN_ENV,
            )
        log.info("HTTP API ready (tasks folder %s)", settings.tasks_dir)
        yield

    app = FastAPI(
        title="rayqueue",
        version="0.1.0",
        summary="A job queue in front of a shared Ray cluster; specs are files.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.reconciler = reconciler
    app.state.ray = ray if ray is not None else (reconciler.ray if reconciler else None)
    app.state.service = TaskService(
        store,
        on_write=reconciler.wake.set if reconciler is not None else None,
        # Ages are measured on the loop's clock, the one that stamped queuedAt.
        clock=reconciler.clock if reconciler is not None else time.time,
    )
    app.state.observability = observability or Observability()
    install_handlers(app)
    app.include_router(legacy.router)
    app.include_router(tasks.router)
    app.include_router(cluster.router)
    app.include_router(queues.router)
    app.include_router(metrics.router)
    app.include_router(ui.router)
    # Added last, so it runs first: a refused request is never read or routed.
    app.add_middleware(BodyLimit, max_bytes=MAX_BODY_BYTES)
    if token is not None:
        app.add_middleware(BearerAuth, token=token, exempt=unauthenticated_paths(settings))
    return app
