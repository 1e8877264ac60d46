"""Serve the HTTP API with uvicorn, in the calling thread, until uvicorn is told to stop.

Slow clients are bounded: uvicorn times out idle keep-alive connections but not a request
that arrives a byte at a time, so the h11 protocol here closes a connection whose request line
and headers take longer than HEADER_TIMEOUT_SECONDS, or whose body takes longer than
BODY_TIMEOUT_SECONDS; and at most MAX_CONNECTIONS connections are served at once (the next
request gets a 503 until one closes). One client, by its peer address, holds at most half of
them (MAX_CONNECTIONS_PER_CLIENT): past that its new connections get a 503 and are closed at
once, so one client holding idle connections cannot keep every other one at 503. Clients
behind one proxy share its address, and so its half.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import Counter
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from api.app import create_app
from api.ports import Loop, Observability
from specs.cluster import RayAdapter
from specs.folder.store import TaskStore
from specs.settings.process import Settings
from specs.tenancy.access import Tokens

HEADER_TIMEOUT_SECONDS = 10.0
BODY_TIMEOUT_SECONDS = 30.0
MAX_CONNECTIONS = 64
MAX_CONNECTIONS_PER_CLIENT = MAX_CONNECTIONS // 2
KEEP_ALIVE_SECONDS = 5  # uvicorn's default, stated here so all the bounds are in one place
# How often the server wakes to check whether to exit (uvicorn's own 0.1 s tick costs CPU in an
# idle serve): a stop takes at most this long to be seen.
TICK_SECONDS = 0.5
_READ = frozenset({h11.IDLE, h11.SEND_BODY})  # their states while we still wait for bytes
# The open connections of each peer address, per server (each test may run its own).
_HELD: weakref.WeakKeyDictionary[ServerState, Counter[str]] = weakref.WeakKeyDictionary()
_TOO_MANY_BODY = b"this client holds too many connections to the API; close one and retry\n"
_TOO_MANY = (
    b"HTTP/1.1 503 Service Unavailable\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"content-length: " + str(len(_TOO_MANY_BODY)).encode() + b"\r\n"
    b"connection: close\r\n\r\n" + _TOO_MANY_BODY
)


def peer_host(transport: asyncio.BaseTransport) -> str:
    """The address a connection comes from, without its port (a Unix socket's path)."""
    peer = transport.get_extra_info("peername")
    return str(peer[0]) if isinstance(peer, tuple) and peer else str(peer)


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on reading each request: `header_timeout` from
    the first byte (or the connection) to the end of the headers, then `body_timeout` for the
    body. A client past its deadline is disconnected; the app sees `http.disconnect`. A client
    already holding `per_client_limit` connections gets a 503 on its next one, closed at once
    (never counted among the server's connections, so it takes no one else's place)."""

    header_timeout = HEADER_TIMEOUT_SECONDS
    body_timeout = BODY_TIMEOUT_SECONDS
    per_client_limit = MAX_CONNECTIONS_PER_CLIENT

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._reading_body = False
        self._host: str | None = None  # the peer, once its connection is served

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        host = peer_host(transport)
        held = _HELD.setdefault(self.server_state, Counter())
        if held[host] >= self.per_client_limit:
            self._refuse(transport, host, held[host])
            return
        held[host] += 1
        self._host = host
        super().connection_made(transport)
        self._arm(self.header_timeout, body=False)

    def _refuse(self, transport: asyncio.Transport, host: str, holds: int) -> None:
        """Answer 503 at once and end our side; what the client still sends is read and
        dropped until it closes (closing with its request unread would reset the connection,
        and the client might lose the answer), for at most `header_timeout`."""
        self.logger.debug("refusing a connection from %s: it holds %d", host, holds)
        transport.write(_TOO_MANY)
        if transport.can_write_eof():
            transport.write_eof()
        else:
            transport.close()
        self._deadline = self.loop.call_later(self.header_timeout, transport.close)

    def data_received(self, data: bytes) -> None:
        if self._host is None:
            return  # refused: answered already, the rest is dropped
        if self._deadline is None and self.conn.their_state is h11.IDLE:
            self._arm(self.header_timeout, body=False)  # the next request on a kept-alive one
        super().data_received(data)
        state = self.conn.their_state
        if state is h11.SEND_BODY and not self._reading_body:
            self._arm(self.body_timeout, body=True)
        elif state not in _READ:
            self._disarm()  # the whole request is in; the app's own time is not bounded here

    def connection_lost(self, exc: Exception | None) -> None:
        if self._host is None:  # refused: never served, never counted
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            return
        held = _HELD.get(self.server_state)
        if held is not None:
            held[self._host] -= 1
            if held[self._host] <= 0:
                del held[self._host]
        self._host = None
        self._disarm()
        super().connection_lost(exc)

    def _arm(self, seconds: float, *, body: bool) -> None:
        self._disarm()
        self._reading_body = body
        self._deadline = self.loop.call_later(seconds, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._reading_body = False

    def _too_slow(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            what = "body" if self._reading_body else "request headers"
            self.logger.warning("closing a connection from %s: %s too slow", self.client, what)
            self.transport.close()


def bounded_protocol(header_timeout: float, body_timeout: float) -> type[BoundedH11Protocol]:
    """BoundedH11Protocol with other deadlines (tests use short ones)."""
    attributes = {"header_timeout": header_timeout, "body_timeout": body_timeout}
    return type("BoundedH11Protocol", (BoundedH11Protocol,), attributes)


def uvicorn_config(
    app: Any,
    settings: Settings,
    *,
    protocol: type[BoundedH11Protocol] = BoundedH11Protocol,
    max_connections: int = MAX_CONNECTIONS,
) -> uvicorn.Config:
    # log_config=None: uvicorn leaves logging alone, so its records go through the handler
    # the daemon set up (one format for every line); access logs only when asked for.
    per_client = max(1, max_connections // 2)
    if protocol.per_client_limit != per_client:
        protocol = type(protocol.__name__, (protocol,), {"per_client_limit": per_client})
    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        http=protocol,
        log_level="info",
        log_config=None,
        access_log=settings.access_log,
        limit_concurrency=max_connections,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
    )


class Server(uvicorn.Server):
    """uvicorn's server, waking every TICK_SECONDS rather than ten times a second."""

    async def main_loop(self) -> None:
        # Counter 0: on_tick refreshes the Date header at every tick (uvicorn: every 10th).
        while not await self.on_tick(0):
            await asyncio.sleep(TICK_SECONDS)


def serve_api(
    settings: Settings,
    loop: Loop,
    ray: RayAdapter,
    tokens: Tokens,
    observability: Observability | None = None,
    store: TaskStore | None = None,
) -> None:
    """`store`: the loop's (see create_app), so the API serves what the loop holds."""
    app = create_app(
        settings,
        reconciler=loop,
        ray=ray,
        observability=observability,
        tokens=tokens,
        store=store,
    )
    Server(uvicorn_config(app, settings)).run()
