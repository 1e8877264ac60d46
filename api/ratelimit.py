"""Per-token request rates (`requestsPerMinute` in the team tokens file): a token bucket per
token name, in memory, shared by the server's threads. Over the rate: 429 with Retry-After,
before the request is read or routed.

Each token may send a burst of one minute's worth, then one request every 60/rate seconds.
The buckets reset when the server restarts; there is one per token name, so memory is bounded
by the tokens file.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable

from api.middleware import ASGIApp, Receive, Scope, Send, send_json
from api.security import PRINCIPAL_KEY
from specs.tenancy.access import Principal

audit_log = logging.getLogger("rayqueue.audit")


class RateLimits:
    """The buckets. `clock` is monotonic seconds, injected so a test moves it by hand."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}  # name -> (requests left, when)

    def take(self, name: str, per_minute: int) -> float:
        """0 if `name` may make a request now (and count it); else the seconds to wait."""
        now = self.clock()
        with self._lock:
            left, then = self._buckets.get(name, (float(per_minute), now))
            left = min(float(per_minute), left + max(0.0, now - then) * per_minute / 60)
            if left >= 1:
                self._buckets[name] = (left - 1, now)
                return 0.0
            self._buckets[name] = (left, now)
            return (1 - left) * 60 / per_minute


class RateLimit:
    """429 with Retry-After for a caller over its token's requestsPerMinute. Runs after
    TokenAuth (it needs the caller); callers without a rate pass untouched."""

    def __init__(self, app: ASGIApp, *, limits: RateLimits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        principal = scope.get(PRINCIPAL_KEY) if scope["type"] == "http" else None
        rate = principal.policy.requests_per_minute if isinstance(principal, Principal) else None
        if principal is not None and rate is not None:
            wait = self.limits.take(principal.name, rate)
            if wait > 0:
                audit_log.warning(
                    "rate-limited %s %s by %s", scope["method"], scope["path"], principal.name
                )
                seconds = max(1, math.ceil(wait))
                detail = (
                    f"token {principal.name} may make {rate} requests per minute "
                    f"(requestsPerMinute in the team tokens file); retry in {seconds} s"
                )
                await send_json(send, 429, detail, ((b"retry-after", str(seconds).encode()),))
                return
        await self.app(scope, receive, send)
