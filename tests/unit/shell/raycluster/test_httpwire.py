"""The hand-read HTTP/1.1 answers of the adapter's kept-alive GETs (httpwire.Connection): each
framing a server may use reads as http.client reads it, and what it cannot read raises the
exception types http.client raises."""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from reconciler.shell.raycluster.httpwire import MAX_HEAD_BYTES, Connection


@contextmanager
def canned(
    answers: list[bytes], *, piecewise: bool = False, close_after: bool = False
) -> Iterator[tuple[int, list[bytes]]]:
    """A loopback server that answers the requests of one connection with `answers`, in turn
    (each sent a byte at a time if `piecewise`); yields its port and the requests it read."""
    server = socket.create_server(("127.0.0.1", 0))
    seen: list[bytes] = []

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            pending = b""
            for answer in answers:
                while b"\r\n\r\n" not in pending:
                    data = conn.recv(4096)
                    if not data:
                        return
                    pending += data
                request, pending = pending.split(b"\r\n\r\n", 1)
                seen.append(request)
                if piecewise:
                    for i in range(len(answer)):
                        conn.sendall(answer[i : i + 1])
                else:
                    conn.sendall(answer)
            if not close_after:
                conn.recv(1)  # hold the connection open until the client closes it

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], seen
    finally:
        server.close()
        thread.join(5)


def _with_http_client(answer: bytes) -> tuple[int, bytes]:
    """What http.client makes of the same bytes: the reference."""
    with canned([answer], close_after=True) as (port, _):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/x")
        response = conn.getresponse()
        out = response.status, response.read()
        conn.close()
        return out


ANSWERS = {
    "length": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n"
    b'{"a":1}',
    "chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    b'3;ext=1\r\n{"a\r\n4\r\n":1}\r\n0\r\nTrailer: x\r\n\r\n',
    "continue first": b"HTTP/1.1 100 Continue\r\n\r\n"
    b"HTTP/1.1 404 Not Found\r\ncontent-length: 4\r\n\r\nnope",
    "no content": b"HTTP/1.1 204 No Content\r\n\r\n",
    "empty body": b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
}


@pytest.mark.parametrize("name", sorted(ANSWERS))
@pytest.mark.parametrize("piecewise", [False, True])
def test_each_framing_reads_as_http_client_reads_it(name: str, piecewise: bool) -> None:
    answer = ANSWERS[name]
    with canned([answer, answer], piecewise=piecewise) as (port, seen):
        conn = Connection("127.0.0.1", port, timeout=5, context=None, headers={"X-T": "v"})
        conn.request("/api/jobs/a%2Fb?x=1")
        first = conn.response()
        conn.request("/again")
        second = conn.response()
        conn.close()
    reference = _with_http_client(answer)
    assert first == (*reference, False) and second == first
    assert seen[0].startswith(b"GET /api/jobs/a%2Fb?x=1 HTTP/1.1\r\n")
    assert b"\r\nHost: 127.0.0.1:" in seen[0] and b"\r\nX-T: v" in seen[0]


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\n\r\nok",  # no framing: the body runs to the close
    ],
)
def test_a_server_that_closes_is_read_to_the_end_and_the_socket_closed(answer: bytes) -> None:
    with canned([answer], close_after=True) as (port, _):
        conn = Connection("127.0.0.1", port, timeout=5, context=None, headers={})
        conn.request("/x")
        assert conn.response() == (200, b"ok", True)
        assert conn.sock is None
    assert _with_http_client(answer) == (200, b"ok")


def test_a_kept_alive_answer_of_http_1_0_stays_open() -> None:
    answer = b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok"
    with canned([answer]) as (port, _):
        conn = Connection("127.0.0.1", port, timeout=5, context=None, headers={})
        conn.request("/x")
        assert conn.response() == (200, b"ok", False)
        assert conn.sock is not None
        conn.close()


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (b"", http.client.RemoteDisconnected),  # a kept-alive socket the server closed
        (b"HTTP/1.1 200 OK\r\nContent-Le", http.client.IncompleteRead),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort", http.client.IncompleteRead),
        (b"SSH-2.0-OpenSSH\r\n\r\n", http.client.BadStatusLine),
        (b"HTTP/1.1 2x0 OK\r\n\r\n", http.client.BadStatusLine),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", http.client.HTTPException),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", http.client.HTTPException),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", http.client.HTTPException),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", http.client.HTTPException),
        (b"HTTP/1.1 200 OK\r\nX: " + b"y" * MAX_HEAD_BYTES, http.client.LineTooLong),
    ],
)
def test_what_cannot_be_read_raises_http_clients_errors(
    answer: bytes, error: type[Exception]
) -> None:
    with canned([answer], close_after=True) as (port, _):
        conn = Connection("127.0.0.1", port, timeout=5, context=None, headers={})
        conn.request("/x")
        with pytest.raises(error):
            conn.response()
        conn.close()


def test_a_silent_server_times_out() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    try:
        port = server.getsockname()[1]
        conn = Connection("127.0.0.1", port, timeout=0.2, context=None, headers={})
        conn.request("/x")
        with pytest.raises(TimeoutError):
            conn.response()
        conn.close()
    finally:
        server.close()


@pytest.mark.parametrize("target", ["/a b", "/a\r\nX: y", "no-slash", "/\x00"])
def test_a_target_that_could_split_the_request_is_refused(target: str) -> None:
    conn = Connection("127.0.0.1", 1, timeout=1, context=None, headers={})
    with pytest.raises(http.client.InvalidURL):
        conn.request(target)
    assert conn.sock is None  # refused before connecting


def test_a_header_that_could_split_the_request_is_refused() -> None:
    with pytest.raises(ValueError, match="header"):
        Connection("h", 80, timeout=1, context=None, headers={"X": "a\r\nEvil: 1"})
