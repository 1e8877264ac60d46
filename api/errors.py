"""Errors the API raises on purpose, and the handlers that turn every error into JSON.

Bad input must be a 4xx with `{"detail": ...}`, never a 500, whichever layer notices it: the
name check in the store, the spec parser, the filesystem, or the Ray adapter.
"""

from __future__ import annotations

import errno
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from specs.cluster import JobNotFound, RayError, RayUnavailable
from specs.folder.store import FolderUnavailable, InvalidName
from specs.service.tasks import (
    ConfigRejected,
    QueryError,
    SpecBroken,
    SpecForbidden,
    SpecRejected,
    TaskNotFound,
)
from specs.service.tasks import Conflict as EditConflict
from specs.task.errors import SpecError
from specs.yamlio.parse import SpecParseError

log = logging.getLogger("rayqueue.api")


class ApiError(Exception):
    """An answer other than success, with its HTTP status and JSON detail."""

    def __init__(
        self, status_code: int, detail: Any, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(str(detail))
        self.status_code = status_code
        self.detail = detail
        self.headers = headers


class NotFound(ApiError):
    def __init__(self, detail: str) -> None:
        super().__init__(404, detail)


class Conflict(ApiError):
    def __init__(self, detail: str) -> None:
        super().__init__(409, detail)


class BadRequest(ApiError):
    def __init__(self, detail: str) -> None:
        super().__init__(400, detail)


class Unprocessable(ApiError):
    def __init__(self, detail: Any) -> None:
        super().__init__(422, detail)


def spec_errors(errors: list[SpecError], *, with_position: bool = True) -> list[dict[str, Any]]:
    """Parser errors in FastAPI's 422 shape (loc, msg, type), plus field, line and column."""
    out = []
    for error in errors:
        loc: list[str | int] = ["body"]
        if error.field:
            loc += [p for p in error.field.replace("[", ".").replace("]", "").split(".") if p]
        item: dict[str, Any] = {
            "loc": loc,
            "msg": error.message,
            "type": "spec_invalid",
            "field": error.field,
        }
        if with_position:
            item["line"], item["column"] = error.line, error.column
        out.append(item)
    return out


_PATH_CONFLICTS = {errno.EEXIST, errno.ENOTDIR, errno.EISDIR, errno.ENOTEMPTY}


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse({"detail": exc.detail}, exc.status_code, headers=exc.headers)

    @app.exception_handler(InvalidName)
    async def _invalid_name(request: Request, exc: InvalidName) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, 400)

    @app.exception_handler(SpecParseError)
    async def _spec_invalid(request: Request, exc: SpecParseError) -> JSONResponse:
        return JSONResponse({"detail": spec_errors(exc.errors)}, 422)

    # The task service's own errors, in HTTP words.
    @app.exception_handler(TaskNotFound)
    async def _not_found(request: Request, exc: TaskNotFound) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, 404)

    @app.exception_handler(EditConflict)
    async def _conflict(request: Request, exc: EditConflict) -> JSONResponse:
        detail = str(exc)
        if isinstance(exc, SpecBroken):
            detail += "; replace it with PUT or delete it"
        return JSONResponse({"detail": detail}, 409)

    @app.exception_handler(SpecRejected)
    async def _rejected(request: Request, exc: SpecRejected) -> JSONResponse:
        if isinstance(exc, SpecForbidden):
            # One sentence naming the field and the rule, like every other 403.
            refused = "; ".join(f"{e.field}: {e.message}" for e in exc.errors)
            logging.getLogger("rayqueue.audit").warning(
                "refused %s %s: %s", request.method, request.url.path, refused
            )
            return JSONResponse({"detail": refused}, 403)
        detail = spec_errors(exc.errors, with_position=exc.with_position)
        return JSONResponse({"detail": detail}, 422)

    @app.exception_handler(ConfigRejected)
    async def _config(request: Request, exc: ConfigRejected) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, 422)

    @app.exception_handler(QueryError)
    async def _query(request: Request, exc: QueryError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, 400)

    @app.exception_handler(FolderUnavailable)
    async def _folder(request: Request, exc: FolderUnavailable) -> JSONResponse:
        return JSONResponse({"detail": f"tasks folder unavailable: {exc}"}, 503)

    @app.exception_handler(RayError)
    async def _ray(request: Request, exc: RayError) -> JSONResponse:
        if isinstance(exc, JobNotFound):
            return JSONResponse({"detail": str(exc)}, 404)
        status = 503 if isinstance(exc, RayUnavailable) else 502
        return JSONResponse({"detail": f"Ray: {exc}"}, status)

    @app.exception_handler(OSError)
    async def _os_error(request: Request, exc: OSError) -> JSONResponse:
        # A name that collides with an existing file or folder is the caller's to fix.
        if exc.errno in _PATH_CONFLICTS:
            return JSONResponse({"detail": f"path conflict: {exc.strerror}"}, 409)
        log.error("filesystem error on %s %s: %s", request.method, request.url.path, exc)
        return JSONResponse({"detail": f"filesystem error: {exc.strerror or exc}"}, 500)
