"""The HTTP API's app factory. Nothing happens at import; everything is built in create_app.

The API never asks Ray to create, change or cancel anything. It writes and edits spec files in
the tasks folder and reads the sidecars; the reconcile loop does the rest. Ray is only read
(job logs), and the loop's last observations are shown as they are.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.middleware.trustedhost import TrustedHostMiddleware

from api.errors import install_handlers
from api.frontdoor import RayqueueAPI
from api.middleware import MAX_BODY_BYTES, BodyLimit
from api.ports import Loop, Observability
from api.ratelimit import RateLimit, RateLimits
from api.routes import cluster, config, docs, legacy, metrics, queues, tasks, ui
from api.security import OriginCheck, TokenAuth, allowed_hosts, own_host_names
from specs.cluster import RayAdapter
from specs.folder.store import TaskStore
from specs.service.tasks import TaskService
from specs.settings.process import Settings
from specs.tenancy.access import TOKEN_ENV, Tokens, insecure_warning, load_tokens
from specs.tenancy.runtimepaths import RuntimePaths

log = logging.getLogger("rayqueue.api")

# Probes: /healthz (alive) and /readyz (ready) answer without a token, so a kubelet or Docker
# health check needs no secret. Neither shows a task.
UNAUTHENTICATED_PATHS = frozenset({"/healthz", "/readyz"})


def unauthenticated_paths(settings: Settings) -> frozenset[str]:
    """The probes; /metrics unless --metrics-auth (a scrape should need no secret); and the web
    view's page and script, which hold no data (the JSON they fetch needs the token)."""
    paths = UNAUTHENTICATED_PATHS | ui.PUBLIC_PATHS
    return paths if settings.metrics_auth else paths | {"/metrics"}


def create_app(
    settings: Settings,
    *,
    reconciler: Loop | None = None,
    ray: RayAdapter | None = None,
    observability: Observability | None = None,
    tokens: Tokens | None = None,
    store: TaskStore | None = None,
) -> FastAPI:
    """Build the app. With no reconciler, cluster answers are unknown and /readyz is 503.

    `reconciler` is the running loop (anything shaped like api.ports.Loop); `ray` reads job
    logs, by default through the loop's adapter. `observability` feeds /metrics and the web
    view (/ui/); without it /metrics and the plot's history answer 404. `tokens`: who may
    call; by default read from the settings (and $RAYQUEUE_API_TOKEN), none meaning no auth.
    `store`: the loop's own store, when the loop runs in this process: the API then serves
    what the loop last read and holds (its queue positions and estimates) without walking the
    folder per request. Without it the API reads the folder with a store of its own.
    """
    if tokens is None:
        tokens = load_tokens(settings)  # AccessError if a token file is unusable
    # runtimeEnv local paths: each writer's roots (api/authz.py); the store shows a spec
    # outside every root that applies to it as the loop will, Invalid.
    runtime_paths = RuntimePaths.from_settings(settings, tokens)
    shared = store is not None
    if store is None:
        store = TaskStore(
            settings.tasks_dir,
            settings.status_dir,
            check=runtime_paths.store_check(),
            max_array_elements=settings.max_array_elements,
        )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        warning = insecure_warning(settings, tokens)
        if warning is not None:
            log.warning("%s", warning)
        log.info("HTTP API ready (tasks folder %s)", settings.tasks_dir)
        yield

    # The docs pages are our own (api/routes/docs.py): FastAPI's load Swagger UI from a CDN.
    # RayqueueAPI puts api.frontdoor.FrontDoor (security headers, 401/403 audit) outermost.
    app = RayqueueAPI(
        title="rayqueue",
        version="0.1.0",
        summary="A job queue in front of a shared Ray cluster; specs are files.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.reconciler = reconciler
    app.state.ray = ray if ray is not None else (reconciler.ray if reconciler else None)
    app.state.service = TaskService(
        store,
        on_write=reconciler.wake.set if reconciler is not None else None,
        # Ages are measured on the loop's clock, the one that stamped queuedAt.
        clock=reconciler.clock if reconciler is not None else time.time,
        loop_store=shared,
    )
    app.state.observability = observability or Observability()
    app.state.tokens_required = tokens.required
    app.state.rate_limits = RateLimits()  # requestsPerMinute; a test swaps its clock
    app.state.quota_lock = threading.Lock()  # maxTasks: one create at a time under a limit
    app.state.queue_room = queues.QueueRoom()  # maxQueued: creates since the last pass count
    app.state.runtime_paths = runtime_paths
    install_handlers(app)
    app.include_router(legacy.router)
    app.include_router(tasks.router)
    app.include_router(cluster.router)
    app.include_router(queues.router)
    app.include_router(metrics.router)
    app.include_router(ui.router)
    app.include_router(config.router)
    app.include_router(docs.router)
    # Each one added wraps the ones before, so they run in the reverse order: Host, Origin,
    # token, rate, body cap. A refused request is never read or routed.
    app.add_middleware(BodyLimit, max_bytes=MAX_BODY_BYTES)
    if tokens.required:
        app.add_middleware(RateLimit, limits=app.state.rate_limits)
        app.add_middleware(TokenAuth, tokens=tokens, exempt=unauthenticated_paths(settings))
    app.add_middleware(
        OriginCheck,
        allowed_origins=settings.allowed_origins,
        own_hosts=own_host_names(settings),
    )
    app.add_middleware(
        TrustedHostMiddleware, allowed_hosts=allowed_hosts(settings), www_redirect=False
    )
    return app


__all__ = ["TOKEN_ENV", "UNAUTHENTICATED_PATHS", "create_app", "unauthenticated_paths"]
