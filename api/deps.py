"""Shared route dependencies, as Annotated aliases. Everything comes from app.state, set by
create_app: no module-level settings, store or client."""

from __future__ import annotations

import json
from typing import Annotated, Any
from urllib.parse import parse_qsl

from fastapi import Depends, Header, Request

from api.errors import ApiError, Unprocessable
from api.ports import Loop
from specs.cluster import RayAdapter
from specs.service.tasks import TaskService
from specs.settings.process import Settings

JSON_TYPES = frozenset({"application/json", "application/merge-patch+json"})
YAML_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml"})
FORM_TYPE = "application/x-www-form-urlencoded"
_MAX_JSON_DEPTH = 100


def get_service(request: Request) -> TaskService:
    service: TaskService = request.app.state.service
    return service


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_reconciler(request: Request) -> Loop | None:
    reconciler: Loop | None = request.app.state.reconciler
    return reconciler


def get_ray(request: Request) -> RayAdapter | None:
    ray: RayAdapter | None = request.app.state.ray
    return ray


def media_type(request: Request) -> str:
    """The Content-Type without parameters, lower case; "" when absent."""
    return request.headers.get("content-type", "").split(";", 1)[0].strip().lower()


async def raw_body(request: Request) -> bytes:
    # BodyLimit has already capped the size; this only collects what it replays.
    return await request.body()


def parse_json(data: bytes) -> Any:
    """Strict JSON: no duplicate keys, no NaN, bounded nesting; errors are 422s."""

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise ValueError(f'duplicate key "{key}"')
            out[key] = value
        return out

    def no_constants(name: str) -> Any:
        raise ValueError(f"{name} is not allowed")

    try:
        value = json.loads(data, object_pairs_hook=no_duplicates, parse_constant=no_constants)
    except json.JSONDecodeError as exc:
        raise Unprocessable(
            f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    except (ValueError, RecursionError) as exc:
        # UnicodeDecodeError is a ValueError too.
        raise Unprocessable(f"invalid JSON: {exc}") from None
    if _depth(value) > _MAX_JSON_DEPTH:
        raise Unprocessable(f"JSON is nested deeper than {_MAX_JSON_DEPTH} levels")
    return value


def _depth(value: Any) -> int:
    depth, level = 0, [value]
    while level:
        depth += 1
        nxt: list[Any] = []
        for item in level:
            if isinstance(item, dict):
                nxt.extend(item.values())
            elif isinstance(item, list):
                nxt.extend(item)
        level = nxt
    return depth - 1


async def legacy_params(request: Request) -> dict[str, Any]:
    """The legacy endpoints' arguments from the query string, overridden by a JSON or form body."""
    values: dict[str, Any] = dict(request.query_params)
    data = await request.body()
    if not data.strip():
        return values
    kind = media_type(request)
    if kind == FORM_TYPE:
        try:
            values.update(parse_qsl(data.decode(), strict_parsing=True))
        except (UnicodeDecodeError, ValueError) as exc:
            raise Unprocessable(f"invalid form body: {exc}") from None
        return values
    if kind and kind not in JSON_TYPES and not kind.endswith("+json"):
        raise ApiError(415, f"send JSON (application/json), not {kind}")
    body = parse_json(data)
    if not isinstance(body, dict):
        raise Unprocessable("the JSON body must be an object")
    values.update(body)
    return values


Service = Annotated[TaskService, Depends(get_service)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
ReconcilerDep = Annotated[Loop | None, Depends(get_reconciler)]
RayDep = Annotated[RayAdapter | None, Depends(get_ray)]
MediaType = Annotated[str, Depends(media_type)]
RawBody = Annotated[bytes, Depends(raw_body)]
LegacyParams = Annotated[dict[str, Any], Depends(legacy_params)]
IfMatch = Annotated[
    str | None,
    Header(alias="If-Match", description="the ETag of the spec you read; 409 if it changed"),
]
IfNoneMatch = Annotated[
    str | None, Header(alias="If-None-Match", description='"*": only create, 409 if it exists')
]
