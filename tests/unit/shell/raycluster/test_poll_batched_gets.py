"""The kept-alive GETs the adapter polls Ray with (poll.KeptAliveGets): connections reused and
replaced, typed errors, headers, and several GETs at once as the adapter looks up the loop's
live jobs: every request of a batch is sent before any answer is read."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer
from typing import ClassVar

import pytest

from reconciler.shell.raycluster.poll import HTTPStatus, KeptAliveGets, Unreachable
from tests.support.localhttp import QuietHandler, serving


class _Handler(QuietHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the dashboard's aiohttp server
    seen: ClassVar[list[tuple[str, int, str | None]]] = []
    # Set by a test: every request waits until this many are in the server together.
    together: ClassVar[threading.Barrier | None] = None

    def do_GET(self) -> None:
        _Handler.seen.append((self.path, self.client_address[1], self.headers.get("X-Token")))
        barrier = _Handler.together
        met = True
        if barrier is not None:
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                met = False  # asked one after another: the others never came
        if self.path.endswith("/missing"):
            body, status = b"Job does not exist", 404
        elif self.path.endswith("/garbled"):
            body, status = b"{not json", 200
        else:
            body, status = json.dumps({"path": self.path, "together": met}).encode(), 200
        self.answer(status, body)
        if self.path.endswith("/drop"):
            self.close_connection = True  # as a dashboard closing an idle connection


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    _Handler.seen, _Handler.together = [], None
    with serving(_Handler) as srv:
        yield srv


def _url(srv: ThreadingHTTPServer, path: str = "") -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}{path}"


def _gets(srv: ThreadingHTTPServer, width: int = 1, **headers: str) -> KeptAliveGets:
    return KeptAliveGets(_url(srv), timeout_seconds=10, headers=headers, width=width)


def _ports() -> set[int]:
    return {port for _, port, _ in _Handler.seen}


def test_one_connection_serves_every_get_with_the_prefix_and_headers(
    server: ThreadingHTTPServer,
) -> None:
    get = KeptAliveGets(_url(server, "/ray/"), timeout_seconds=5, headers={"X-Token": "t"})
    assert get.get_json("/api/jobs/")["path"] == "/ray/api/jobs/"
    assert get.get_json("/api/v0/nodes")["path"] == "/ray/api/v0/nodes"
    assert len(_ports()) == 1  # the same client socket both times
    assert all(token == "t" for _, _, token in _Handler.seen)


def test_a_connection_the_server_closed_is_replaced(server: ThreadingHTTPServer) -> None:
    get = _gets(server)
    get.get_json("/drop")
    time.sleep(0.05)  # the close reaches the client
    assert get.get_json("/b")["path"] == "/b"
    assert len(_ports()) == 2


def test_a_get_the_server_closes_on_unanswered_is_sent_once_more() -> None:
    # The race a check of the idle connection cannot see: the server closes it just as the
    # next request goes out. The GET is sent again, on a new connection.
    answer = b'HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{"a":1}'
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[int] = []

    def serve() -> None:
        first, _ = server.accept()
        accepted.append(1)
        with first:
            first.recv(4096)
            first.sendall(answer)
            first.recv(4096)  # the second request: closed on, unanswered
        second, _ = server.accept()
        accepted.append(2)
        with second:
            second.recv(4096)
            second.sendall(answer)
            second.recv(1)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
        get = KeptAliveGets(url, timeout_seconds=5, headers={})
        assert get.get_json("/x") == {"a": 1}
        assert get.get_json("/y") == {"a": 1}
        assert accepted == [1, 2]
        get.close()
    finally:
        server.close()
        thread.join(5)


def test_errors_are_typed(server: ThreadingHTTPServer) -> None:
    get = _gets(server)
    with pytest.raises(HTTPStatus) as info:
        get.get_json("/missing")
    assert info.value.status == 404 and info.value.body == "Job does not exist"
    with pytest.raises(ValueError):
        get.get_json("/garbled")
    port = server.server_address[1]
    server.shutdown()
    server.server_close()
    down = KeptAliveGets(f"http://127.0.0.1:{port}", timeout_seconds=1, headers={})
    with pytest.raises(Unreachable):
        down.get_json("/x")


@contextmanager
def _answering(answer: bytes) -> Iterator[str]:
    """A loopback server that answers each connection's first request with `answer` and
    closes it; yields its URL."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.05)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(4096)
                conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        done.set()
        thread.join(5)
        server.close()


