"""Serve the HTTP API with uvicorn, in the calling thread, until uvicorn is told to stop."""

from __future__ import annotations

import uvicorn

from api.app import create_app
from api.ports import Loop, Observability
from specs.access import Tokens
from specs.cluster import RayAdapter
from specs.settings import Settings


def serve_api(
    settings: Settings,
    loop: Loop,
    ray: RayAdapter,
    tokens: Tokens,
    observability: Observability | None = None,
) -> None:
    app = create_app(settings, reconciler=loop, ray=ray, observability=observability, tokens=tokens)
    # log_config=None: uvicorn leaves logging alone, so its records go through the handler
    # the daemon set up (one format for every line); access logs only when asked for.
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level="info",
        log_config=None,
        access_log=settings.access_log,
    )
    uvicorn.Server(config).run()
