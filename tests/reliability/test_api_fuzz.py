"""The HTTP API on a real server (uvicorn on a loopback port), with a token set: schemathesis
generates requests from our own OpenAPI schema, positive and negative, and none may be a 500.
Then, by hand: path traversal in every name-taking route, oversized bodies (declared and
chunked), and a missing or wrong token. Nothing may be written outside the tasks folder."""

from __future__ import annotations

import http.client
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import schemathesis
import uvicorn
import yaml
from schemathesis import GenerationMode

from api.app import create_app
from reconciler.shell.loop.runner import Reconciler
from reconciler.shell.raycluster.fake import FakeRay
from specs.cluster import Capacity
from specs.folder.store import TaskStore
from specs.settings.process import Settings
from specs.tenancy.access import Tokens
from specs.tenancy.runtimepaths import RuntimePaths
from tests.support.net import free_port
from tests.support.specs import snapshot, task_yaml
from tests.support.world import GIB

TOKEN = "rel-token-5f2c-0123456789abcdef-0123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
EXAMPLES = int(os.environ.get("RAYQUEUE_API_EXAMPLES", "100"))


@dataclass
class Server:
    url: str
    host: str
    port: int
    tasks: Path
    outside: Path
    before_outside: dict[str, bytes]


@pytest.fixture(scope="module")
def api_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("api")
    tasks, outside = root / "tasks", root / "outside"
    tasks.mkdir()
    outside.mkdir()
    (outside / "secret.yaml").write_text("not yours\n")
    code = root / "code"  # the one folder runtimeEnv local paths may name
    (code / "proj").mkdir(parents=True)
    (code / "link-out").symlink_to(outside)
    (tasks / "existing.yaml").write_text(task_yaml("python train.py"))
    (tasks / "team-a").mkdir()
    (tasks / "team-a" / "train.yaml").write_text(task_yaml("python train.py", priority=3))
    port = free_port()
    settings = Settings(
        tasks_dir=tasks,
        interval_seconds=0.5,
        queue_id="q-api-fuzz",
        host="127.0.0.1",
        port=port,
        api_token=TOKEN,
        working_dir_roots=(str(code),),
    )
    ray = FakeRay(Capacity(4, 0, 16 * GIB))
    paths = RuntimePaths.from_settings(settings, Tokens())
    reconciler = Reconciler(settings, TaskStore(tasks, check=paths.store_check()), ray, paths=paths)
    reconciler.run_pass()  # statuses and loop state exist, so the read routes have content
    stop = threading.Event()
    loop = threading.Thread(target=reconciler.run, args=(stop,), daemon=True)
    loop.start()  # a live loop, as under `rayqueue serve`: /readyz is ready, specs get run
    app = create_app(settings, reconciler=reconciler, ray=ray)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    # Not the main thread: uvicorn must not install signal handlers here. The ignore: mypy
    # refuses to replace a method on an instance, which is the point here.
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "uvicorn did not start"
    yield Server(f"http://127.0.0.1:{port}", "127.0.0.1", port, tasks, outside, snapshot(outside))
    server.should_exit = True
    thread.join(10)
    stop.set()
    reconciler.wake.set()
    loop.join(10)


def _check_operation(operation: Any, mode: GenerationMode, server: Server) -> int:
    """Run one operation's generated cases through hypothesis directly; returns the count.

    A plain hypothesis test over schemathesis' strategies: no schemathesis pytest plugin, so
    nothing here depends on pytest internals (its plugin broke with pytest 9)."""
    cases = 0

    @hypothesis.settings(
        max_examples=EXAMPLES,
        database=None,
        deadline=None,
        derandomize=True,  # the same cases on every run, so a failure reproduces
        suppress_health_check=list(hypothesis.HealthCheck),
        phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
    )
    @hypothesis.given(case=operation.as_strategy(mode))
    def run(case: Any) -> None:
        nonlocal cases
        cases += 1
        response = case.call(base_url=server.url, headers=AUTH, timeout=10)
        assert response.status_code < 500, (
            f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:300]}"
        )

    run()
    return cases


