"""The HTTP API's app factory. Nothing happens at import; everything is built in create_app."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from reconciler.settings import Settings


def create_app(settings: Settings, *, reconciler: Any = None, ray: Any = None) -> FastAPI:
    app = FastAPI(title="rayqueue", version="0.1.0")
    app.state.settings = settings
    app.state.reconciler = reconciler
    app.state.ray = ray

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app
