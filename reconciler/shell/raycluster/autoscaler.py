"""Ray's autoscaler as rayqueue sees it: its report, read from the dashboard, and the
standing resource request, written to the GCS.

With `reconciler.shell.raycluster.adapter`, the only module of rayqueue that imports `ray`.

What Ray 2.60 exposes, found on a real head:
- `GET /api/cluster_status` serves the autoscaler's last report (the monitor writes it to the
  GCS every update). `data.clusterStatus.autoscalerReport` has `activeNodes` and
  `pendingLaunches` by node type, `pendingNodes` as [id, type, status], `failedNodes` as
  [ip, type], `nodeAvailabilitySummary` (a type's last launch error, e.g. a cloud quota) and
  `nodeTypeMapping` (node id -> type); `data.autoscalingError` is the monitor's own failure.
  It does NOT say how far each type may grow or what one node of a type holds: the ceiling
  comes from configuration (`cluster:` in _queues.yaml, `--max-capacity`).
- A head without an autoscaler still runs a read-only monitor, which reports every node as a
  type of its own named `node_<its id>`. A report whose types are all such names (or no
  report) means: this cluster does not autoscale.
- The request (`ray.autoscaler.sdk.request_resources`) is, for the v1 autoscaler (Ray's
  default, KubeRay's default), one key of the GCS's key-value store, and for v2 a GCS call
  (`request_cluster_resources`). Both need the GCS address, not the dashboard's; neither needs
  a Ray driver: `request_resources` itself only calls `ray.init` to find the GCS, so we talk to
  the GCS directly (one gRPC channel, opened once and kept).
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from reconciler.shell.raycluster.poll import HTTPStatus, KeptAliveGets, Unreachable
from specs.cluster import Capacity, RayRequestError, RayUnavailable, Scaling

log = logging.getLogger(__name__)

# KubeRay's head service and `ray start --head` both put the GCS on this port.
DEFAULT_GCS_PORT = 6379
# ray._private.ray_constants.AUTOSCALER_RESOURCE_REQUEST_CHANNEL (v1 reads the request here).
_REQUEST_KEY = b"autoscaler_resource_request"


def gcs_address_for(dashboard: str, gcs_address: str | None) -> str:
    """`--ray-gcs-address` if given, else the dashboard's host on Ray's default GCS port."""
    if gcs_address:
        return gcs_address.split("://", 1)[-1].rstrip("/")
    host = urlsplit(dashboard if "://" in dashboard else f"http://{dashboard}").hostname
    if not host:
        raise ValueError(f"cannot tell the GCS host from the dashboard address {dashboard!r}")
    return f"{host}:{DEFAULT_GCS_PORT}"


def bundle_dict(bundle: Capacity) -> dict[str, float]:
    """One bundle in Ray's words (memory in bytes); zero amounts left out, as Ray does."""
    out = {"CPU": bundle.cpu, "GPU": bundle.gpu, "memory": math.ceil(bundle.memory)}
    return {k: float(v) for k, v in out.items() if v > 0}


