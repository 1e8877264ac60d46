"""The per-token policy of the team tokens file: what a team may put in a spec
(priority, preemptible, env_vars), how many tasks it may hold, how often it may call, and what
it may read. Each test is an attack with the answer it must get."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from api.app import create_app
from specs.settings.process import Settings
from specs.tenancy.access import hash_token
from tests.api.conftest import BASE_URL, SEED_BODY, TestClient, snapshot, task_json, task_yaml
from tests.support.world import World

STOP = "RAY_JOB_STOP_WAIT_TIME_S"

# name -> (token, entry without name and sha256)
TOKENS: dict[str, tuple[str, dict[str, Any]]] = {
    "team-a-ci": (
        "tok-team-a-ci-0123456789abcdef0123",
        {
            "role": "write",
            "folders": ["team-a"],
            "maxPriority": 5,
            "forbiddenEnvVars": ["AWS_SECRET_ACCESS_KEY"],
            "maxTasks": 3,
        },
    ),
    "team-b-ci": ("tok-team-b-ci-0123456789abcdef0123", {"role": "write", "folders": ["team-b"]}),
    "lead-a": (
        "tok-lead-a-0123456789abcdef01234567",
        {"role": "write", "folders": ["team-a"], "read": "all", "allowNonPreemptible": True},
    ),
    "viewer": ("tok-viewer-0123456789abcdef01234567", {"role": "read"}),
    "b-viewer": (
        "tok-b-viewer-0123456789abcdef012345",
        {"role": "read", "read": "own", "folders": ["team-b"]},
    ),
    # SEED_BODY's working_dir lies under /home/ray/src: with team tokens, local paths need a root.
    "ops": (
        "tok-ops-0123456789abcdef0123456789ab",
        {"role": "write", "folders": ["/"], "workingDirRoots": ["/home/ray/src"]},
    ),
    "capped-ops": (
        "tok-capped-ops-0123456789abcdef01234",
        {"role": "write", "folders": ["/"], "maxPriority": 5, "workingDirRoots": ["/home/ray/src"]},
    ),
    "chatty": (
        "tok-chatty-0123456789abcdef01234567",
        {"role": "write", "folders": ["team-c"], "requestsPerMinute": 2},
    ),
    "platform": ("tok-platform-0123456789abcdef012345", {"role": "admin"}),
}


def auth(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[who][0]}"}


def tokens_path(tmp_path: Path) -> Path:
    entries = [
        {"name": name, "sha256": hash_token(token), **entry}
        for name, (token, entry) in TOKENS.items()
    ]
    path = tmp_path / "tokens.yaml"
    path.write_text(yaml.safe_dump({"tokens": entries}))
    path.chmod(0o600)
    return path


@pytest.fixture
def api(tmp_path: Path, tasks_dir: Path) -> Iterator[TestClient]:
    for team in ("team-a", "team-b"):
        (tasks_dir / team).mkdir()
        (tasks_dir / team / "train.yaml").write_text(task_yaml())
    settings = Settings(tasks_dir=tasks_dir, team_tokens=tokens_path(tmp_path))
    with TestClient(create_app(settings), base_url=BASE_URL) as client:
        yield client


def spec_on_disk(tasks_dir: Path, name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((tasks_dir / f"{name}.yaml").read_text())
    return document["spec"]


# --- what a team may put in a spec ------------------------------------------------------------


def writes(client: TestClient, name: str, who: str, **spec: Any) -> list[Any]:
    """The same spec through each write path of the resource API."""
    a = auth(who)
    return [
        client.put(f"/tasks/{name}", json=task_json(**spec), headers=a),
        client.put(
            f"/tasks/{name}",
            content=task_yaml(**spec).encode(),
            headers={**a, "Content-Type": "application/yaml"},
        ),
        client.patch("/tasks/team-a/train", json={"spec": spec}, headers=a),
    ]


@pytest.mark.parametrize(
    ("spec", "rule"),
    [
        ({"priority": 9}, "may not set priority above 5 (maxPriority in the team tokens file)"),
        ({"preemptible": False}, "may not set preemptible: false (allowNonPreemptible"),
        ({"runtimeEnv": {"env_vars": {STOP: "999999999"}}}, f"env_vars.{STOP} (the queue's"),
        ({"runtimeEnv": {"env_vars": {"AWS_SECRET_ACCESS_KEY": "x"}}}, "forbiddenEnvVars"),
    ],
)
def test_a_team_token_cannot_escape_its_policy(
    api: TestClient, tasks_dir: Path, spec: dict[str, Any], rule: str
) -> None:
    before = snapshot(tasks_dir)
    for response in writes(api, "team-a/new", "team-a-ci", **spec):
        assert response.status_code == 403, (response.request.method, response.text)
        assert response.json()["detail"].startswith("token team-a-ci ")
        assert rule in response.json()["detail"]
    assert snapshot(tasks_dir) == before
    # Within the policy, the same paths write.
    assert api.put(
        "/tasks/team-a/new", json=task_json(priority=5), headers=auth("team-a-ci")
    ).is_success


def test_the_grace_variable_is_refused_to_every_write_token(api: TestClient) -> None:
    # Not listed in team-b-ci's entry: write tokens always have it.
    env = {"runtimeEnv": {"env_vars": {STOP: "5"}}}
    response = api.put("/tasks/team-b/x", json=task_json(**env), headers=auth("team-b-ci"))
    assert response.status_code == 403 and STOP in response.json()["detail"]
    # Defaults of a write token: priority 9 is fine, preemptible: false is not.
    assert api.put(
        "/tasks/team-b/y", json=task_json(priority=9), headers=auth("team-b-ci")
    ).is_success
    held = api.put("/tasks/team-b/z", json=task_json(preemptible=False), headers=auth("team-b-ci"))
    assert held.status_code == 403
    # allowNonPreemptible: true, and the admin, may.
    ok = api.put("/tasks/team-a/z", json=task_json(preemptible=False), headers=auth("lead-a"))
    assert ok.status_code == 201
    admin = task_json(priority=9, preemptible=False, runtimeEnv={"env_vars": {STOP: "600"}})
    assert api.put("/tasks/team-b/w", json=admin, headers=auth("platform")).status_code == 201


def test_a_team_may_still_edit_a_task_an_admin_raised(api: TestClient, tasks_dir: Path) -> None:
    raised = api.patch(
        "/tasks/team-a/train",
        json={"spec": {"priority": 9, "preemptible": False}},
        headers=auth("platform"),
    )
    assert raised.status_code == 200
    a = auth("team-a-ci")
    # Suspending or lowering changes nothing the policy guards.
    assert api.patch("/tasks/team-a/train", json={"spec": {"suspend": True}}, headers=a).is_success
    assert spec_on_disk(tasks_dir, "team-a/train")["priority"] == 9
    assert spec_on_disk(tasks_dir, "team-a/train")["preemptible"] is False
    assert api.patch("/tasks/team-a/train", json={"spec": {"priority": 7}}, headers=a).is_success
    # Raising it again is refused.
    again = api.patch("/tasks/team-a/train", json={"spec": {"priority": 8}}, headers=a)
    assert again.status_code == 403 and "maxPriority" in again.json()["detail"]
    assert spec_on_disk(tasks_dir, "team-a/train")["priority"] == 7
    # Once made preemptible, it cannot be made non-preemptible again by the team.
    assert api.patch(
        "/tasks/team-a/train", json={"spec": {"preemptible": True}}, headers=a
    ).is_success
    held = api.patch("/tasks/team-a/train", json={"spec": {"preemptible": False}}, headers=a)
    assert held.status_code == 403 and "allowNonPreemptible" in held.json()["detail"]


def test_the_old_api_obeys_the_policy(api: TestClient, tasks_dir: Path) -> None:
    (tasks_dir / "team-b" / "legacy.yaml").write_text(task_yaml(submissionId="old-1"))
    before = snapshot(tasks_dir)
    ops = auth("capped-ops")
    high = api.post("/add_task", json={**SEED_BODY, "priority": 7}, headers=ops)
    assert high.status_code == 403 and "above 5" in high.json()["detail"]
    grace = {**SEED_BODY, "runtime_env": {"env_vars": {STOP: "999999999"}}}
    assert api.post("/add_task", json=grace, headers=auth("ops")).status_code == 403
    change = api.post(
        "/change_task_priority", json={"task_id": "old-1", "priority": 7}, headers=ops
    )
    assert change.status_code == 403 and "maxPriority" in change.json()["detail"]
    assert snapshot(tasks_dir) == before
    assert api.post(
        "/change_task_priority", json={"task_id": "old-1", "priority": 4}, headers=ops
    ).is_success
    assert api.post("/add_task", json=SEED_BODY, headers=ops).status_code == 200


# --- how many tasks, how often ------------------------------------------------------------------


def test_max_tasks_caps_what_the_folders_hold(api: TestClient, tasks_dir: Path) -> None:
    a = auth("team-a-ci")  # maxTasks: 3; team-a/train is one
    assert api.put("/tasks/team-a/one", json=task_json(), headers=a).status_code == 201
    assert api.put("/tasks/team-a/deep/two", json=task_json(), headers=a).status_code == 201
    refused = api.put("/tasks/team-a/three", json=task_json(), headers=a)
    assert refused.status_code == 403
    assert "may not hold more than 3 tasks" in refused.json()["detail"]
    assert "maxTasks" in refused.json()["detail"]
    assert not (tasks_dir / "team-a" / "three.yaml").exists()
    # Replacing or patching one it holds is no new task; deleting makes room.
    assert api.put("/tasks/team-a/one", json=task_json("echo 2"), headers=a).status_code == 200
    assert api.patch("/tasks/team-a/one", json={"spec": {"priority": 2}}, headers=a).is_success
    assert api.delete("/tasks/team-a/one", headers=a).status_code == 200
    assert api.put("/tasks/team-a/three", json=task_json(), headers=a).status_code == 201
    # Other teams' tasks do not count against it, nor does it limit them.
    assert api.put("/tasks/team-b/more", json=task_json(), headers=auth("team-b-ci")).is_success


def test_over_the_request_rate_is_429_with_retry_after(api: TestClient) -> None:
    now = [1000.0]
    api.app.state.rate_limits.clock = lambda: now[0]  # type: ignore[attr-defined]
    chatty = auth("chatty")  # requestsPerMinute: 2
    assert api.get("/tasks", headers=chatty).status_code == 200
    assert api.put("/tasks/team-c/x", json=task_json(), headers=chatty).status_code == 201
    limited = api.get("/tasks", headers=chatty)
    assert limited.status_code == 429
    assert limited.headers["Retry-After"] == "30"
    assert "requestsPerMinute" in limited.json()["detail"]
    assert api.put("/tasks/team-c/y", json=task_json(), headers=chatty).status_code == 429
    # Another token has its own bucket, and one without a rate is never limited.
    for _ in range(5):
        assert api.get("/tasks", headers=auth("viewer")).status_code == 200
    now[0] += 29
    assert api.get("/tasks", headers=chatty).status_code == 429
    now[0] += 1
    assert api.get("/tasks", headers=chatty).status_code == 200


# --- what a team may read -----------------------------------------------------------------------


def names(client: TestClient, who: str, path: str = "/tasks") -> set[str]:
    body = client.get(path, headers=auth(who)).json()
    return {row["name"] for row in body.get("items", body.get("tasks", []))}


def test_read_own_lists_only_its_folders(api: TestClient) -> None:
    assert names(api, "team-a-ci") == {"team-a/train"}
    assert names(api, "team-a-ci", "/ui/api/tasks") == {"team-a/train"}
    assert names(api, "b-viewer") == {"team-b/train"}
    assert names(api, "b-viewer", "/ui/api/tasks") == {"team-b/train"}
    for who in ("lead-a", "viewer", "ops", "platform"):  # read: all
        assert names(api, who) == {"team-a/train", "team-b/train"}
        assert names(api, who, "/ui/api/tasks") == {"team-a/train", "team-b/train"}


def test_read_own_hides_another_teams_spec_as_not_found(api: TestClient) -> None:
    secret = task_json(runtimeEnv={"env_vars": {"HF_TOKEN": "hf_secret"}})
    assert api.put("/tasks/team-b/keys", json=secret, headers=auth("team-b-ci")).status_code == 201
    a = auth("team-a-ci")
    hidden = api.get("/tasks/team-b/keys", headers=a)
    missing = api.get("/tasks/team-b/nope", headers=a)
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json()["detail"] == "no task team-b/keys"  # as for a name that is not there
    assert "hf_secret" not in hidden.text
    assert api.get("/tasks/team-b/keys/logs", headers=a).status_code == 404
    assert api.get("/tasks/team-b/keys", headers=auth("b-viewer")).status_code == 200
    assert api.get("/tasks/team-a/train", headers=auth("b-viewer")).status_code == 404
    shown = api.get("/tasks/team-b/keys", headers=auth("lead-a"))
    assert shown.status_code == 200 and "hf_secret" in shown.text


def test_read_own_hides_another_teams_status_and_logs(tmp_path: Path, tasks_dir: Path) -> None:
    for team in ("team-a", "team-b"):
        (tasks_dir / team).mkdir()
        (tasks_dir / team / "train.yaml").write_text(task_yaml())
    world = World.build(tasks_dir, tick=0.0, api=True, team_tokens=tokens_path(tmp_path))
    world.step()
    sid = world.status("team-b/train")["submissionId"]
    world.ray.set_logs(sid, "B's secret log line\n")
    app = create_app(world.reconciler.settings, reconciler=world.reconciler, ray=world.ray)
    with TestClient(app, base_url=BASE_URL) as client:
        a = auth("team-a-ci")
        for path in ("/tasks/team-b/train", "/tasks/team-b/train/logs"):
            response = client.get(path, headers=a)
            assert response.status_code == 404, path
            assert sid not in response.text and "secret" not in response.text
        rows = client.get("/tasks", headers=a).json()["items"]
        assert [r["name"] for r in rows] == ["team-a/train"]
        assert sid not in client.get("/ui/api/tasks", headers=a).text
        # Its own, and another team's for a read: all token, are served.
        assert client.get("/tasks/team-a/train/logs", headers=a).status_code == 200
        logs = client.get("/tasks/team-b/train/logs", headers=auth("lead-a"))
        assert logs.status_code == 200 and logs.text == "B's secret log line\n"
        status = client.get("/tasks/team-b/train", headers=auth("viewer")).json()["status"]
        assert status["submissionId"] == sid
