"""The smaller holes at the front door: a resource request too small to count (`cpu: 5e-324`
passes "at least one resource" and reserves nothing), a token of one repeated letter long
enough to pass the length check, an `--allowed-hosts` wildcard other than `*` served without a
token, and one client holding every connection slot so that nobody else is served."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.server import bounded_protocol
from specs.settings.process import Settings
from specs.tenancy.access import AccessError, exposure_problem, load_tokens
from tests.api.conftest import snapshot, task_json
from tests.api.test_slow_clients import SAFETY, Serve, read_all, serve  # noqa: F401
from tests.support.world import World
from tests.tenancy.conftest import auth


@pytest.mark.parametrize("cpu", [5e-324, 1e-9])
def test_a_vanishing_resource_request_is_refused(
    teams: tuple[World, TestClient], tasks_dir: Path, cpu: float
) -> None:
    _, api = teams
    before = snapshot(tasks_dir)
    response = api.put("/tasks/team-a/tiny", json=task_json(cpu=cpu), headers=auth("team-a"))
    assert response.status_code == 422, response.text
    assert snapshot(tasks_dir) == before


@pytest.mark.parametrize("token", ["a" * 36, "ab" * 18, "0" * 64])
def test_a_guessable_token_is_refused(tmp_path: Path, token: str) -> None:
    with pytest.raises(AccessError):
        load_tokens(Settings(tasks_dir=tmp_path, api_token=token), environ={})


def test_a_bare_wildcard_host_needs_a_token(tmp_path: Path) -> None:
    """A bare '*' needs a token."""
    settings = Settings(tasks_dir=tmp_path, allowed_hosts=("*",))
    assert exposure_problem(settings, load_tokens(settings, environ={})) is not None


@pytest.mark.parametrize("pattern", ["*.com", "*.example.org"])
def test_every_host_wildcard_needs_a_token(tmp_path: Path, pattern: str) -> None:
    """So does every narrower wildcard: a page under a name it matches can rebind it."""
    settings = Settings(tasks_dir=tmp_path, allowed_hosts=(pattern,))
    problem = exposure_problem(settings, load_tokens(settings, environ={}))
    assert problem is not None and f"'{pattern}'" in problem
    token = Settings(
        tasks_dir=tmp_path, allowed_hosts=(pattern,), api_token="k8Q7x-0123456789abcdef-ghijklmnop"
    )
    assert exposure_problem(token, load_tokens(token, environ={})) is None


def test_one_client_cannot_hold_every_connection(serve: Serve) -> None:  # noqa: F811
    """A client at 127.0.0.2 opens as many idle connections as the server allows; another
    client, at 127.0.0.1, must still be served (a per-client limit below the global one)."""
    port = serve(bounded_protocol(header_timeout=60, body_timeout=60), max_connections=4)
    hog = [
        socket.create_connection(("127.0.0.1", port), SAFETY, source_address=("127.0.0.2", 0))
        for _ in range(4)
    ]
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=SAFETY) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            answer = read_all(sock)
            assert answer.startswith(b"HTTP/1.1 200 "), answer[:80]
    finally:
        for connection in hog:
            connection.close()
