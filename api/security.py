"""The API's front door, as plain ASGI middleware that runs before routing (so it also covers
/docs, /openapi.json and unknown paths):

- the Host check (Starlette's TrustedHostMiddleware, configured by `allowed_hosts`): a web page
  that rebinds its own domain to 127.0.0.1 still sends its own name as Host, and is refused;
- the browser-origin check (`OriginCheck`): POST, PUT, PATCH and DELETE from another web
  origin are refused, all four, so a page cannot change or delete tasks from a visitor's
  browser even where Host alone would not stop it;
- bearer tokens (`TokenAuth`): who the caller is, for the routes to authorize.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

from api.middleware import ASGIApp, Receive, Scope, Send, header, send_json
from specs.settings.process import Settings
from specs.tenancy.access import Principal, Tokens

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
PRINCIPAL_KEY = "rayqueue.principal"  # where TokenAuth leaves the caller in the ASGI scope
_CROSS_SITE = frozenset({b"cross-site", b"same-site"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


def allowed_hosts(settings: Settings) -> list[str]:
    """Loopback, the --host address when it names one machine, and --allowed-hosts."""
    hosts = list(LOOPBACK_HOSTS)
    bind = settings.host.strip("[]")
    try:
        address = ipaddress.ip_address(bind)
    except ValueError:
        hosts.append(settings.host)  # a name: clients may well use it
    else:
        # 0.0.0.0 and :: mean "every interface"; no client addresses the server by them.
        if not address.is_unspecified:
            hosts.append(f"[{bind}]" if address.version == 6 else bind)
    hosts.extend(settings.allowed_hosts)
    return list(dict.fromkeys(h.lower() for h in hosts))


def has_wildcard(settings: Settings) -> bool:
    """Whether --allowed-hosts lets in names the operator did not list one by one."""
    return any(h.startswith("*") for h in settings.allowed_hosts)


def own_host_names(settings: Settings) -> frozenset[str] | None:
    """The names whose Host header may stand for the API's own origin, or None: any Host that
    passed the Host check.

    With a wildcard in --allowed-hosts the Host check no longer proves that the Host names
    this server (a rebinding page sends its own name and `*` lets it in), so only the names
    configured one by one count: loopback, --host when it names one machine, and the explicit
    --allowed-hosts."""
    if not has_wildcard(settings):
        return None
    return frozenset(h for h in allowed_hosts(settings) if not h.startswith("*"))


def host_name(host: str) -> str:
    """The name part of a Host header (or an --allowed-hosts entry), lower case, IPv6 in []."""
    name = host.strip().lower()
    if name.startswith("["):
        return name.partition("]")[0] + "]"
    return name.partition(":")[0]


def normalize_origin(origin: str) -> str | None:
    """scheme://host[:port] in lower case, the default port left out; None if not an origin."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname or parts.path not in ("", "/"):
        return None
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    if port is None or port == _DEFAULT_PORTS[parts.scheme]:
        return f"{parts.scheme}://{host}"
    return f"{parts.scheme}://{host}:{port}"


def origin_problem(
    method: str,
    origin: bytes | None,
    fetch_site: bytes | None,
    own_origin: str | None,
    allowed: frozenset[str],
) -> str | None:
    """Why a request must be refused as cross-origin, or None.

    Only state-changing methods are checked. A request without Origin and without a
    cross-site Sec-Fetch-Site is not from a web page (curl, scripts, the CLI) and passes; one
    from the API's own origin (the web view) or an allowed one passes too.
    """
    if method not in STATE_CHANGING:
        return None
    if origin is None:
        if fetch_site is not None and fetch_site.lower() in _CROSS_SITE:
            return (
                "cross-site request refused: a web page on another site may not change tasks. "
                "If that page is yours, start rayqueue serve with --allowed-origins ORIGIN."
            )
        return None
    text = origin.decode("latin-1")
    normal = normalize_origin(text)
    if normal is not None and normal in allowed:
        return None
    same_site = fetch_site is None or fetch_site.lower() not in _CROSS_SITE
    if normal is not None and normal == own_origin and same_site:
        return None
    return (
        f"cross-origin request refused: origin {text!r} may not change tasks through this "
        f"API. If that web page is yours, start rayqueue serve with --allowed-origins "
        f"{normal or text}"
    )


class OriginCheck:
    """403 for a POST, PUT, PATCH or DELETE from another web origin (see origin_problem)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        allowed_origins: Iterable[str],
        own_hosts: frozenset[str] | None = None,
    ) -> None:
        self.app = app
        self.allowed = frozenset(
            n for n in (normalize_origin(o) for o in allowed_origins) if n is not None
        )
        # None: the Host check vouches for every Host it lets through (see own_host_names).
        self.own_hosts = None if own_hosts is None else frozenset(map(host_name, own_hosts))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw = header(scope, b"host")
        host = raw.decode("latin-1") if raw else ""
        # The Host check ran first; without a wildcard, the Host header names this server.
        if self.own_hosts is not None and host_name(host) not in self.own_hosts:
            host = ""  # a name only a wildcard let in: never this API's own origin
        scheme = scope.get("scheme", "http")
        own = normalize_origin(f"{scheme}://{host}") if host else None
        problem = origin_problem(
            scope["method"],
            header(scope, b"origin"),
            header(scope, b"sec-fetch-site"),
            own,
            self.allowed,
        )
        if problem is not None:
            await send_json(send, 403, problem)
            return
        await self.app(scope, receive, send)


class TokenAuth:
    """Every path but the exempt ones needs `Authorization: Bearer <token>` of a known token;
    the caller's Principal goes into the scope under PRINCIPAL_KEY.

    Failures all look alike (401, no hint of what was wrong); tokens are compared as hashes
    in constant time (specs.tenancy.access.Tokens) and never logged.
    """

    def __init__(self, app: ASGIApp, *, tokens: Tokens, exempt: frozenset[str]) -> None:
        self.app = app
        self.tokens = tokens
        self.exempt = exempt

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scheme, _, given = (header(scope, b"authorization") or b"").partition(b" ")
        principal: Principal | None = self.tokens.identify(given.strip())  # always hashed
        if principal is not None and scheme.lower() == b"bearer":
            scope[PRINCIPAL_KEY] = principal
        elif scope.get("path") not in self.exempt:
            await send_json(send, 401, "Unauthorized", ((b"www-authenticate", b"Bearer"),))
            return
        # The exempt probes answer anyone; they show details only to a known caller.
        await self.app(scope, receive, send)