def read_report(payload: Any) -> Scaling | None:
    """The autoscaler's report (GET /api/cluster_status) as a Scaling, or None when the cluster
    does not autoscale. The ceiling is unknown to the report and left at zero, node_types
    empty (see the module's docstring); `pending` names one node type per node being
    launched, `failures` carries the autoscaler's own words."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, dict):
        raise RayRequestError("unexpected /api/cluster_status answer")
    status = data.get("clusterStatus")
    report = status.get("autoscalerReport") if isinstance(status, dict) else None
    if not isinstance(report, dict):
        return None
    mapping = report.get("nodeTypeMapping") or {}
    launching = report.get("pendingLaunches") or {}
    # The read-only monitor names each node's type after the node itself.
    if not launching and all(str(t) == f"node_{n}" for n, t in mapping.items()):
        return None
    pending: list[str] = []
    # (The dashboard camelCases dict keys: a type `gpu_workers` shows as `gpuWorkers` here.)
    for kind, count in sorted(launching.items()):
        pending += [str(kind)] * int(count)
    for node in report.get("pendingNodes") or []:
        if isinstance(node, list | tuple) and len(node) >= 2:
            pending.append(str(node[1]))
    failures: list[str] = []
    for node in report.get("failedNodes") or []:
        if isinstance(node, list | tuple) and len(node) >= 2:
            failures.append(f"a {node[1]} node ({node[0]}) failed")
    summary = (report.get("nodeAvailabilitySummary") or {}).get("nodeAvailabilities") or {}
    for kind, record in sorted(summary.items()):
        info = (
            (record or {}).get("unavailableNodeInformation") if isinstance(record, dict) else None
        )
        if isinstance(record, dict) and not record.get("isAvailable", True) and info:
            words = info.get("description") or info.get("category") or "unavailable"
            failures.append(f"{kind}: {words}")
    error = data.get("autoscalingError")
    if error:
        failures.append(str(error).strip())
    return Scaling(Capacity(), (), "autoscaler", tuple(pending), tuple(failures))


class RayAutoscaler:
    """specs.cluster.Autoscaler over a dashboard address and a GCS address."""

    def __init__(
        self,
        dashboard: str,
        gcs_address: str,
        *,
        timeout_seconds: float = 10.0,
        headers: dict[str, str] | None = None,
    ) -> None:
        if "://" not in dashboard:
            dashboard = f"http://{dashboard}"
        self.dashboard = dashboard.rstrip("/")
        self.gcs_address = gcs_address
        self.timeout_seconds = timeout_seconds
        self._poll = KeptAliveGets(
            self.dashboard, timeout_seconds=timeout_seconds, headers=dict(headers or {})
        )
        self._gcs: Any = None
        self._v2: bool | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RayAutoscaler({self.dashboard!r}, gcs={self.gcs_address!r})"

    def scaling(self) -> Scaling | None:
        try:
            payload = self._poll.get_json("/api/cluster_status")
        except HTTPStatus as exc:
            if exc.status in (502, 503, 504):
                raise RayUnavailable(f"read the autoscaler's report: {exc}") from exc
            raise RayRequestError(f"read the autoscaler's report: {exc}") from exc
        except Unreachable as exc:
            raise RayUnavailable(f"read the autoscaler's report: {exc}") from exc
        except ValueError as exc:
            raise RayRequestError("the autoscaler's report is not JSON") from exc
        try:
            return read_report(payload)
        except (TypeError, ValueError, AttributeError) as exc:
            raise RayRequestError(f"unexpected autoscaler report: {exc}") from exc

    def request(self, bundles: Sequence[Capacity]) -> None:
        """Replace the standing request (what `request_resources(bundles=...)` does)."""
        wanted = [bundle_dict(b) for b in bundles]
        wanted = [b for b in wanted if b]
        with self._lock:
            try:
                gcs = self._client()
                if self._v2 is None:
                    from ray.autoscaler.v2.utils import is_autoscaler_v2

                    self._v2 = bool(is_autoscaler_v2(fetch_from_server=True, gcs_client=gcs))
                if self._v2:
                    from ray.autoscaler.v2.sdk import request_cluster_resources

                    request_cluster_resources(
                        self.gcs_address,
                        [{"resources": b, "label_selector": {}} for b in wanted],
                        timeout=max(1, math.ceil(self.timeout_seconds)),
                    )
                else:
                    gcs.internal_kv_put(
                        _REQUEST_KEY,
                        json.dumps(wanted).encode(),
                        True,
                        None,
                        timeout=self.timeout_seconds,
                    )
            except Exception as exc:
                # The channel may be stale (the head restarted): open a new one next time.
                self._gcs, self._v2 = None, None
                raise RayUnavailable(
                    f"request resources from the autoscaler at {self.gcs_address}: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc

    def requested(self) -> list[dict[str, float]] | None:
        """The standing v1 request as stored in the GCS (for tests and `describe`)."""
        with self._lock:
            raw = self._client().internal_kv_get(_REQUEST_KEY, None, timeout=self.timeout_seconds)
        return None if raw is None else list(json.loads(raw))

    def _client(self) -> Any:
        if self._gcs is None:
            from ray._raylet import GcsClient  # type: ignore[attr-defined]

            self._gcs = GcsClient(address=self.gcs_address)
        return self._gcs
