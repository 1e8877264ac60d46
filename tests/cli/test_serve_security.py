"""`rayqueue serve` refuses an open listener, and `rayqueue token` makes entries for the team
tokens file: the real CLI, in a subprocess, as a user runs it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from specs.tenancy.access import hash_token, parse_tokens_file
from tests.support.net import free_port

ROOT = Path(__file__).resolve().parents[2]
ENV_DROP = ("RAYQUEUE_API_TOKEN", "RAY_ADDRESS", "RAY_DASHBOARD_ADDRESS")


def rayqueue(*args: str, stdin: str = "", timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_DROP}
    return subprocess.run(
        [sys.executable, "-m", "reconciler.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
    )


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.1", "my-host.example"])
def test_a_non_loopback_bind_without_a_token_exits_non_zero(tmp_path: Path, host: str) -> None:
    started = time.monotonic()
    result = rayqueue("serve", "--dir", str(tmp_path / "tasks"), "--host", host, "--port", "1")
    assert result.returncode == 1, result
    assert "RAYQUEUE_API_TOKEN" in result.stderr and "--insecure-no-auth" in result.stderr
    assert "refusing" in result.stderr
    # Refused before anything started: no folder created, no Ray head booted.
    assert not (tmp_path / "tasks").exists()
    assert time.monotonic() - started < 30


def test_allowed_hosts_star_without_a_token_exits_non_zero(tmp_path: Path) -> None:
    """Fails on main: `--allowed-hosts '*'` on loopback with no token started, and a rebound
    page could use the API from a visitor's browser."""
    result = rayqueue("serve", "--dir", str(tmp_path / "tasks"), "--allowed-hosts", "*")
    assert result.returncode == 1, result
    assert "--allowed-hosts '*'" in result.stderr and "DNS rebinding" in result.stderr
    assert "RAYQUEUE_API_TOKEN" in result.stderr
    assert not (tmp_path / "tasks").exists()


@pytest.mark.parametrize("mode", [0o644, 0o666])
def test_a_short_or_open_token_file_exits_non_zero(tmp_path: Path, mode: int) -> None:
    """Fails on main: a one-byte token in a world-writable --token-file was accepted."""
    token_file = tmp_path / "token"
    token_file.write_text("x" * 40)
    token_file.chmod(mode)
    argv = ["serve", "--dir", str(tmp_path / "tasks"), "--token-file", str(token_file)]
    result = rayqueue(*argv)
    assert result.returncode == 1 and f"chmod 600 {token_file}" in result.stderr, result
    token_file.chmod(0o600)
    token_file.write_text("x")
    result = rayqueue(*argv)
    assert result.returncode == 1 and "at least 32" in result.stderr, result
    assert "token_urlsafe" in result.stderr
    assert not (tmp_path / "tasks").exists()


@pytest.mark.parametrize("content", [None, "", "two words"])
def test_an_unusable_token_file_exits_non_zero(tmp_path: Path, content: str | None) -> None:
    token_file = tmp_path / "token"
    if content is not None:
        token_file.write_text(content)
        token_file.chmod(0o600)
    result = rayqueue(
        "serve", "--dir", str(tmp_path / "tasks"), "--host", "0.0.0.0", "--token-file",
        str(token_file),
    )  # fmt: skip
    assert result.returncode == 1, result
    assert str(token_file) in result.stderr
    assert not (tmp_path / "tasks").exists()


def test_a_broken_team_tokens_file_exits_non_zero(tmp_path: Path) -> None:
    path = tmp_path / "tokens.yaml"
    path.write_text("tokens:\n  - {name: a, token: plain, role: admin}\n")
    path.chmod(0o600)
    result = rayqueue("serve", "--dir", str(tmp_path / "t"), "--team-tokens", str(path))
    assert result.returncode == 1 and "rayqueue token hash" in result.stderr, result


def test_insecure_no_auth_starts_and_warns(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "serve.log"
    env = {k: v for k, v in os.environ.items() if k not in ENV_DROP}
    argv = [
        sys.executable, "-m", "reconciler.cli", "serve", "--dir", str(tmp_path / "tasks"),
        "--host", "0.0.0.0", "--port", str(port), "--insecure-no-auth",
        # An address nothing answers: no Ray head is started, the loop just backs off.
        "--address", "http://127.0.0.1:9",
    ]  # fmt: skip
    with log.open("w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                    assert r.status == 200
                    break
            except (urllib.error.URLError, OSError):
                assert proc.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
        text = log.read_text()
        assert "WARNING" in text and "WITHOUT A TOKEN" in text and "0.0.0.0" in text, text
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_token_hash_reads_stdin() -> None:
    token = "s3cret-token-0123456789abcdef-xyz"
    result = rayqueue("token", "hash", stdin=token + "\n")
    assert result.returncode == 0, result
    assert result.stdout.strip() == hash_token(token)
    assert token not in result.stdout + result.stderr
    assert rayqueue("token", "hash", stdin="").returncode == 1


def test_token_hash_refuses_a_guessable_token() -> None:
    """The tokens file holds only hashes: the clear token is checked here, as serve checks
    the one it reads in clear."""
    for weak in ("s3cret-token", "a" * 40, "abcdefghij" * 4):
        result = rayqueue("token", "hash", stdin=weak + "\n")
        assert result.returncode == 1, (weak, result)
        assert "could be guessed" in result.stderr and result.stdout == ""


def test_token_new_prints_the_token_once_and_a_valid_entry() -> None:
    result = rayqueue(
        "token", "new", "--name", "team-a-ci", "--role", "write", "--folder", "team-a"
    )
    assert result.returncode == 0, result
    token = result.stderr.strip().rsplit(" ", 1)[-1]
    assert len(token) >= 40 and token not in result.stdout
    entries = yaml.safe_load(result.stdout)
    assert entries == [
        {"name": "team-a-ci", "sha256": hash_token(token), "role": "write", "folders": ["team-a"]}
    ]
    parse_tokens_file(yaml.safe_dump({"tokens": entries}).encode(), "out")  # serve accepts it
    refused = rayqueue("token", "new", "--name", "x", "--role", "write")
    assert refused.returncode == 1 and "folders" in refused.stderr
