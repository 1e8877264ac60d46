"""GETs of JSON from the Ray dashboard over kept-alive connections, for the reads the loop
repeats every pass.

The loop lists Ray's jobs and looks up its live ones up to ten times a second while work waits,
to see a job end at once. Through the SDK each read would open a new connection (`requests`)
and build a pydantic model per job; here they share a few connections kept open, and the JSON
is read as it is. h11 (the HTTP/1.1 state machine under httpcore and uvicorn) reads and writes
the HTTP: status line, headers, Content-Length or chunked framing, whether the connection may
be kept; this module does only the socket I/O, keeps the connections and names the failures.
A batch of look-ups goes out on several sockets at once, each written before any is read, so
it needs no thread per connection. Only these idempotent GETs go this way, so one that fails
after it was sent on a kept connection (the dashboard may have closed it while idle) is simply
sent once more, on a new one.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import h11

# What a request on a connection may fail with once it is open: the socket's errors (reset,
# closed, timed out, TLS) and an answer h11 cannot read as HTTP (cut short, not HTTP at all).
_FAILURES = (OSError, h11.RemoteProtocolError)
_READ_SIZE = 65536


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


@dataclass(frozen=True)
class _Answer:
    status: int
    body: bytes


class _Link:
    """One connection to the dashboard: its socket and h11's view of the exchange on it.
    `reused` once it has carried an answer: a request that then fails may have met a close
    the dashboard made while the connection was idle, and is worth sending again."""

    __slots__ = ("http", "reused", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.http = h11.Connection(h11.CLIENT)
        self.reused = False

    def send(self, request: h11.Request) -> None:
        head = self.http.send(request) or b""
        self.sock.sendall(head + (self.http.send(h11.EndOfMessage()) or b""))

    def receive(self) -> _Answer:
        """The answer to the request sent; raises one of _FAILURES when it cannot be read."""
        status = 0
        body: list[bytes] = []
        while True:
            event = self.http.next_event()
            if event is h11.NEED_DATA:
                self.http.receive_data(self.sock.recv(_READ_SIZE))
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                body.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return _Answer(status, b"".join(body))
            elif isinstance(event, h11.ConnectionClosed):
                raise ConnectionError("the dashboard closed the connection unanswered")
            # else an interim answer (100 Continue): the real one follows

    def reusable(self) -> bool:
        """Ready for the next request, if both sides may keep the connection; h11 says no
        after `Connection: close` or an answer that ran to the close."""
        if self.http.our_state is h11.DONE and self.http.their_state is h11.DONE:
            self.http.start_next_cycle()
            return True
        return False

    def close(self) -> None:
        self.sock.close()


class KeptAliveGets:
    """GET JSON from one http(s) base address over up to `width` kept-alive connections.

    Thread-safe. `get_all` sends a batch's requests together, each on its own connection and
    all before any answer is read, so the dashboard works on them at once and the batch takes
    about one round trip, not one per request (the loop looks up its few live jobs this way
    between listings).
    """

    def __init__(
        self,
        address: str,
        *,
        timeout_seconds: float,
        headers: dict[str, str],
        width: int = 1,
        decode: Callable[[bytes], Any] = json.loads,
    ) -> None:
        """`decode` reads a 200 answer's body (a reader that keeps only part of each answer
        decodes it with an `object_hook` of its own)."""
        parts = urlsplit(address)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) address: {address}")
        self.address = address
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._tls = ssl.create_default_context() if parts.scheme == "https" else None
        self._prefix = parts.path.rstrip("/")
        host = parts.netloc.rpartition("@")[2]  # host and port, as the address has them
        self._headers = [*{"Host": host, "Accept": "application/json", **headers}.items()]
        self._timeout = timeout_seconds
        self._width = max(width, 1)
        self._decode = decode
        self._idle: list[_Link] = []
        self._closed = False
        self._lock = threading.Lock()
        # What the reads have cost the dashboard so far: requests sent, answer bytes read.
        self.requests = 0
        self.bytes_read = 0

    def get_json(self, endpoint: str) -> Any:
        """The decoded JSON body of GET endpoint. Raises HTTPStatus for a non-200 answer,
        Unreachable when the dashboard cannot be reached, and ValueError for a body that is
        not JSON."""
        answer = _decoded(self._exchange([endpoint])[0], self._decode)
        if isinstance(answer, HTTPStatus):
            raise answer
        return answer

    def get_all(self, endpoints: Sequence[str]) -> list[Any]:
        """For each endpoint, in order, its decoded JSON, or the HTTPStatus of a non-200
        answer (returned, not raised: one missing job is an answer). Raises as get_json does
        when the dashboard cannot be reached or answers no JSON."""
        answers: list[_Answer] = []
        for start in range(0, len(endpoints), self._width):
            answers += self._exchange(endpoints[start : start + self._width])
        return [_decoded(answer, self._decode) for answer in answers]

    def close(self) -> None:
        """Close the connections; the object is not used again."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._closed = True
        for link in idle:
            link.close()

    def _exchange(self, endpoints: Sequence[str]) -> list[_Answer]:
        """The answers to GETs of endpoints, one connection each: every request is sent before
        any answer is read. Raises Unreachable when the dashboard cannot be reached."""
        links: list[_Link] = []
        answers: list[_Answer] = []
        try:
            for _ in endpoints:
                links.append(self._take())
            failures = [
                self._sent(link, endpoint) for link, endpoint in zip(links, endpoints, strict=True)
            ]
            for link, endpoint, failure in zip(links, endpoints, failures, strict=True):
                if failure is None:
                    try:
                        answers.append(link.receive())
                        self._give_back(link)
                        continue
                    except _FAILURES as exc:
                        failure = exc
                link.close()
                if not link.reused:
                    raise Unreachable(str(failure)) from failure
                answers.append(self._resend(endpoint))
        except BaseException:
            for link in links[len(answers) :]:  # their answers, if any, will not be read
                link.close()
            raise
        self._count(answers)
        return answers

    def _count(self, answers: Sequence[_Answer]) -> None:
        with self._lock:
            self.requests += len(answers)
            self.bytes_read += sum(len(answer.body) for answer in answers)

    def _sent(self, link: _Link, endpoint: str) -> BaseException | None:
        """None once the request is written, else why it could not be."""
        try:
            link.send(self._request(endpoint))
        except _FAILURES as exc:
            return exc
        return None

    def _resend(self, endpoint: str) -> _Answer:
        """The answer to a GET sent once more, on a new connection, after it failed on a kept
        one; Unreachable if it fails again."""
        link = self._connect()
        try:
            link.send(self._request(endpoint))
            answer = link.receive()
        except _FAILURES as exc:
            link.close()
            raise Unreachable(str(exc)) from exc
        self._give_back(link)
        return answer

    def _request(self, endpoint: str) -> h11.Request:
        return h11.Request(method="GET", target=self._prefix + endpoint, headers=self._headers)

    def _take(self) -> _Link:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return self._connect()

    def _give_back(self, link: _Link) -> None:
        if link.reusable():
            link.reused = True
            with self._lock:
                if not self._closed and len(self._idle) < self._width:
                    self._idle.append(link)
                    return
        link.close()

    def _connect(self) -> _Link:
        """A new connection; a failure to connect is not retried (the dashboard is down: say
        so at once)."""
        try:
            sock = socket.create_connection((self._host, self._port), timeout=self._timeout)
        except OSError as exc:
            raise Unreachable(str(exc)) from exc
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._tls is not None:
                sock = self._tls.wrap_socket(sock, server_hostname=self._host)
        except OSError as exc:
            sock.close()
            raise Unreachable(str(exc)) from exc
        return _Link(sock)


def _decoded(answer: _Answer, decode: Callable[[bytes], Any]) -> Any:
    """The JSON of a 200 answer, or the HTTPStatus of another. ValueError for a body that is
    not JSON."""
    if answer.status != 200:
        return HTTPStatus(answer.status, answer.body.decode(errors="replace"))
    return decode(answer.body)