# ~1,600 requests: about a minute on a quiet machine, several under load; no speed target here.
@pytest.mark.timeout(1200)
def test_no_generated_request_is_a_server_error(api_server: Server, figures: Counter[str]) -> None:
    schema = schemathesis.openapi.from_url(f"{api_server.url}/openapi.json", headers=AUTH)
    figures["HTTP 500s"] += 0  # listed even when it stays 0
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10, "the OpenAPI schema lost its operations"
    total = 0
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            try:
                total += _check_operation(operation, mode, api_server)
            except AssertionError:
                figures["HTTP 500s"] += 1
                raise
            except hypothesis.errors.Unsatisfiable:
                # An operation with no parameter or body has nothing to make invalid.
                assert mode is GenerationMode.NEGATIVE, operation.label
                figures["operations with nothing to negate"] += 1
    figures["schemathesis cases"] += total
    assert total >= len(operations) * EXAMPLES // 2  # most operations really exercised


def raw(
    server: Server,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes]:
    """One request exactly as written: no client-side normalisation of `..` or encoding."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=10)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        sent = {"Content-Type": "application/yaml", **AUTH, **(headers or {})}
        if body is not None and "Transfer-Encoding" not in sent:
            sent["Content-Length"] = str(len(body))
        for key, value in sent.items():
            if value:
                conn.putheader(key, value)
        conn.endheaders()
        if body is not None:
            if sent.get("Transfer-Encoding") == "chunked":
                for start in range(0, len(body), 1 << 16):
                    chunk = body[start : start + (1 << 16)]
                    conn.send(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                conn.send(b"0\r\n\r\n")
            else:
                conn.send(body)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


TRAVERSALS = [
    "../outside/secret",
    "..%2Foutside%2Fsecret",
    "%2e%2e/%2e%2e/etc/passwd",
    "team-a/../../outside/secret",
    "team-a/%2e%2e/%2e%2e/outside/secret",
    "..",
    ".hidden",
    "a%00b",
    "%2Fetc%2Fpasswd",
    "....//....//outside/secret",
    "team-a\\..\\..\\outside\\secret",
]


def name_routes(server: Server) -> list[tuple[str, str]]:
    """(method, path template) of every route that takes a task name in its path."""
    import json

    status, data = raw(server, "GET", "/openapi.json")
    assert status == 200
    routes = []
    for template, item in json.loads(data)["paths"].items():
        if "{name" not in template:
            continue
        for method in item:
            routes.append((method.upper(), template))
    assert routes, "the schema lists no name-taking route"
    return routes


def test_path_traversal_in_every_name_taking_route(
    api_server: Server, figures: Counter[str]
) -> None:
    body = task_yaml("python evil.py").encode()
    tried = 0
    for method, template in name_routes(api_server):
        for name in TRAVERSALS:
            path = template.replace("{name}", name).replace("{name:path}", name)
            send = body if method in ("PUT", "PATCH", "POST") else None
            headers = {"Content-Type": "application/merge-patch+json"} if method == "PATCH" else {}
            status, data = raw(
                api_server, method, path, b'{"spec": {"priority": 1}}' if headers else send, headers
            )
            tried += 1
            assert status < 500, (method, path, status, data[:300])
            assert not (200 <= status < 300 and method != "GET"), (method, path, status, data)
    figures["path traversal requests"] += tried
    assert snapshot(api_server.outside) == api_server.before_outside
    assert not list(api_server.tasks.parent.glob("*.yaml"))  # nothing beside the folder
    assert not (Path("/etc") / "passwd.yaml").exists()


# spec.submissionId values Ray would put into a URL or a file name: every one is a
# 4xx through PUT (YAML and JSON) and PATCH, and none reaches the folder.
SUBMISSION_IDS = [
    "rq-team-b.train-abc-1/stop?",
    "x/stop",
    "x%2Fstop",
    "x%2fstop%3F",
    "x?y=1",
    "x#frag",
    "x y",
    "x\ty",
    "x\u0000y",
    "../../etc/passwd",
    "..",
    ".",
    "rq-anything-1",
    "caf\u00e9",
    "x" * 201,
    "",
    "x\\y",
    "x;rm -rf /",
]


def test_hostile_submission_ids_are_refused(api_server: Server, figures: Counter[str]) -> None:
    before = snapshot(api_server.tasks)
    tried = 0
    for sid in SUBMISSION_IDS:
        doc = json.loads(json.dumps(yaml.safe_load(task_yaml("python evil.py"))))
        doc["spec"]["submissionId"] = sid
        sends = [
            ("PUT", "/tasks/team-a/sid", yaml.safe_dump(doc).encode(), {}),
            ("PUT", "/tasks/team-a/sid", json.dumps(doc).encode(),
             {"Content-Type": "application/json"}),
            ("PATCH", "/tasks/team-a/train", json.dumps({"spec": {"submissionId": sid}}).encode(),
             {"Content-Type": "application/merge-patch+json"}),
        ]  # fmt: skip
        for method, path, body, headers in sends:
            status, data = raw(api_server, method, path, body, headers)
            tried += 1
            assert 400 <= status < 500, (method, sid, status, data[:300])
            assert b"submissionId" in data, (method, sid, data[:300])
    figures["hostile submission ids refused"] += tried
    assert snapshot(api_server.tasks) == before


def test_oversized_bodies_are_refused(api_server: Server, figures: Counter[str]) -> None:
    big = b"# " + b"x" * (2 << 20) + b"\n"
    status, _ = raw(api_server, "PUT", "/tasks/huge", big)
    assert status == 413
    status, _ = raw(api_server, "PUT", "/tasks/huge", big, {"Transfer-Encoding": "chunked"})
    assert status == 413
    status, _ = raw(api_server, "POST", "/add_task", big, {"Content-Type": "application/json"})
    assert status == 413
    figures["oversized bodies refused"] += 3
    assert not (api_server.tasks / "huge.yaml").exists()


def test_missing_or_wrong_token_is_401(api_server: Server, figures: Counter[str]) -> None:
    paths = ["/tasks", "/tasks/existing", "/cluster", "/openapi.json", "/docs"]
    for path in paths:
        for auth in ("", "Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN}x", TOKEN):
            status, data = raw(api_server, "GET", path, headers={"Authorization": auth})
            assert status == 401, (path, auth, status)
            assert TOKEN.encode() not in data
    status, _ = raw(api_server, "PUT", "/tasks/sneaky", task_yaml().encode(), {"Authorization": ""})
    assert status == 401 and not (api_server.tasks / "sneaky.yaml").exists()
    status, _ = raw(api_server, "GET", "/healthz", headers={"Authorization": ""})
    assert status == 200  # the one unauthenticated route, for probes
    figures["unauthenticated requests refused"] += len(paths) * 5 + 1


def test_dns_rebinding_is_refused_by_the_real_server(
    api_server: Server, figures: Counter[str]
) -> None:
    """A web page that rebinds its domain to 127.0.0.1 sends its own name as Host: every
    route answers 400 through uvicorn too, the token notwithstanding, and writes nothing."""
    import json

    def specs() -> dict[str, bytes]:
        # The live loop keeps writing sidecars and its own files; the specs are ours to check.
        files = snapshot(api_server.tasks).items()
        return {k: v for k, v in files if not k.endswith(".status.yaml") and ".rayqueue" not in k}

    status, data = raw(api_server, "GET", "/openapi.json")
    assert status == 200
    before = specs()
    tried = 0
    for template, item in json.loads(data)["paths"].items():
        path = template.replace("{name}", "existing").replace("{file}", "_queues.yaml")
        for method in item:
            for host in ("evil.example", f"evil.example:{api_server.port}", ""):
                conn = http.client.HTTPConnection(api_server.host, api_server.port, timeout=10)
                try:
                    conn.putrequest(method.upper(), path, skip_host=True)
                    conn.putheader("Host", host)
                    conn.putheader("Authorization", AUTH["Authorization"])
                    conn.putheader("Content-Length", "0")
                    conn.endheaders()
                    response = conn.getresponse()
                    response.read()
                finally:
                    conn.close()
                assert response.status == 400, (method, path, host, response.status)
                tried += 1
    figures["rebinding requests refused"] += tried
    assert specs() == before


# runtimeEnv values that would make Ray read this machine's disk outside the root:
# {outside}, {code} and {tasks} are filled in. Each must be refused (403, or 422 when
# malformed) by PUT (YAML and JSON) and by the legacy /add_task, and nothing written.
RUNTIME_ENV_PATHS: list[dict[str, Any]] = [
    {"working_dir": "/"},
    {"working_dir": "{outside}"},
    {"working_dir": "{code}/../outside"},
    {"working_dir": "{code}/link-out"},
    {"working_dir": "file://{outside}"},
    {"working_dir": "local://{outside}"},
    {"working_dir": "file://{code}/%2e%2e/outside"},
    {"working_dir": "../outside"},
    {"working_dir": "{tasks}"},
    {"working_dir": "{tasks}/.rayqueue"},
    {"working_dir": "{tasks}/team-a"},
    {"working_dir": "ftp://example.com/x.zip"},
    {"working_dir": 7},
    {"working_dir": "a\x00b"},
    {"py_modules": ["{code}/proj", "{outside}"]},
    {"py_modules": "{outside}"},
    {"java_jars": ["{outside}/secret.yaml"]},
    {"pip": "{outside}/secret.yaml"},
    {"pip": {"packages": "{outside}/secret.yaml"}},
    {"uv": "{outside}/secret.yaml"},
    {"conda": "{outside}/env.yaml"},
    {"conda": "{outside}"},
]


def _filled(value: Any, server: Server) -> Any:
    if isinstance(value, str):
        root = server.tasks.parent
        return (
            value.replace("{outside}", str(server.outside))
            .replace("{code}", str(root / "code"))
            .replace("{tasks}", str(server.tasks))
        )
    if isinstance(value, list):
        return [_filled(v, server) for v in value]
    if isinstance(value, dict):
        return {k: _filled(v, server) for k, v in value.items()}
    return value


def test_runtime_env_paths_outside_the_root_are_refused(
    api_server: Server, figures: Counter[str]
) -> None:
    import json

    before = snapshot(api_server.tasks)
    specs = {k for k in before if not k.endswith(".status.yaml") and ".rayqueue" not in k}
    tried = 0
    for case in RUNTIME_ENV_PATHS:
        env = _filled(case, api_server)
        doc = {"apiVersion": "rayqueue/v1", "kind": "Task"}
        doc["spec"] = {"entrypoint": "cat x", "resources": {"cpu": 1}, "runtimeEnv": env}
        for body, kind in [
            (json.dumps(doc).encode(), "application/json"),
            (yaml.safe_dump(doc).encode(), "application/yaml"),
        ]:
            status, data = raw(api_server, "PUT", "/tasks/steal", body, {"Content-Type": kind})
            assert status in (403, 422), (case, kind, status, data[:300])
            tried += 1
        legacy = {"name": "steal", "entrypoint": "cat x", "runtime_env": env, "cpu": 1}
        status, data = raw(
            api_server,
            "POST",
            "/add_task",
            json.dumps(legacy).encode(),
            {"Content-Type": "application/json"},
        )
        assert status in (403, 422), (case, "add_task", status, data[:300])
        tried += 1
    after = snapshot(api_server.tasks)
    assert {k for k in after if not k.endswith(".status.yaml") and ".rayqueue" not in k} == specs
    assert snapshot(api_server.outside) == api_server.before_outside
    # Inside the root, and remote URIs, are still fine.
    for env in ({"working_dir": "{code}/proj"}, {"working_dir": "s3://bucket/code.zip"}):
        body = yaml.safe_dump(
            {
                "apiVersion": "rayqueue/v1",
                "kind": "Task",
                "spec": {
                    "entrypoint": "ls",
                    "resources": {"cpu": 1},
                    "runtimeEnv": _filled(env, api_server),
                },
            }
        ).encode()
        status, data = raw(api_server, "PUT", "/tasks/fine", body)
        assert status in (200, 201), (env, status, data[:300])
    raw(api_server, "DELETE", "/tasks/fine")
    figures["runtimeEnv path requests refused"] += tried
