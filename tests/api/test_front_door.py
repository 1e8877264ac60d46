"""The HTTP front door: DNS rebinding under `--allowed-hosts '*'`, token hygiene,
the audit line of every 401 and 403, the security headers on every answer, and the API docs
served from vendored files. Each test is an attack (or a regression of one) with its answer."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from api.app import create_app
from api.frontdoor import CONTENT_SECURITY_POLICY
from api.ports import Observability
from api.routes.docs import STATIC
from specs.settings.process import Settings
from specs.tenancy.access import MIN_TOKEN_LENGTH, AccessError, hash_token, load_tokens
from tests.api.conftest import BASE_URL, TestClient, snapshot, task_json

TOKEN = "front-door-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

# --- DNS rebinding with a wildcard in --allowed-hosts -----------------------------------------

REBOUND = {"Host": "evil.example:8264", "Origin": "http://evil.example:8264"}


@pytest.mark.parametrize("token", [None, TOKEN])
@pytest.mark.parametrize("wildcard", ["*", "*.example"])
def test_a_wildcard_host_is_never_the_apis_own_origin(
    tasks_dir: Path, token: str | None, wildcard: str
) -> None:
    """Fails on main: the own origin came from the Host, so the rebound page's POST was its
    own origin (201, written by `anonymous`)."""
    settings = Settings(tasks_dir=tasks_dir, api_token=token, allowed_hosts=(wildcard,))
    headers = {**REBOUND, **(AUTH if token else {})}
    with TestClient(create_app(settings), base_url=BASE_URL) as client:
        assert client.get("/tasks", headers=headers).status_code == 200  # the Host passes
        for method, path in (("PUT", "/tasks/evil"), ("POST", "/add_task")):
            response = client.request(method, path, headers=headers, json=task_json("id"))
            assert response.status_code == 403, (method, path, response.text)
            assert "--allowed-origins" in response.json()["detail"]
    assert snapshot(tasks_dir) == {}


def test_configured_names_stay_same_origin_under_a_wildcard(tasks_dir: Path) -> None:
    settings = Settings(
        tasks_dir=tasks_dir, host="10.1.2.3", api_token=TOKEN, allowed_hosts=("rq.corp", "*")
    )
    with TestClient(create_app(settings), base_url=BASE_URL) as client:
        for n, origin in enumerate(
            [
                "http://localhost:8264",
                "http://127.0.0.1:8264",
                "http://10.1.2.3:8264",
                "http://rq.corp",
            ]
        ):
            host = origin.removeprefix("http://")
            same = {**AUTH, "Host": host, "Origin": origin, "Sec-Fetch-Site": "same-origin"}
            response = client.put(f"/tasks/t{n}", json=task_json(), headers=same)
            assert response.status_code == 201, (origin, response.text)
        # The own origin still has to match the Host: another local port is another site.
        other = {**AUTH, "Host": "localhost:8264", "Origin": "http://localhost:3000"}
        assert client.put("/tasks/x", json=task_json(), headers=other).status_code == 403


# --- token hygiene ----------------------------------------------------------------------------


def test_a_short_token_is_refused_with_how_to_make_one(tmp_path: Path) -> None:
    """Fails on main: a one-byte token was accepted silently."""
    short = "x" * (MIN_TOKEN_LENGTH - 1)
    file = tmp_path / "token"
    file.write_text("x\n")
    file.chmod(0o600)
    for settings, environ, source in (
        (Settings(tasks_dir=tmp_path, api_token=short), {}, "the API token"),
        (Settings(tasks_dir=tmp_path, token_file=file), {}, str(file)),
        (Settings(tasks_dir=tmp_path), {"RAYQUEUE_API_TOKEN": short}, "$RAYQUEUE_API_TOKEN"),
    ):
        with pytest.raises(AccessError) as caught:
            load_tokens(settings, environ=environ)
        assert source in str(caught.value) and f"at least {MIN_TOKEN_LENGTH}" in str(caught.value)
        assert "secrets.token_urlsafe(32)" in str(caught.value)
    long = Settings(tasks_dir=tmp_path, api_token="x0123456789abcdef".ljust(MIN_TOKEN_LENGTH, "y"))
    assert load_tokens(long, environ={}).required


@pytest.mark.parametrize("mode", [0o644, 0o666, 0o604, 0o620, 0o660])
@pytest.mark.parametrize("kind", ["token_file", "team_tokens"])
def test_a_token_file_open_to_others_is_refused_with_the_chmod(
    tmp_path: Path, mode: int, kind: str
) -> None:
    """Fails on main: a world-writable --token-file was accepted."""
    path = tmp_path / "secret"
    if kind == "token_file":
        path.write_text(TOKEN + "\n")
    else:
        entry = {"name": "ops", "sha256": hash_token(TOKEN), "role": "admin"}
        path.write_text(yaml.safe_dump({"tokens": [entry]}))
    path.chmod(mode)
    settings = Settings(tasks_dir=tmp_path, **{kind: path})  # type: ignore[arg-type]
    with pytest.raises(AccessError) as caught:
        load_tokens(settings, environ={})
    assert f"chmod 600 {path}" in str(caught.value) and f"{mode:04o}" in str(caught.value)
    # Owner only, or read-only for the group (a Kubernetes Secret with fsGroup): accepted.
    for fine in (0o600, 0o400, 0o640, 0o440):
        path.chmod(fine)
        assert load_tokens(settings, environ={}).identify(TOKEN.encode()) is not None


# --- 401 and 403 in the audit log -------------------------------------------------------------


@dataclass
class Teams:
    client: TestClient
    tokens: dict[str, str]


@pytest.fixture
def teams(tmp_path: Path, tasks_dir: Path) -> Iterator[Teams]:
    tokens = {
        "team-a": "team-a-token-0123456789abcdef-0123",
        "viewer": "viewer-0123456789abcdef-012345",
    }
    entries = [
        {"name": "team-a", "sha256": hash_token(tokens["team-a"]), "role": "write"},
        {"name": "viewer", "sha256": hash_token(tokens["viewer"]), "role": "read"},
    ]
    entries[0]["folders"] = ["team-a"]
    path = tmp_path / "tokens.yaml"
    path.write_text(yaml.safe_dump({"tokens": entries}))
    path.chmod(0o600)
    settings = Settings(tasks_dir=tasks_dir, team_tokens=path)
    with TestClient(create_app(settings), base_url=BASE_URL) as client:
        yield Teams(client, tokens)


def test_every_401_and_403_is_audited_once_without_the_token(
    teams: Teams, caplog: pytest.LogCaptureFixture
) -> None:
    """Fails on main: a 401 left no audit line."""
    a = {"Authorization": f"Bearer {teams.tokens['team-a']}"}
    wrong = "wrong-token-that-must-never-be-logged"
    with caplog.at_level(logging.DEBUG):
        assert (
            teams.client.get("/tasks", headers={"Authorization": f"Bearer {wrong}"}).status_code
            == 401
        )
        assert teams.client.put("/tasks/team-b/x", json=task_json(), headers=a).status_code == 403
        cross = {**a, "Origin": "http://evil.example"}
        assert (
            teams.client.put("/tasks/team-a/x", json=task_json(), headers=cross).status_code == 403
        )
        assert teams.client.get("/tasks", headers=a).status_code == 200  # no line
    lines = [r.getMessage() for r in caplog.records if r.name == "rayqueue.audit"]
    assert len(lines) == 3, lines
    assert lines[0].startswith("refused GET /tasks by (unidentified) from testclient:")
    assert lines[0].endswith(": 401 Unauthorized")
    assert lines[1].startswith("refused PUT /tasks/team-b/x by team-a from ")
    assert ": 403 token team-a may not change team-b/x" in lines[1]
    # The Origin check runs before the token is looked at.
    assert lines[2].startswith("refused PUT /tasks/team-a/x by (unidentified) from ")
    assert "403 cross-origin request refused" in lines[2]
    everything = caplog.text + "".join(str(r.args) for r in caplog.records)
    assert wrong not in everything
    for token in teams.tokens.values():
        assert token not in everything


# --- security headers on every answer ---------------------------------------------------------


class _Exposition:
    body = b"rayqueue_up 1\n"
    content_type = "text/plain; version=0.0.4"


def _assert_hardened(response: object) -> None:
    headers = response.headers  # type: ignore[attr-defined]
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "script-src 'self';" in CONTENT_SECURITY_POLICY  # no inline script anywhere


def test_security_headers_on_every_kind_of_answer(tasks_dir: Path) -> None:
    """Fails on main: no Content-Security-Policy nor nosniff at all."""
    settings = Settings(tasks_dir=tasks_dir, api_token=TOKEN, metrics_auth=False)
    app = create_app(settings, observability=Observability(metrics=_Exposition))

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("an unexpected bug")

    with TestClient(app, base_url=BASE_URL, raise_server_exceptions=False) as client:
        answers = {
            "metrics": client.get("/metrics"),
            "401": client.get("/tasks"),
            "404": client.get("/nope", headers=AUTH),
            "400 host": client.get("/tasks", headers={**AUTH, "Host": "evil.example"}),
            "403 origin": client.delete("/tasks/x", headers={**AUTH, "Origin": "http://e.x"}),
            "500": client.get("/boom", headers=AUTH),
            "ui": client.get("/ui/"),
            "json": client.get("/tasks", headers=AUTH),
        }
    expected = {"metrics": 200, "401": 401, "404": 404, "400 host": 400, "403 origin": 403}
    expected |= {"500": 500, "ui": 200, "json": 200}
    assert {k: r.status_code for k, r in answers.items()} == expected
    for response in answers.values():
        _assert_hardened(response)


# --- /docs and /redoc from vendored files -----------------------------------------------------

_URL = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']""")


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_docs_load_nothing_from_another_site(client: TestClient, page: str) -> None:
    """Fails on main: Swagger UI and ReDoc came from cdn.jsdelivr.net, floating versions."""
    response = client.get(page)
    assert response.status_code == 200
    _assert_hardened(response)
    html = response.text
    assert "http:" not in html and "https:" not in html and "cdn" not in html
    links = _URL.findall(html)
    assert links and all(link.startswith("assets/") for link in links), links
    assert not re.search(r"<script>\s*\S", html)  # no inline script: the CSP forbids them
    for link in links:
        asset = client.get("/" + link)
        assert asset.status_code == 200, link
        assert asset.content == (STATIC / link.removeprefix("assets/")).read_bytes(), link
        _assert_hardened(asset)
        if link.endswith(".js"):
            assert asset.headers["content-type"].startswith("text/javascript")
    assert client.get("/openapi.json").status_code == 200


def test_only_the_vendored_files_are_served_as_assets(client: TestClient) -> None:
    for path in ("ui.html", "vendor/README.md", "../app.py", "vendor/../ui.js", "%2e%2e/app.py"):
        assert client.get(f"/assets/{path}").status_code == 404, path
