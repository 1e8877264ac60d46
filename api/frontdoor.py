"""The outermost layer of every answer: browser-hardening headers, and one audit line for each
401 and 403, whichever layer refused (TokenAuth, OriginCheck, a route's authorization).

It wraps Starlette's error middleware too (see RayqueueAPI), so a 500 carries the headers.
"""

from __future__ import annotations

import json
import logging

from fastapi import FastAPI

from api.middleware import ASGIApp, Message, Receive, Scope, Send
from api.security import PRINCIPAL_KEY
from specs.tenancy.access import Principal

audit_log = logging.getLogger("rayqueue.audit")

# Scripts only from this server (no inline script anywhere, Swagger UI's start-up included);
# inline styles stay allowed for the web view's <style> and Swagger UI/ReDoc's own styling;
# ReDoc runs its search in a worker it builds from a blob.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
    "form-action 'self'"
)
SECURITY_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"referrer-policy", b"no-referrer"),
)
_AUDITED = frozenset({401, 403})
_REASON_BYTES = 4096  # enough for any `detail` we write; a longer body is cut, not buffered


def _reason(body: bytes) -> str:
    try:
        detail = json.loads(body).get("detail")
    except (ValueError, AttributeError):
        return ""
    return detail if isinstance(detail, str) else ""


class FrontDoor:
    """Adds SECURITY_HEADERS to every answer and logs each 401/403 once on `rayqueue.audit`:
    method, path, client address, the caller's name when its token was known, status and
    the answer's `detail`. Never a token: the Authorization header is not read here."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 0
        body = b""

        async def wrapped(message: Message) -> None:
            nonlocal status, body
            if message["type"] == "http.response.start":
                status = message["status"]
                present = {bytes(k).lower() for k, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in SECURITY_HEADERS if k not in present]
                message["headers"] = [*message.get("headers", []), *extra]
            elif message["type"] == "http.response.body" and status in _AUDITED:
                body += message.get("body", b"")[: _REASON_BYTES - len(body)]
                if not message.get("more_body", False):
                    self._audit(scope, status, body)
                    status = 0  # once per answer
            await send(message)

        await self.app(scope, receive, wrapped)

    @staticmethod
    def _audit(scope: Scope, status: int, body: bytes) -> None:
        principal = scope.get(PRINCIPAL_KEY)
        who = principal.name if isinstance(principal, Principal) else "(unidentified)"
        client = scope.get("client")
        address = f"{client[0]}:{client[1]}" if client else "-"
        audit_log.warning(
            "refused %s %s by %s from %s: %d %s",
            scope.get("method", "-"),
            scope.get("path", "-"),
            who,
            address,
            status,
            _reason(body) or "-",
        )


class RayqueueAPI(FastAPI):
    """FastAPI with FrontDoor outside everything, Starlette's 500 handler included."""

    def build_middleware_stack(self) -> ASGIApp:
        return FrontDoor(super().build_middleware_stack())
