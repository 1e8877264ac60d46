"""The web view: a static page and script under /ui/, and the JSON they poll under /ui/api/.

The page and script hold no data, so they load without the API token (a browser cannot send a
header when it follows a link); the JSON endpoints need it like the rest of the API. All of it
is read-only.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse, Response

from api.authz import Caller
from api.deps import ReconcilerDep, Service, SettingsDep
from api.errors import ApiError, NotFound
from api.ports import Loop, Observability
from api.routes.queues import queue_status
from api.ui_views import finished_since, rows_page
from specs.cluster import Capacity
from specs.folder.store import FolderUnavailable
from specs.task.quantity import readable_resources

STATIC = Path(__file__).parents[1] / "static"
PUBLIC_PATHS = frozenset({"/ui", "/ui/", "/ui/ui.js"})  # no data: no token needed
NO_STORE = {"Cache-Control": "no-store"}
# Rows of /ui/api/tasks a page, unless `limit` says otherwise, and at most.
PAGE_ROWS = 500
MAX_PAGE_ROWS = 5000

router = APIRouter(include_in_schema=False)


def _static(name: str) -> bytes:
    # Read per request (the pages are small): an edited page shows on reload, no restart needed.
    return (STATIC / name).read_bytes()


def _now(loop: Loop | None) -> float:
    return loop.clock() if loop is not None else time.time()


def _resources(value: Capacity | None) -> dict[str, float] | None:
    if value is None:
        return None
    return {"cpu": value.cpu, "gpu": value.gpu, "memory": value.memory}


def _iso(epoch: float | None) -> str | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC).isoformat()


def _observability(request: Request) -> Observability:
    observability: Observability = request.app.state.observability
    return observability


@router.get("/ui")
def ui_redirect() -> RedirectResponse:
    # Relative, so the view also works behind a proxy that mounts the API under a prefix.
    return RedirectResponse("ui/", status_code=308)


@router.get("/ui/")
def ui_page() -> Response:
    return Response(_static("ui.html"), media_type="text/html; charset=utf-8", headers=NO_STORE)


@router.get("/ui/ui.js")
def ui_script() -> Response:
    return Response(_static("ui.js"), media_type="text/javascript; charset=utf-8", headers=NO_STORE)


@router.get("/ui/api/overview")
def overview(settings: SettingsDep, reconciler: ReconcilerDep) -> dict[str, Any]:
    """The header: the loop's last pass, capacity and what this queue reserved of it."""
    out: dict[str, Any] = {
        "now": _now(reconciler),
        "queueId": settings.resolved_queue_id,
        "policy": settings.policy,
        "rayAvailable": None,
        "rayError": None,
        "lastPassAt": None,
        "counts": {"running": None, "starting": None, "queued": None},
        "capacity": None,
        "reserved": None,
    }
    if reconciler is None:
        return out
    state = reconciler.state
    passed = state.last_pass_at is not None
    out.update(
        rayAvailable=state.ray_error is None if passed else None,
        rayError=state.ray_error,
        lastPassAt=_iso(state.last_pass_at),
        capacity=_resources(state.capacity),
        reserved=_resources(state.used) if passed else None,
    )
    if passed:
        out["counts"] = {
            "running": state.running,
            "starting": state.starting,
            "queued": state.queued,
        }
    return out


@router.get("/ui/api/tasks")
def tasks(
    request: Request,
    service: Service,
    reconciler: ReconcilerDep,
    caller: Caller,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_ROWS, description="rows a page")] = PAGE_ROWS,
    after: Annotated[
        str | None, Query(alias="continue", description="the `continue` of the page before")
    ] = None,
) -> dict[str, Any]:
    """A page of the table: the tasks the caller may read as rows in queue order (a task
    array is one row), at most `limit`; `continue` names where the next page starts (None
    after the last), `total` counts the rows of all pages; and the tasks finished in 24 h.
    Like a Kubernetes list's continue token, but a position: a page read after the queue
    moved may repeat or skip a row that moved across it."""
    start = _page_start(after)
    now = _now(reconciler)
    try:
        views = [v for v in service.views() if caller.can_read(v.name)]
    except FolderUnavailable as exc:
        raise ApiError(503, f"tasks folder unavailable: {exc}") from None
    dashboard = _observability(request).dashboard
    since = datetime.fromtimestamp(now, UTC) - timedelta(hours=24)
    page = rows_page(views, dashboard=dashboard, start=start, limit=limit)
    following = page.next_start
    return {
        "now": now,
        "finished24h": finished_since(views, since),
        "tasks": page.rows,
        "total": page.total,
        "continue": None if following is None else str(following),
    }


def _page_start(after: str | None) -> int:
    if after is None or after == "":
        return 0
    if not after.isascii() or not after.isdigit() or len(after) > 9:
        raise ApiError(400, "continue must be the `continue` of an earlier page")
    return int(after)


@router.get("/ui/api/queues")
def queues(settings: SettingsDep) -> dict[str, Any]:
    """The team queues as GET /queues has them; `queues: null` (not a 404) when none are
    configured or the loop has not written their status yet, so the page hides the panel."""
    try:
        body = queue_status(settings)
    except NotFound:
        return {"config": None, "queues": None, "warning": None}
    return {
        "config": body.get("config"),
        "queues": [_readable_queue(q) for q in body.get("queues", [])],
        "warning": body.get("warning"),
    }


def _readable_queue(entry: Any) -> Any:
    """A queue of GET /queues with `text`: its quota, use and loans as a person reads them
    (`4 CPU, 15Gi`), written by the formatter the CLI uses, so that the page and `rayqueue
    queues` agree."""
    if not isinstance(entry, dict):
        return entry
    text = {
        key: readable_resources(value.get("cpu"), value.get("gpu"), value.get("memory"))
        for key in ("nominalQuota", "usage", "borrowed", "lent")
        if isinstance(value := entry.get(key), dict)
    }
    return {**entry, "text": text}


@router.get("/ui/api/history")
def history(
    request: Request,
    reconciler: ReconcilerDep,
    window: str = Query("1h", pattern="^(1h|1d|1w)$"),
) -> Any:
    """Declared use, capacity and task counts over a window, downsampled on the server."""
    source = _observability(request).history
    if source is None:
        raise ApiError(404, "no resource history in this process")
    return source(window, _now(reconciler))
