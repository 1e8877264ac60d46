"""Shared fixtures of the tenant-isolation attacks: the API fixtures of `tests/api` (a
temporary tasks folder, the app wired to a World's loop over FakeRay) and a team tokens file
in which each team writes, and reads, only its own folder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from api.app import TOKEN_ENV
from specs.tenancy.access import hash_token
from tests.api.conftest import (  # noqa: F401  (fixtures, registered by being imported)
    make_world,
    tasks_dir,
)
from tests.support.world import World

if TYPE_CHECKING:
    # Imported at run time by tests.api.conftest above, which silences the warning Starlette
    # gives on the first import of its test client.
    from fastapi.testclient import TestClient

# name -> (token, role, folders); the write tokens read only their own folder (`read: own`).
TOKENS: dict[str, tuple[str, str, list[str] | None]] = {
    "team-a": ("tok-team-a-5b1d8e0c", "write", ["team-a"]),
    "team-b": ("tok-team-b-77c2a0f1", "write", ["team-b"]),
    "team-a-admin": ("tok-team-a-admin-0d9c3b", "admin", ["team-a"]),
    "platform": ("tok-admin-4f6a21", "admin", None),
}


@pytest.fixture(autouse=True)
def _no_token_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # A token in the developer's shell must not turn every test into a 401.
    monkeypatch.delenv(TOKEN_ENV, raising=False)


def auth(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[who][0]}"}


@pytest.fixture
def tokens_file(tmp_path: Path) -> Path:
    entries = []
    for name, (token, role, folders) in TOKENS.items():
        entry: dict[str, Any] = {"name": name, "sha256": hash_token(token), "role": role}
        if folders is not None:
            entry["folders"] = folders
        entries.append(entry)
    path = tmp_path / "tokens.yaml"
    path.write_text(yaml.safe_dump({"tokens": entries}))
    path.chmod(0o600)  # a token file open to others is refused
    return path


@pytest.fixture
def teams(
    make_world: Callable[..., tuple[World, TestClient]],  # noqa: F811
    tasks_dir: Path,  # noqa: F811
    tokens_file: Path,
) -> tuple[World, TestClient]:
    """The loop over FakeRay and the API in front of it, with team tokens; team-a/ and
    team-b/ exist."""
    for team in ("team-a", "team-b"):
        (tasks_dir / team).mkdir()
    return make_world(team_tokens=tokens_file)