@pytest.mark.parametrize(
    ("answer", "json_or_status"),
    [
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b'3\r\n{"a\r\n4\r\n":1}\r\n0\r\n\r\n',
            {"a": 1},
        ),
        (
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnope",
            404,
        ),
        (b'HTTP/1.0 200 OK\r\n\r\n{"a":1}', {"a": 1}),  # no framing: the body runs to the close
        (b"HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n", 302),
    ],
)
def test_each_framing_is_read_and_a_redirect_is_an_answer(
    answer: bytes, json_or_status: object
) -> None:
    with _answering(answer) as url:
        got = KeptAliveGets(url, timeout_seconds=5, headers={}).get_all(["/x"])[0]
    if isinstance(json_or_status, int):
        assert isinstance(got, HTTPStatus) and got.status == json_or_status
    else:
        assert got == json_or_status


@pytest.mark.parametrize(
    "answer",
    [b"SSH-2.0-OpenSSH\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort"],
)
def test_an_answer_that_is_not_http_or_cut_short_is_unreachable(answer: bytes) -> None:
    with _answering(answer) as url, pytest.raises(Unreachable):
        KeptAliveGets(url, timeout_seconds=5, headers={}).get_json("/x")


def test_an_https_address_speaks_tls() -> None:
    # A plain HTTP server answers the TLS handshake with HTTP: the handshake fails.
    answer = b'HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{"a":1}'
    with _answering(answer) as url, pytest.raises(Unreachable):
        KeptAliveGets(url.replace("http:", "https:"), timeout_seconds=5, headers={}).get_json("/x")


def test_a_silent_server_times_out() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    try:
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
        with pytest.raises(Unreachable, match="timed out"):
            KeptAliveGets(url, timeout_seconds=0.2, headers={}).get_json("/x")
    finally:
        server.close()


def test_only_http_addresses() -> None:
    with pytest.raises(ValueError, match="not an http"):
        KeptAliveGets("ray://127.0.0.1:10001", timeout_seconds=1, headers={})


def test_a_batch_is_all_sent_before_any_answer_is_read(server: ThreadingHTTPServer) -> None:
    # Each request is answered only once all four are in the server: asked one at a time, the
    # first would wait for the others in vain (the barrier breaks) and say so.
    _Handler.together = threading.Barrier(4, timeout=5)
    answers = _gets(server, width=4).get_all([f"/api/jobs/j{i}" for i in range(4)])
    assert answers == [{"path": f"/api/jobs/j{i}", "together": True} for i in range(4)]
    assert len(_ports()) == 4  # a connection each


def test_answers_keep_their_order_across_batches_and_a_404_is_an_answer(
    server: ThreadingHTTPServer,
) -> None:
    gets = _gets(server, width=2)
    paths = ["/a", "/missing", "/c", "/d", "/e"]
    answers = gets.get_all(paths)
    assert [a["path"] for a in answers if isinstance(a, dict)] == ["/a", "/c", "/d", "/e"]
    missing = answers[1]
    assert isinstance(missing, HTTPStatus) and missing.status == 404
    assert [a["path"] for a in gets.get_all(["/f", "/g"])] == ["/f", "/g"]
    assert len(_ports()) <= 2  # at most the two connections, kept alive


def test_an_unreachable_dashboard_raises(server: ThreadingHTTPServer) -> None:
    gets = _gets(server, width=3)
    gets.get_all(["/a"])
    port = server.server_address[1]
    server.shutdown()
    server.server_close()
    down = KeptAliveGets(f"http://127.0.0.1:{port}", timeout_seconds=1, headers={}, width=3)
    with pytest.raises(Unreachable):
        down.get_all(["/x", "/y"])
    with pytest.raises(Unreachable):
        gets.get_all(["/x", "/y", "/z"])  # the kept connection is gone, and so is the server
    gets.close()
    down.close()
