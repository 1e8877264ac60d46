"""Every bad input is a 4xx that writes nothing: names, sizes, auth; and concurrent writers."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient

from api.app import TOKEN_ENV, create_app
from specs.settings.process import Settings
from tests.api.conftest import BASE_URL, SEED_BODY, snapshot, task_json, task_yaml

BAD_NAMES = [
    "%2e%2e/escape",
    "a/%2e%2e/%2e%2e/escape",
    "a/%2e/b",
    "%2Fetc%2Fpasswd",
    "a//b",
    "a/",
    ".hidden",
    "a/.git/config",
    "x%00y",
    "a%20b",
    "a%5Cb",
    "%C3%BC",
    "a:b",
    "train.status",
    "a" * 201,
    "/".join(["d"] * 101),
]


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the tasks folder, reachable through a symlink inside it."""
    path = tmp_path / "outside"
    path.mkdir()
    (tmp_path / "tasks" / "link").symlink_to(path, target_is_directory=True)
    return path


@pytest.mark.parametrize("name", [*BAD_NAMES, "link/x", "link/escape/deeper"])
def test_bad_names_are_4xx_and_write_nothing(
    client: TestClient, tmp_path: Path, outside: Path, name: str
) -> None:
    (tmp_path / "tasks" / "real.yaml").write_text(task_yaml())
    before = snapshot(tmp_path)
    url = f"/tasks/{name}"
    responses = [
        client.get(url),
        client.get(f"{url}/logs"),
        client.put(url, json=task_json()),
        client.put(url, content=task_yaml().encode(), headers={"content-type": "application/yaml"}),
        client.patch(url, json={"spec": {"priority": 1}}),
        client.delete(url),
    ]
    for response in responses:
        assert 400 <= response.status_code < 500, (response.request.method, response.text)
        assert "detail" in response.json()
    assert snapshot(tmp_path) == before
    assert list(outside.iterdir()) == []


def test_bad_name_detail_says_why(client: TestClient) -> None:
    response = client.put("/tasks/%2e%2e/x", json=task_json())
    assert response.status_code == 400
    assert "'..'" in response.json()["detail"]


def test_a_symlinked_spec_file_pointing_outside_is_not_written(
    client: TestClient, tmp_path: Path, outside: Path
) -> None:
    target = outside / "victim.yaml"
    target.write_text("precious\n")
    (tmp_path / "tasks" / "victim.yaml").symlink_to(target)
    response = client.put("/tasks/victim", json=task_json())
    assert response.status_code == 400
    assert target.read_text() == "precious\n"


def test_a_name_that_collides_with_a_folder_is_409(client: TestClient, tasks_dir: Path) -> None:
    (tasks_dir / "a.yaml").mkdir()
    before = snapshot(tasks_dir)
    response = client.put("/tasks/a", json=task_json())
    assert 400 <= response.status_code < 500
    assert snapshot(tasks_dir) == before
    (tasks_dir / "plain").write_text("a file, not a folder")
    response = client.put("/tasks/plain/b", json=task_json())
    assert response.status_code == 409
    assert "detail" in response.json()


# --- body size --------------------------------------------------------------------------------


def test_oversized_bodies_are_413(client: TestClient, tasks_dir: Path) -> None:
    big = b"#" * (1024 * 1024 + 1)
    yaml_type = {"content-type": "application/yaml"}
    assert client.put("/tasks/a", content=big, headers=yaml_type).status_code == 413

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while streaming
        for _ in range(17):
            yield b"#" * 65536

    response = client.put("/tasks/a", content=chunks(), headers=yaml_type)
    assert response.status_code == 413
    assert response.json()["detail"].startswith("request body is larger")
    body = {**SEED_BODY, "entrypoint": "x" * (1024 * 1024)}
    assert client.post("/add_task", json=body).status_code == 413
    assert snapshot(tasks_dir) == {}


def test_bad_content_length_is_400(client: TestClient) -> None:
    response = client.post("/add_task", content=b"{}", headers={"content-length": "abc"})
    assert response.status_code == 400


# --- errors are JSON --------------------------------------------------------------------------


def test_unknown_routes_and_methods_answer_json(client: TestClient) -> None:
    assert client.get("/nope").json() == {"detail": "Not Found"}
    response = client.get("/add_task")
    assert response.status_code == 405
    assert "detail" in response.json()


# --- auth -------------------------------------------------------------------------------------


@pytest.fixture
def secured(tasks_dir: Path) -> Iterator[TestClient]:
    settings = Settings(tasks_dir=tasks_dir, api_token="s3cret-token-0123456789abcdef-xyz")
    with TestClient(create_app(settings), base_url=BASE_URL) as client:
        yield client


