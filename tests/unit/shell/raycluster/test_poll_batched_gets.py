"""Several GETs at once over a few kept-alive connections (poll.KeptAliveGets), as the adapter
looks up the loop's live jobs: every request of a batch is sent before any answer is read."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import ClassVar

import pytest

from reconciler.shell.raycluster.poll import HTTPStatus, KeptAliveGets
from tests.support.localhttp import QuietHandler, serving


class _Handler(QuietHandler):
    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[tuple[str, int]]] = []
    # Set by a test: every request waits until this many are in the server together.
    together: ClassVar[threading.Barrier | None] = None

    def do_GET(self) -> None:
        _Handler.seen.append((self.path, self.client_address[1]))
        barrier = _Handler.together
        met = True
        if barrier is not None:
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                met = False  # asked one after another: the others never came
        if self.path.endswith("/missing"):
            body, status = b"Job does not exist", 404
        else:
            body, status = json.dumps({"path": self.path, "together": met}).encode(), 200
        self.answer(status, body)


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    _Handler.seen, _Handler.together = [], None
    with serving(_Handler) as srv:
        yield srv


def _gets(srv: ThreadingHTTPServer, width: int) -> KeptAliveGets:
    url = f"http://127.0.0.1:{srv.server_address[1]}"
    return KeptAliveGets(url, timeout_seconds=10, headers={}, width=width)


def test_a_batch_is_all_sent_before_any_answer_is_read(server: ThreadingHTTPServer) -> None:
    # Each request is answered only once all four are in the server: asked one at a time, the
    # first would wait for the others in vain (the barrier breaks) and say so.
    _Handler.together = threading.Barrier(4, timeout=5)
    answers = _gets(server, width=4).get_all([f"/api/jobs/j{i}" for i in range(4)])
    assert answers == [{"path": f"/api/jobs/j{i}", "together": True} for i in range(4)]
    assert len({port for _, port in _Handler.seen}) == 4  # a connection each


def test_answers_keep_their_order_across_batches_and_a_404_is_an_answer(
    server: ThreadingHTTPServer,
) -> None:
    gets = _gets(server, width=2)
    paths = ["/a", "/missing", "/c", "/d", "/e"]
    answers = gets.get_all(paths)
    assert [a["path"] for a in answers if isinstance(a, dict)] == ["/a", "/c", "/d", "/e"]
    missing = answers[1]
    assert isinstance(missing, HTTPStatus) and missing.status == 404
    assert gets.get_all(["/f", "/g"]) == [
        {"path": "/f", "together": True},
        {"path": "/g", "together": True},
    ]
    assert len({port for _, port in _Handler.seen}) == 2  # the two connections, kept alive


def test_a_connection_the_server_dropped_is_replaced(server: ThreadingHTTPServer) -> None:
    gets = _gets(server, width=2)
    gets.get_all(["/a", "/b"])
    dropped = gets._gets[0]._conn
    assert dropped is not None and dropped.sock is not None
    dropped.sock.close()  # as if the dashboard had closed the idle connection
    assert [a["path"] for a in gets.get_all(["/c", "/d"])] == ["/c", "/d"]
    assert len({port for _, port in _Handler.seen}) == 3


def test_an_unreachable_dashboard_raises_and_leaves_no_answer_half_read(
    server: ThreadingHTTPServer,
) -> None:
    gets = _gets(server, width=3)
    gets.get_all(["/a"])
    port = server.server_address[1]
    server.shutdown()
    server.server_close()
    down = KeptAliveGets(f"http://127.0.0.1:{port}", timeout_seconds=1, headers={}, width=3)
    with pytest.raises(OSError):
        down.get_all(["/x", "/y"])
    assert all(get._conn is None for get in down._gets)
    with pytest.raises(OSError):
        gets.get_all(["/x", "/y", "/z"])  # the kept connection is gone, and so is the server
    assert all(get._conn is None for get in gets._gets)
