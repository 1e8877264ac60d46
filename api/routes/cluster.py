"""What the loop last saw of the cluster, and the health probes."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from api.deps import ReconcilerDep, SettingsDep
from api.models import ClusterView, Health, Readiness, Resources
from api.ports import Loop
from api.security import PRINCIPAL_KEY
from specs.cluster import Capacity
from specs.service.views import rfc3339
from specs.settings.process import Settings

router = APIRouter(tags=["cluster"])


def _iso(epoch: float | None) -> str | None:
    return rfc3339(epoch) if epoch is not None else None


def _resources(value: Capacity | None) -> Resources | None:
    if value is None:
        return None
    return Resources(cpu=value.cpu, gpu=value.gpu, memory=value.memory)


@router.get("/cluster", response_model=ClusterView)
def cluster(settings: SettingsDep, reconciler: ReconcilerDep) -> ClusterView:
    """Capacity, declared use, free resources and task counts, as of the loop's last pass."""
    if reconciler is None:
        return ClusterView(
            queueId=settings.resolved_queue_id,
            policy=settings.policy,
            capacity=None,
            used=None,
            free=None,
            queued=None,
            starting=None,
            running=None,
            rayAvailable=None,
            rayError=None,
            lastPassAt=None,
            lastRayOkAt=None,
        )
    state = reconciler.state
    passed = state.last_pass_at is not None
    return ClusterView(
        queueId=settings.resolved_queue_id,
        policy=settings.policy,
        capacity=_resources(state.capacity),
        used=_resources(state.used) if passed else None,
        free=_resources(state.capacity - state.used) if state.capacity is not None else None,
        queued=state.queued if passed else None,
        starting=state.starting if passed else None,
        running=state.running if passed else None,
        rayAvailable=(state.ray_error is None and state.last_ray_ok_at is not None)
        if passed
        else None,
        rayError=state.ray_error,
        lastPassAt=_iso(state.last_pass_at),
        lastRayOkAt=_iso(state.last_ray_ok_at),
    )


@router.get("/healthz", response_model=Health)
def healthz() -> Health:
    """The process is alive. Needs no token."""
    return Health(status="ok")


def readiness(settings: Settings, reconciler: Loop | None) -> dict[str, str]:
    """Failed checks by name; empty when ready."""
    if reconciler is None:
        return {"loop": "no reconcile loop in this process"}
    state = reconciler.state
    now = reconciler.clock()
    # A pass may legitimately take a Ray timeout on top of the interval.
    window = 3 * settings.interval_seconds + settings.ray_timeout_seconds
    failed: dict[str, str] = {}
    if state.last_pass_at is None:
        failed["loop"] = "the loop has not completed a pass yet"
    elif now - state.last_pass_at > window:
        failed["loop"] = f"no pass for {now - state.last_pass_at:.1f}s"
    if state.last_ray_ok_at is None:
        failed["ray"] = state.ray_error or "Ray has not answered yet"
    elif now - state.last_ray_ok_at > window:
        failed["ray"] = f"Ray last answered {now - state.last_ray_ok_at:.1f}s ago" + (
            f": {state.ray_error}" if state.ray_error else ""
        )
    if state.folder_error is not None:
        failed["folder"] = state.folder_error
    return failed


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={503: {"description": "not ready; `detail` says why"}},
)
def readyz(settings: SettingsDep, reconciler: ReconcilerDep, request: Request) -> JSONResponse:
    """Ready when the loop ran within the last few intervals and Ray answered recently.
    Needs no token; without one, the reasons are left out (they may name hosts and paths)."""
    failed = readiness(settings, reconciler)
    if failed and request.app.state.tokens_required and PRINCIPAL_KEY not in request.scope:
        checks = dict.fromkeys(failed, "failing")
        return JSONResponse({"detail": "not ready: " + ", ".join(failed), "checks": checks}, 503)
    if failed:
        detail = "; ".join(f"{k}: {v}" for k, v in failed.items())
        return JSONResponse({"detail": f"not ready: {detail}", "checks": failed}, 503)
    return JSONResponse({"ready": True, "checks": {"loop": "ok", "ray": "ok", "folder": "ok"}})
