"""/docs (Swagger UI) and /redoc, from files shipped in the package (api/static/vendor/, see
its README for versions and hashes): no CDN, no floating version, no inline script."""

from __future__ import annotations

import mimetypes
from pathlib import Path

from fastapi import APIRouter
from fastapi.openapi.docs import get_redoc_html
from fastapi.responses import HTMLResponse, Response

from api.errors import NotFound

STATIC = Path(__file__).parents[1] / "static"
SWAGGER = "vendor/swagger-ui-dist-5.35.0"
REDOC = "vendor/redoc-2.5.4"
ASSETS = "assets"  # the URL prefix; relative links keep working behind a path-prefix proxy
# The only files served under /assets/: the vendored bundles, their licences, the init script.
SERVED = frozenset(
    {
        *(p.relative_to(STATIC).as_posix() for p in (STATIC / "vendor").rglob("*") if p.is_file()),
        "swagger-init.js",
    }
) - {"vendor/README.md"}
_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}

router = APIRouter(include_in_schema=False)


@router.get("/docs")
def swagger_ui() -> HTMLResponse:
    html = f"""<!DOCTYPE html>
<html>
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="{ASSETS}/{SWAGGER}/swagger-ui.css">
<link rel="icon" href="{ASSETS}/{SWAGGER}/favicon-32x32.png">
<title>rayqueue - Swagger UI</title>
</head>
<body>
<div id="swagger-ui"></div>
<script src="{ASSETS}/{SWAGGER}/swagger-ui-bundle.js"></script>
<script src="{ASSETS}/swagger-init.js"></script>
</body>
</html>
"""
    return HTMLResponse(html)


@router.get("/redoc")
def redoc() -> HTMLResponse:
    return get_redoc_html(
        openapi_url="openapi.json",
        title="rayqueue - ReDoc",
        redoc_js_url=f"{ASSETS}/{REDOC}/redoc.standalone.js",
        redoc_favicon_url=f"{ASSETS}/{SWAGGER}/favicon-32x32.png",
        with_google_fonts=False,
    )


@router.get(f"/{ASSETS}/{{path:path}}")
def asset(path: str) -> Response:
    if path not in SERVED:  # a fixed list: nothing outside it, however the path is spelled
        raise NotFound(f"no asset {path}")
    suffix = Path(path).suffix
    media = _TYPES.get(suffix) or mimetypes.guess_type(path)[0] or "text/plain; charset=utf-8"
    # Versioned paths: a browser may keep them for a day.
    headers = {"Cache-Control": "max-age=86400"}
    return Response((STATIC / path).read_bytes(), media_type=media, headers=headers)