@pytest.mark.parametrize(
    "header",
    [
        None,
        "Bearer wrong",
        "Bearer s3cret-token-0123456789abcdef-xy",
        "Bearer s3cret-token-0123456789abcdef-xyz-and-more",
        "Basic s3cret-token-0123456789abcdef-xyz",
        "s3cret-token-0123456789abcdef-xyz",
        "Bearer",
        "",
    ],
)
def test_without_the_token_everything_but_healthz_is_401(
    secured: TestClient, tasks_dir: Path, header: str | None
) -> None:
    headers = {} if header is None else {"Authorization": header}
    requests = [
        ("GET", "/tasks"),
        ("GET", "/tasks/a"),
        ("GET", "/cluster"),
        ("GET", "/docs"),
        ("GET", "/openapi.json"),
        ("GET", "/nope"),
        ("POST", "/add_task"),
        ("POST", "/cancel_task"),
        ("POST", "/change_task_priority"),
        ("PUT", "/tasks/a"),
        ("PATCH", "/tasks/a"),
        ("DELETE", "/tasks/a"),
    ]
    for method, path in requests:
        response = secured.request(method, path, headers=headers, json=SEED_BODY)
        assert response.status_code == 401, (method, path)
        assert response.json() == {"detail": "Unauthorized"}  # the same for every failure
        assert response.headers["www-authenticate"] == "Bearer"
    assert secured.get("/healthz", headers=headers).status_code == 200
    # The readiness probe answers too (kubelets carry no token), without its reasons.
    ready = secured.get("/readyz", headers=headers)
    assert ready.status_code == 503
    assert ready.json() == {"detail": "not ready: loop", "checks": {"loop": "failing"}}
    assert snapshot(tasks_dir) == {}


def test_with_the_token_requests_pass(secured: TestClient) -> None:
    auth = {"Authorization": "Bearer s3cret-token-0123456789abcdef-xyz"}
    response = secured.post("/add_task", json=SEED_BODY, headers=auth)
    assert response.status_code == 200
    assert (
        secured.get(
            "/tasks", headers={"Authorization": "bearer s3cret-token-0123456789abcdef-xyz"}
        ).status_code
        == 200
    )
    assert secured.get("/docs", headers=auth).status_code == 200
    # With the token, the probe says why it is not ready.
    assert "no reconcile loop" in secured.get("/readyz", headers=auth).json()["checks"]["loop"]


def test_token_from_the_environment(tasks_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, "from-env-0123456789abcdef-0123456")
    with TestClient(create_app(Settings(tasks_dir=tasks_dir)), base_url=BASE_URL) as client:
        assert client.get("/tasks").status_code == 401
        assert (
            client.get(
                "/tasks", headers={"Authorization": "Bearer from-env-0123456789abcdef-0123456"}
            ).status_code
            == 200
        )


@pytest.mark.parametrize(
    ("host", "token", "warned"),
    [
        ("0.0.0.0", None, True),
        ("10.1.2.3", None, True),
        ("head.example.org", None, True),
        ("::", None, True),
        ("0.0.0.0", "t0k3n-0123456789abcdef-0123456789", False),
        ("127.0.0.1", None, False),
        ("localhost", None, False),
        ("::1", None, False),
    ],
)
def test_public_bind_without_token_warns_at_startup(
    tasks_dir: Path, caplog: pytest.LogCaptureFixture, host: str, token: str | None, warned: bool
) -> None:
    app = create_app(Settings(tasks_dir=tasks_dir, host=host, api_token=token))
    with caplog.at_level(logging.WARNING, logger="rayqueue.api"):
        assert caplog.records == []
        with TestClient(app, base_url=BASE_URL):
            pass
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert bool(messages) == warned, messages
    if warned:
        assert host in messages[0] and TOKEN_ENV in messages[0]


def test_create_app_has_no_side_effects(tmp_path: Path) -> None:
    missing = tmp_path / "not-yet"
    create_app(Settings(tasks_dir=missing))
    assert not missing.exists()


# --- concurrency ------------------------------------------------------------------------------


def test_concurrent_patches_on_one_task_lose_nothing(client: TestClient, tasks_dir: Path) -> None:
    client.put("/tasks/shared", json=task_json())
    errors: list[str] = []

    def worker(i: int) -> None:
        for j in range(5):
            response = client.patch(
                "/tasks/shared", json={"metadata": {"labels": {f"w{i}-{j}": "x"}}}
            )
            if response.status_code != 200:
                errors.append(response.text)
            text = (tasks_dir / "shared.yaml").read_text()
            if not isinstance(yaml.safe_load(text), dict):
                errors.append(f"torn file: {text!r}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    labels = yaml.safe_load((tasks_dir / "shared.yaml").read_text())["metadata"]["labels"]
    assert len(labels) == 40


def test_concurrent_puts_with_if_match_let_exactly_one_win(
    client: TestClient, tasks_dir: Path
) -> None:
    etag = client.put("/tasks/race", json=task_json()).headers["etag"]
    results: list[int] = []
    barrier = threading.Barrier(6)

    def worker(priority: int) -> None:
        barrier.wait()
        response = client.put(
            "/tasks/race", json=task_json(priority=priority), headers={"If-Match": etag}
        )
        results.append(response.status_code)

    threads = [threading.Thread(target=worker, args=(p,)) for p in range(1, 7)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [200, 409, 409, 409, 409, 409]
