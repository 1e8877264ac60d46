"""Configuration files at the top of the tasks folder (`_queues.yaml`): admin tokens only; a
queue's own `team-a/_queues.yaml` (nested queues) also a team's admin token (`folders`).

`_queues.yaml` is validated as the loop will read it; other `_` files only as YAML mappings.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from api.authz import Caller, audit, require_admin
from api.deps import RawBody, Service, SettingsDep
from api.errors import ApiError, NotFound
from specs.queues.config import CONFIG_FILE

router = APIRouter(prefix="/config", tags=["configuration (admin)"])

_YAML_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/yaml": {"schema": {"type": "string"}}},
    }
}


@router.get("/{file:path}", response_class=PlainTextResponse)
def get_config(file: str, request: Request, service: Service, caller: Caller) -> Response:
    """The file as it is on disk, e.g. GET /config/_queues.yaml."""
    require_admin(request, caller, service, file)
    data = service.read_config(file)
    if data is None:
        raise NotFound(f"no configuration file {file}")
    return Response(data, media_type="application/yaml")


@router.put("/{file:path}", openapi_extra=_YAML_BODY)
def put_config(
    file: str,
    request: Request,
    service: Service,
    settings: SettingsDep,
    caller: Caller,
    body: RawBody,
) -> Response:
    """Create (201) or replace (200) a configuration file with the YAML body, byte for byte.
    `_queues.yaml` is validated as the loop reads it (422 names line and field). A team's own
    queue file that asks beyond what its parent grants is written and bounded: the answer then
    lists each bounded field (`{"warnings": ["file:line:column: field: message"]}`)."""
    require_admin(request, caller, service, file)
    queues = settings.queues_path
    if file == CONFIG_FILE and queues is not None and queues != settings.tasks_dir / CONFIG_FILE:
        # The loop reads --queues, not this file; writing here would change nothing.
        raise ApiError(409, f"this server reads its queues from {queues} (--queues); edit that")
    written = service.write_config(file, body)
    audit(request, caller, "created" if written.created else "replaced", file)
    status = 201 if written.created else 200
    if written.warnings:
        return JSONResponse({"warnings": list(written.warnings)}, status_code=status)
    return Response(status_code=status)


@router.delete("/{file:path}")
def delete_config(file: str, request: Request, service: Service, caller: Caller) -> Response:
    require_admin(request, caller, service, file)
    service.delete_config(file)
    audit(request, caller, "deleted", file)
    return Response(status_code=204)
