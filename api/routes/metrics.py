"""GET /metrics: the Prometheus text, rendered by prometheus_client in the reconciler."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from api.errors import ApiError
from api.ports import Observability

router = APIRouter(tags=["monitoring"])


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request) -> Response:
    observability: Observability = request.app.state.observability
    if observability.metrics is None:
        raise ApiError(404, "metrics are not collected by this process")
    exposition = observability.metrics()
    return Response(content=exposition.body, media_type=exposition.content_type)
