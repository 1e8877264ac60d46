"""A kept-alive HTTP connection for the two reads the loop repeats every pass.

The loop lists Ray's jobs up to ten times a second while work waits, to see a job end at
once. Through the SDK (`requests`, a new connection and a pydantic model per job) a listing
costs about 3.4 ms of CPU on this machine; one GET on a connection kept open costs about
0.5 ms through http.client, less again read by hand (httpwire.py). Only these idempotent GETs
use it: a GET that fails on a connection the dashboard closed is simply sent again on a new
one.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from reconciler.shell.raycluster.httpwire import Connection


class HTTPStatus(Exception):
    """A non-200 answer from the dashboard, with its status code kept as a number (the
    adapter raises it for the SDK's calls too)."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {shorten(body)}")
        self.status = status
        self.body = body


def shorten(text: str, limit: int = 500) -> str:
    """Ray puts whole tracebacks into error bodies; keep the end, where the cause is."""
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


class KeptAliveGet:
    """GET JSON from one http(s) base address over a single kept-alive connection.

    Thread-safe by a lock: callers are the loop and now and then an HTTP handler, so a
    second connection would buy nothing.
    """

    def __init__(self, address: str, *, timeout_seconds: float, headers: dict[str, str]) -> None:
        self.address = address
        parts = urlsplit(address)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) address: {address}")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        self._timeout = timeout_seconds
        self._headers = {"Accept": "application/json", **headers}
        self._conn: Connection | None = None
        self._lock = threading.Lock()

    def get_json(self, endpoint: str) -> Any:
        """The decoded JSON body of GET endpoint. Raises HTTPStatus for a non-200 answer,
        OSError or http.client.HTTPException when the dashboard cannot be reached, and
        ValueError for a body that is not JSON."""
        return decoded(self.get(endpoint), raising=True)

    def get(self, endpoint: str) -> tuple[int, bytes]:
        """The status and body of GET endpoint (raises as get_json does when unreachable)."""
        with self._lock:
            reused = self._conn is not None
            try:
                return self._get(endpoint)
            except (OSError, http.client.HTTPException):
                self._close_locked()
                if not reused:
                    raise
            # The dashboard may have closed an idle kept-alive connection: one new try.
            try:
                return self._get(endpoint)
            except (OSError, http.client.HTTPException):
                self._close_locked()
                raise

    def close(self) -> None:
        with self._lock:
            self._close_locked()

    def _close_locked(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _get(self, endpoint: str) -> tuple[int, bytes]:
        self._send(endpoint)
        return self._receive()

    def _send(self, endpoint: str) -> None:
        if self._conn is None:
            self._conn = self._connect()
        self._conn.request(self._prefix + endpoint)

    def _receive(self) -> tuple[int, bytes]:
        if self._conn is None:
            raise http.client.NotConnected("no request was sent")
        status, body, closes = self._conn.response()
        if closes:
            self._close_locked()
        return status, body

    def _connect(self) -> Connection:
        context = ssl.create_default_context() if self._https else None
        return Connection(
            self._host, self._port, timeout=self._timeout, context=context, headers=self._headers
        )


def decoded(answer: tuple[int, bytes], *, raising: bool) -> Any:
    """The JSON of a 200 answer; for another status, HTTPStatus raised (or, `raising=False`,
    returned). ValueError for a body that is not JSON."""
    status, body = answer
    if status != 200:
        error = HTTPStatus(status, body.decode(errors="replace"))
        if raising:
            raise error
        return error
    return json.loads(body)


class KeptAliveGets:
    """Several GETs to one address at once, over `width` kept-alive connections and no
    threads: each request of a batch is sent on its own connection before any answer is read,
    so the dashboard works on them together and the batch takes about one round trip, not one
    per request (the loop looks up its few live jobs this way between listings)."""

    def __init__(
        self, address: str, *, timeout_seconds: float, headers: dict[str, str], width: int
    ) -> None:
        self.address = address
        self._gets = [
            KeptAliveGet(address, timeout_seconds=timeout_seconds, headers=headers)
            for _ in range(max(width, 1))
        ]
        self._lock = threading.Lock()

    def get_all(self, endpoints: Sequence[str]) -> list[Any]:
        """For each endpoint, in order, its decoded JSON, or the HTTPStatus of a non-200
        answer (returned, not raised: one missing job is an answer). Raises as
        KeptAliveGet.get_json does when the dashboard cannot be reached or answers no JSON."""
        width = len(self._gets)
        out: list[Any] = []
        with self._lock:
            for start in range(0, len(endpoints), width):
                batch = list(zip(self._gets, endpoints[start : start + width], strict=False))
                try:
                    out.extend(decoded(answer, raising=False) for answer in self._batch(batch))
                except BaseException:
                    for get, _ in batch:  # answers left unread would break the next request
                        get.close()
                    raise
        return out

    def close(self) -> None:
        for get in self._gets:
            get.close()

    @staticmethod
    def _batch(batch: list[tuple[KeptAliveGet, str]]) -> list[tuple[int, bytes]]:
        sent: list[bool] = []
        for get, endpoint in batch:
            with get._lock:
                try:
                    get._send(endpoint)
                    sent.append(True)
                except (OSError, http.client.HTTPException):
                    get._close_locked()
                    sent.append(False)
        answers: list[tuple[int, bytes]] = []
        for (get, endpoint), ok in zip(batch, sent, strict=True):
            if ok:
                with get._lock:
                    try:
                        answers.append(get._receive())
                        continue
                    except (OSError, http.client.HTTPException):
                        get._close_locked()
            # Not sent, or the dashboard closed an idle connection: asked again on its own
            # (a GET is safe to repeat), which raises if the dashboard is unreachable.
            answers.append(get.get(endpoint))
        return answers
