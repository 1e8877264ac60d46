"""The kept-alive GET the adapter polls Ray with: reuse, reconnect, errors, headers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import ClassVar

import pytest

from reconciler.shell.raycluster.poll import HTTPStatus, KeptAliveGet
from tests.support.localhttp import QuietHandler, serving


class _Handler(QuietHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the dashboard's aiohttp server
    seen: ClassVar[list[tuple[str, int, str | None]]] = []

    def do_GET(self) -> None:
        _Handler.seen.append((self.path, self.client_address[1], self.headers.get("X-Token")))
        if self.path.endswith("/missing"):
            body, status = b"no such thing", 404
        elif self.path.endswith("/garbled"):
            body, status = b"{not json", 200
        else:
            body, status = json.dumps({"path": self.path}).encode(), 200
        self.answer(status, body)


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    _Handler.seen = []
    with serving(_Handler) as srv:
        yield srv


def _url(srv: ThreadingHTTPServer, path: str = "") -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}{path}"


def test_one_connection_serves_every_get_with_the_prefix_and_headers(
    server: ThreadingHTTPServer,
) -> None:
    get = KeptAliveGet(_url(server, "/ray/"), timeout_seconds=5, headers={"X-Token": "t"})
    assert get.get_json("/api/jobs/") == {"path": "/ray/api/jobs/"}
    assert get.get_json("/api/v0/nodes") == {"path": "/ray/api/v0/nodes"}
    ports = {port for _, port, _ in _Handler.seen}
    assert len(ports) == 1  # the same client socket both times
    assert all(token == "t" for _, _, token in _Handler.seen)


def test_a_connection_the_server_dropped_is_replaced_once(server: ThreadingHTTPServer) -> None:
    get = KeptAliveGet(_url(server), timeout_seconds=5, headers={})
    get.get_json("/a")
    assert get._conn is not None and get._conn.sock is not None
    get._conn.sock.close()  # as if the dashboard had closed the idle connection
    assert get.get_json("/b") == {"path": "/b"}
    assert len({port for _, port, _ in _Handler.seen}) == 2


def test_errors_are_typed(server: ThreadingHTTPServer) -> None:
    get = KeptAliveGet(_url(server), timeout_seconds=5, headers={})
    with pytest.raises(HTTPStatus) as info:
        get.get_json("/missing")
    assert info.value.status == 404 and info.value.body == "no such thing"
    with pytest.raises(ValueError):
        get.get_json("/garbled")
    port = server.server_address[1]
    server.shutdown()
    server.server_close()
    with pytest.raises(OSError):
        KeptAliveGet(f"http://127.0.0.1:{port}", timeout_seconds=1, headers={}).get_json("/x")


def test_only_http_addresses() -> None:
    with pytest.raises(ValueError, match="not an http"):
        KeptAliveGet("ray://127.0.0.1:10001", timeout_seconds=1, headers={})
