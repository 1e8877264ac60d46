"""Serve the HTTP API with uvicorn, in the calling thread, until uvicorn is told to stop."""

from __future__ import annotations

import uvicorn

from api.app import create_app
from api.ports import Loop
from specs.cluster import RayAdapter
from specs.settings import Settings


def serve_api(settings: Settings, loop: Loop, ray: RayAdapter) -> None:
    app = create_app(settings, reconciler=loop, ray=ray)
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level="info")
    uvicorn.Server(config).run()
