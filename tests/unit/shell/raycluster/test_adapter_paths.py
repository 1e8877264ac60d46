"""The adapter puts every submission id into its URLs percent-encoded: checked on
the request lines a stand-in dashboard receives, without a Ray head."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import ClassVar

import pytest

pytest.importorskip("ray")

from reconciler.shell.raycluster.adapter import RayJobsAdapter
from specs.cluster import JobNotFound, TailLimits
from tests.support.localhttp import QuietHandler, serving


class _Dashboard(QuietHandler):
    """Answers the version check; every job endpoint is a 404, as for an unknown id."""

    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[tuple[str, str]]] = []

    def _answer(self) -> None:
        _Dashboard.seen.append((self.command, self.path))
        if self.path == "/api/version":
            body, status = json.dumps({"ray_version": "2.60.0", "version": "4"}).encode(), 200
        else:
            body, status = b"Job does not exist", 404
        self.answer(status, body)

    do_GET = do_POST = do_DELETE = _answer


@pytest.fixture
def dashboard() -> Iterator[str]:
    _Dashboard.seen = []
    with serving(_Dashboard) as srv:
        yield f"http://127.0.0.1:{srv.server_address[1]}"


@pytest.mark.parametrize(
    ("method", "verb", "suffix"),
    [
        ("stop", "POST", "/stop"),
        ("delete", "DELETE", ""),
        ("logs", "GET", "/logs"),
        ("job_info", "GET", ""),
    ],
)
def test_every_id_is_one_encoded_path_segment(
    dashboard: str, method: str, verb: str, suffix: str
) -> None:
    adapter = RayJobsAdapter(dashboard, timeout_seconds=5)
    for sid, encoded in [
        ("rq-team-b.train-abc-1/stop?", "rq-team-b.train-abc-1%2Fstop%3F"),
        ("x%2Fstop", "x%252Fstop"),
        ("a b#c", "a%20b%23c"),
        ("plain-id_1.2", "plain-id_1.2"),  # ids within the spec rule go out as they are
    ]:
        with pytest.raises(JobNotFound):
            getattr(adapter, method)(sid)
        assert _Dashboard.seen[-1] == (verb, f"/api/jobs/{encoded}{suffix}")


def test_a_log_tails_look_up_encodes_the_id_too(dashboard: str) -> None:
    adapter = RayJobsAdapter(dashboard, timeout_seconds=5)
    limits = TailLimits(lines=5, max_bytes=1024, line_bytes=256)
    for sid, encoded in [("x/stop?", "x%2Fstop%3F"), ("a b#c", "a%20b%23c")]:
        with pytest.raises(JobNotFound):
            adapter.log_tail(sid, limits)
        assert _Dashboard.seen[-1] == ("GET", f"/api/jobs/{encoded}")
