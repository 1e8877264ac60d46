"""Slow clients against a real uvicorn server on loopback: a request whose headers
or body trickle in is disconnected at its deadline, and connections past the limit get a 503.
The deadlines are short ones passed in for the test; the assertions are on what the server
did (closed the socket, answered 503), never on how long it took."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import uvicorn

from api.app import create_app
from api.server import BoundedH11Protocol, bounded_protocol, uvicorn_config
from specs.settings.process import Settings
from tests.support.net import free_port

SAFETY = 60.0  # a socket timeout so a broken server fails the test instead of hanging it


Serve = Callable[..., int]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    """serve(protocol, max_connections) -> port of a running server; stopped at the end."""
    servers: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(protocol: type[BoundedH11Protocol], max_connections: int = 64) -> int:
        port = free_port()
        settings = Settings(tasks_dir=tmp_path, port=port)
        config = uvicorn_config(
            create_app(settings), settings, protocol=protocol, max_connections=max_connections
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        waiting = threading.Event()
        while not server.started:
            assert thread.is_alive(), "the server did not start"
            waiting.wait(0.05)
        servers.append((server, thread))
        return port

    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(timeout=SAFETY)


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=SAFETY)
    return sock


def read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def read_response(sock: socket.socket) -> bytes:
    """One whole HTTP/1.1 answer with a Content-Length body: TCP may hand it over in pieces."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed before the headers ended: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "closed before the body ended"
        body += chunk
    assert len(body) == length, "more than one answer arrived"
    return head + b"\r\n\r\n" + body


def test_half_a_request_line_is_disconnected(serve: Serve) -> None:
    """Fails on main: uvicorn waits for the rest of the headers as long as the client likes."""
    port = serve(bounded_protocol(header_timeout=0.3, body_timeout=60))
    with connect(port) as sock:
        sock.sendall(b"GET /healthz HT")
        assert read_all(sock) == b""  # closed, nothing answered


def test_a_connection_that_sends_nothing_is_disconnected(serve: Serve) -> None:
    port = serve(bounded_protocol(header_timeout=0.3, body_timeout=60))
    with connect(port) as sock:
        assert read_all(sock) == b""


def test_a_trickling_body_is_disconnected(serve: Serve, tmp_path: Path) -> None:
    """Fails on main: a chunked or declared body may take a minute, holding the connection."""
    port = serve(bounded_protocol(header_timeout=60, body_timeout=0.3))
    head = (
        b"PUT /tasks/slow HTTP/1.1\r\nHost: localhost\r\ncontent-type: application/json\r\n"
        b"transfer-encoding: chunked\r\n\r\n"
    )
    with connect(port) as sock:
        sock.sendall(head + b'5\r\n{"api')  # part of a chunk, then silence
        assert read_all(sock) == b""
    assert not (tmp_path / "slow.yaml").exists()


def test_a_prompt_client_is_served_and_kept_alive(serve: Serve) -> None:
    port = serve(bounded_protocol(header_timeout=5, body_timeout=5))
    request = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"
    with connect(port) as sock:
        for _ in range(2):  # the same connection, two requests
            sock.sendall(request)
            answer = read_response(sock)
            assert answer.startswith(b"HTTP/1.1 200 "), answer
            assert b"x-content-type-options: nosniff" in answer.lower()


def test_connections_past_the_limit_get_503(serve: Serve) -> None:
    port = serve(bounded_protocol(header_timeout=60, body_timeout=60), max_connections=2)
    idle = [connect(port), connect(port)]
    try:
        with connect(port) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            assert read_all(sock).startswith(b"HTTP/1.1 503 ")
    finally:
        for sock in idle:
            sock.close()


def test_a_client_past_its_share_gets_503_until_it_closes_one(serve: Serve) -> None:
    """Half the connections per client: the third of a limit of four is answered 503 at once,
    without a request; when the client closes one, it is served again."""
    port = serve(bounded_protocol(header_timeout=60, body_timeout=60), max_connections=4)
    held = [connect(port), connect(port)]
    try:
        with connect(port) as third:
            answer = read_all(third)
        assert answer.startswith(b"HTTP/1.1 503 ") and b"too many connections" in answer
        held.pop().close()
        request = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        deadline = time.monotonic() + SAFETY
        while True:  # the server sees the close a moment later
            with connect(port) as sock:
                sock.sendall(request)
                answer = read_all(sock)
            if answer.startswith(b"HTTP/1.1 200 ") or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert answer.startswith(b"HTTP/1.1 200 "), answer[:80]
    finally:
        for sock in held:
            sock.close()


def test_the_served_defaults() -> None:
    settings = Settings(tasks_dir=Path("/nonexistent"))
    config = uvicorn_config(object(), settings)
    assert config.http is BoundedH11Protocol and config.limit_concurrency == 64
    assert BoundedH11Protocol.per_client_limit == 32
    assert (BoundedH11Protocol.header_timeout, BoundedH11Protocol.body_timeout) == (10.0, 30.0)
