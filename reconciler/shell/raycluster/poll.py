"""GETs of JSON from the Ray dashboard over kept-alive connections, for the reads the loop
repeats every pass.

The loop lists Ray's jobs and looks up its live ones up to ten times a second while work waits,
to see a job end at once. Through the SDK each read would open a new connection (`requests`)
and build a pydantic model per job; here they share a few connections kept open by urllib3 (the
library under `requests`), and the JSON is read as it is. Only these idempotent GETs go this
way, so one that fails after it was sent (the dashboard may have closed an idle connection) is
simply sent once more.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import urllib3
from urllib3.exceptions import HTTPError

# A failure to connect is not retried (the dashboard is down: say so at once); a GET that
# failed after it was sent is, once, on a new connection. Redirects are answers, not followed.
_RETRY = urllib3.Retry(total=1, connect=False, read=1, other=0, status=0, redirect=False)


class HTTPStatus(Exception):
    """A non-200 answer from the dashboard, with its status code kept as a number (the
    adapter raises it for the SDK's calls too)."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {shorten(body)}")
        self.status = status
        self.body = body


class Unreachable(Exception):
    """The dashboard could not be reached, or its answer could not be read (refused, reset,
    timed out, cut short, not HTTP)."""


def shorten(text: str, limit: int = 500) -> str:
    """Ray puts whole tracebacks into error bodies; keep the end, where the cause is."""
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


class KeptAliveGets:
    """GET JSON from one http(s) base address over up to `width` kept-alive connections.

    Thread-safe. `get_all` sends a batch's requests together, one connection and one thread
    each, so the dashboard works on them at once and the batch takes about one round trip, not
    one per request (the loop looks up its few live jobs this way between listings).
    """

    def __init__(
        self, address: str, *, timeout_seconds: float, headers: dict[str, str], width: int = 1
    ) -> None:
        parts = urlsplit(address)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) address: {address}")
        self.address = address
        self._prefix = parts.path.rstrip("/")
        self._width = max(width, 1)
        self._pool = urllib3.connection_from_url(
            address,
            maxsize=self._width,
            timeout=timeout_seconds,
            retries=_RETRY,
            headers={"Accept": "application/json", **headers},
        )
        self._senders: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def get_json(self, endpoint: str) -> Any:
        """The decoded JSON body of GET endpoint. Raises HTTPStatus for a non-200 answer,
        Unreachable when the dashboard cannot be reached, and ValueError for a body that is
        not JSON."""
        answer = _decoded(*self._get(endpoint))
        if isinstance(answer, HTTPStatus):
            raise answer
        return answer

    def get_all(self, endpoints: Sequence[str]) -> list[Any]:
        """For each endpoint, in order, its decoded JSON, or the HTTPStatus of a non-200
        answer (returned, not raised: one missing job is an answer). Raises as get_json does
        when the dashboard cannot be reached or answers no JSON."""
        if len(endpoints) <= 1 or self._width == 1:
            answers = [self._get(endpoint) for endpoint in endpoints]
        else:
            answers = list(self._sender().map(self._get, endpoints))
        return [_decoded(status, body) for status, body in answers]

    def _get(self, endpoint: str) -> tuple[int, bytes]:
        try:
            response = self._pool.request("GET", self._prefix + endpoint, redirect=False)
        except (HTTPError, OSError) as exc:
            raise Unreachable(str(exc)) from exc
        return response.status, response.data

    def close(self) -> None:
        """Close the connections; the object is not used again."""
        with self._lock:
            senders, self._senders = self._senders, None
        if senders is not None:
            senders.shutdown(wait=False)
        self._pool.close()

    def _sender(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._senders is None:
                self._senders = ThreadPoolExecutor(
                    self._width, thread_name_prefix="rayqueue-dashboard-get"
                )
            return self._senders


def _decoded(status: int, body: bytes) -> Any:
    """The JSON of a 200 answer, or the HTTPStatus of another. ValueError for a body that is
    not JSON."""
    if status != 200:
        return HTTPStatus(status, body.decode(errors="replace"))
    return json.loads(body)
