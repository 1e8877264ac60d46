"""The embedded Ray head: without `--address`, serve starts a private head, and every job
runs under that head's environment. The head must start with a clean environment (what Ray
needs, plus what the operator lists in RAYQUEUE_HEAD_ENV), so that no job inherits serve's API
token or cloud keys; with team tokens, serve warns at start that every job runs as its user on
its host. The head is not started here: its command is captured at the point it would be
spawned (test_embedded_head_ray.py runs a real one)."""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import reconciler.app.daemon
from reconciler.app.daemon import ServeError, serve, shared_user_warning
from reconciler.cli.main import main
from reconciler.shell.loop.faults import ENV as FAULT_ENV
from reconciler.shell.raycluster.local_head import LocalRayHead, head_environment
from specs.settings.process import Settings

SECRETS = {
    "RAYQUEUE_API_TOKEN": "serve-admin-token-0123456789abcdef",
    "AWS_SECRET_ACCESS_KEY": "cloud-key-0123456789abcdef",
}


class _Spawned(Exception):
    """Raised in place of spawning the head, carrying the environment it was given."""

    def __init__(self, env: Mapping[str, str]) -> None:
        super().__init__("spawn captured")
        self.env = dict(env)


def _spawn(*_args: Any, env: Mapping[str, str], **_kwargs: Any) -> subprocess.Popen[bytes]:
    raise _Spawned(env)


def test_the_embedded_head_does_not_inherit_serves_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(subprocess, "Popen", _spawn)  # as local_head calls it
    head = LocalRayHead(ray_executable="/nonexistent/ray")
    with pytest.raises(_Spawned) as spawned:
        head.start(timeout_seconds=5)
    env = spawned.value.env
    assert "PATH" in env  # the capture is of the real environment
    leaked = sorted(name for name in SECRETS if name in env)
    assert leaked == [], leaked


def test_a_listed_variable_and_rays_own_settings_reach_the_head(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TEAM_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("RAY_DEDUP_LOGS", "0")
    monkeypatch.setattr(subprocess, "Popen", _spawn)
    head = LocalRayHead(ray_executable="/nonexistent/ray")
    with pytest.raises(_Spawned) as spawned:
        head.start(timeout_seconds=5, passed_env=("TEAM_PROXY",))
    env = spawned.value.env
    assert env["TEAM_PROXY"] == "http://proxy.example:3128"
    assert env["RAY_DEDUP_LOGS"] == "0"


def test_the_head_keeps_what_ray_needs_and_nothing_named_like_a_secret() -> None:
    serves = {
        "PATH": "/venv/bin:/usr/bin",
        "HOME": "/home/rq",
        "LC_ALL": "C.UTF-8",
        "VIRTUAL_ENV": "/venv",
        "RAY_DEDUP_LOGS": "0",
        "RAY_REDIS_PASSWORD": "hunter2-hunter2",
        "RAY_AUTH_TOKEN": "ray-token",
        "RAY_ADDRESS": "http://elsewhere:8265",
        "GITHUB_TOKEN": "ghp_0123",
        "RAYQUEUE_API_TOKEN": SECRETS["RAYQUEUE_API_TOKEN"],
        "TEAM_PROXY": "http://proxy.example:3128",
        "HF_TOKEN": "hf_listed",
    }
    env = head_environment(serves, ("TEAM_PROXY", "HF_TOKEN", "RAY_ADDRESS"))
    assert sorted(env) == [
        "HF_TOKEN",  # named like a secret, but the operator listed it
        "HOME",
        "LC_ALL",
        "PATH",
        "RAY_DEDUP_LOGS",
        "TEAM_PROXY",
        "VIRTUAL_ENV",
    ]  # RAY_ADDRESS even listed: the private head is never pointed at another cluster


def _served(settings: Settings, caplog: pytest.LogCaptureFixture) -> list[str]:
    """serve's start-up warnings: a bad fault spec ends serve right after them, before the
    lock or any Ray head is taken."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(FAULT_ENV, "not-a-fault-spec")
        with caplog.at_level(logging.WARNING, logger="rayqueue.serve"), pytest.raises(ServeError):
            serve(settings)
    return [r.getMessage() for r in caplog.records if r.name == "rayqueue.serve"]


def test_team_tokens_on_the_embedded_head_warn_once_at_start(
    tmp_path: Path, tokens_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(tasks_dir=tmp_path / "tasks", team_tokens=tokens_file)
    warnings = _served(settings, caplog)
    shared = [w for w in warnings if "runs as this scheduler's user" in w]
    assert len(shared) == 1, warnings
    assert "RAYQUEUE_SINGLE_USER_HEAD=true" in shared[0]
    assert "tokens file" in shared[0]


@pytest.mark.parametrize(
    "given",
    [
        {"single_user_head": True},  # the operator accepted it
        {"address": "http://ray-head:8265"},  # a cluster of its own: no embedded head
        {"team_tokens": None},  # one tenant
    ],
)
def test_no_shared_user_warning_when_it_does_not_apply(
    tmp_path: Path, tokens_file: Path, given: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    fields: dict[str, Any] = {"team_tokens": tokens_file, "working_dir_roots": ("/srv",)}
    settings = Settings(tasks_dir=tmp_path / "tasks", **(fields | given))
    warnings = _served(settings, caplog)
    assert not [w for w in warnings if "runs as this scheduler's user" in w], warnings
    assert shared_user_warning(settings) is None


def test_serve_refuses_to_pass_its_own_token_to_the_head(tmp_path: Path) -> None:
    settings = Settings(tasks_dir=tmp_path / "tasks", head_env=("HOME", "RAYQUEUE_API_TOKEN"))
    with pytest.raises(ServeError, match="RAYQUEUE_HEAD_ENV names RAYQUEUE_API_TOKEN"):
        serve(settings)
    assert not (tmp_path / "tasks").exists()  # refused before anything started


def test_the_listed_names_come_from_their_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    served: list[Settings] = []
    monkeypatch.setattr(reconciler.app.daemon, "serve", served.append)
    monkeypatch.setenv("RAYQUEUE_HEAD_ENV", "TEAM_PROXY, HF_HOME")
    monkeypatch.setenv("RAYQUEUE_SINGLE_USER_HEAD", "true")
    assert main(["serve", "--dir", "/t", "--address", "http://ray:8265"]) == 0
    assert served[0].head_env == ("TEAM_PROXY", "HF_HOME")
    assert served[0].single_user_head is True
    with pytest.raises(ValueError, match="'A=B' is not a variable name"):
        Settings(tasks_dir=Path("/t"), head_env=("A=B",))
