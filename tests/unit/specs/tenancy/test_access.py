"""specs.tenancy.access (tokens, roles, folders) and the origin rule of api.security,
table-driven."""

from __future__ import annotations

import math
import secrets
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from api.security import allowed_hosts, normalize_origin, origin_problem
from specs.settings.process import Settings
from specs.tenancy.access import (
    ANONYMOUS,
    AccessError,
    Principal,
    Role,
    Tokens,
    exposure_problem,
    hash_token,
    is_loopback,
    load_tokens,
    parse_tokens_file,
    token_bits,
    token_weakness,
)
from specs.tenancy.policy import STOP_WAIT_ENV, UNRESTRICTED

H = hash_token("secret")


def tokens_file(*entries: dict[str, Any]) -> bytes:
    return yaml.safe_dump({"tokens": list(entries)}).encode()


def test_hash_is_sha256_hex() -> None:
    assert hash_token("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"name": "a", "token": "plain", "role": "admin"}, "sha256 instead"),
        ({"name": "a", "sha256": "abc", "role": "admin"}, "64 hex"),
        ({"name": "a", "sha256": H, "role": "root"}, "read, write or admin"),
        ({"name": "a", "sha256": H, "role": "write"}, "needs folders"),
        ({"name": "a", "sha256": H, "role": "write", "folders": []}, "needs folders"),
        ({"name": "a", "sha256": H, "role": "read", "folders": ["x"]}, "need read: own"),
        ({"name": "a", "sha256": H, "role": "admin", "folders": ["_x"]}, "'_'"),
        ({"name": "a", "sha256": H, "role": "write", "folders": ["../x"]}, "'..'"),
        ({"name": "a", "sha256": H, "role": "write", "folders": ["_queues"]}, "'_'"),
        ({"name": "a", "sha256": H, "role": "write", "folder": ["x"]}, "unknown keys"),
        ({"name": "a b", "sha256": H, "role": "admin"}, "name must be"),
        ({"sha256": H, "role": "admin"}, "name must be"),
    ],
)
def test_bad_entries_are_refused_with_a_reason(entry: dict[str, Any], message: str) -> None:
    with pytest.raises(AccessError, match=message):
        parse_tokens_file(tokens_file(entry), "tokens.yaml")


W = {"name": "team-a-ci", "sha256": H, "role": "write", "folders": ["team-a"]}


def test_a_write_token_defaults_to_the_single_tenant_safe_policy() -> None:
    (entry,) = parse_tokens_file(tokens_file(W), "f")
    policy = entry.principal.policy
    assert policy.max_priority == 9
    assert not policy.allow_non_preemptible
    assert policy.forbidden_env_vars == {STOP_WAIT_ENV}
    assert not policy.read_all
    assert policy.max_tasks is None and policy.requests_per_minute is None


def test_read_and_admin_tokens_default_to_reading_all() -> None:
    entries = parse_tokens_file(
        tokens_file(
            {**W, "name": "r", "role": "read", "folders": None},
            {**W, "name": "ad", "role": "admin", "folders": None, "sha256": hash_token("x")},
        ),
        "f",
    )
    reader, admin = (e.principal for e in entries)
    assert reader.policy.read_all and reader.can_read("team-b/x") and not reader.can_write("x")
    assert admin.policy == UNRESTRICTED or admin.policy.allow_non_preemptible
    assert admin.policy.read_all and not admin.policy.forbidden_env_vars


def test_policy_keys_are_read() -> None:
    entry = {
        **W,
        "maxPriority": 5,
        "allowNonPreemptible": True,
        "forbiddenEnvVars": ["AWS_PROFILE"],
        "read": "all",
        "maxTasks": 3,
        "requestsPerMinute": 60,
    }
    (parsed,) = parse_tokens_file(tokens_file(entry), "f")
    p = parsed.principal
    assert p.policy.max_priority == 5 and p.policy.allow_non_preemptible
    assert p.policy.forbidden_env_vars == {"AWS_PROFILE", STOP_WAIT_ENV}  # always, for write
    assert p.policy.max_tasks == 3 and p.policy.requests_per_minute == 60
    assert p.policy.read_all and p.can_read("team-b/x")
    own = parse_tokens_file(tokens_file({**W, "read": "own"}), "f")[0].principal
    assert own.can_read("team-a/x") and not own.can_read("team-b/x")
    assert not own.can_read("team-ab/x") and not own.can_read("team-a")
    reader = {"name": "r", "sha256": H, "role": "read", "read": "own", "folders": ["team-b"]}
    r = parse_tokens_file(tokens_file(reader), "f")[0].principal
    assert r.can_read("team-b/x") and not r.can_read("team-a/x") and not r.can_write("team-b/x")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"maxPriority": 10}, "maxPriority must be a whole number from 0 to 9"),
        ({"maxPriority": -1}, "maxPriority must be"),
        ({"maxPriority": "5"}, "maxPriority must be"),
        ({"maxPriority": True}, "maxPriority must be"),
        ({"allowNonPreemptible": "yes"}, "allowNonPreemptible must be true or false"),
        ({"forbiddenEnvVars": "AWS_PROFILE"}, "forbiddenEnvVars must be a list"),
        ({"forbiddenEnvVars": ["A=1"]}, "forbiddenEnvVars must be a list"),
        ({"forbiddenEnvVars": [""]}, "forbiddenEnvVars must be a list"),
        ({"read": "mine"}, "read must be own or all"),
        ({"maxTasks": -1}, "maxTasks must be"),
        ({"maxTasks": 1.5}, "maxTasks must be"),
        ({"requestsPerMinute": 0}, "requestsPerMinute must be a whole number from 1"),
        ({"maxPriorty": 5}, "unknown keys: maxPriorty"),
        ({"role": "admin", "folders": None, "read": "own"}, "does not apply to an admin"),
        ({"role": "read", "folders": None, "read": "own"}, "read: own needs folders"),
        ({"role": "read", "folders": None, "maxPriority": 3}, "write and admin tokens only"),
    ],
)
def test_bad_policy_values_name_the_entry_and_key(extra: dict[str, Any], message: str) -> None:
    entry = {k: v for k, v in {**W, **extra}.items() if v is not None}
    with pytest.raises(AccessError, match=message) as caught:
        parse_tokens_file(tokens_file(entry), "tokens.yaml")
    assert str(caught.value).startswith("tokens.yaml: tokens[0]")  # the file and the entry


def test_duplicates_and_shapes_are_refused() -> None:
    one = {"name": "a", "sha256": H, "role": "admin"}
    with pytest.raises(AccessError, match="used twice"):
        parse_tokens_file(tokens_file(one, {**one, "sha256": hash_token("x")}), "f")
    with pytest.raises(AccessError, match="listed twice"):
        parse_tokens_file(tokens_file(one, {**one, "name": "b"}), "f")
    for data in (b"[]", b"tokens: 3", b"tokens: []\nextra: 1", b": :"):
        with pytest.raises(AccessError):
            parse_tokens_file(data, "f")


def test_identify_finds_the_entry_of_the_token() -> None:
    settings_file = tokens_file(
        {"name": "a", "sha256": hash_token("tok-a"), "role": "write", "folders": ["team-a/"]},
        {"name": "r", "sha256": hash_token("tok-r").upper(), "role": "read"},
    )
    entries = parse_tokens_file(settings_file, "f")
    tokens = Tokens(entries)
    a, r = tokens.identify(b"tok-a"), tokens.identify(b"tok-r")
    assert a is not None and (a.name, a.role, a.folders) == ("a", Role.WRITE, ("team-a",))
    assert r == Principal("r", Role.READ, ())
    for wrong in (b"", b"tok-", b"tok-a ", b"TOK-A", hash_token("tok-a").encode()):
        assert tokens.identify(wrong) is None


CAN_WRITE = [
    # (role, folders, name, expected)
    (Role.WRITE, ("team-a",), "team-a/x", True),
    (Role.WRITE, ("team-a",), "team-a/deep/x", True),
    (Role.WRITE, ("team-a",), "team-a", False),
    (Role.WRITE, ("team-a",), "team-ab/x", False),
    (Role.WRITE, ("team-a",), "team-b/x", False),
    (Role.WRITE, ("team-a/nlp",), "team-a/x", False),
    (Role.WRITE, ("team-a/nlp",), "team-a/nlp/x", True),
    (Role.WRITE, ("/",), "anything/at/all", True),
    (Role.WRITE, ("/",), "_queues", False),
    (Role.WRITE, ("/",), "_queues.yaml", False),
    (Role.WRITE, ("team-a",), "_queues", False),
    (Role.READ, (), "team-a/x", False),
    (Role.ADMIN, ("/",), "_queues.yaml", True),
    (Role.ADMIN, ("/",), "team-a/x", True),
]


@pytest.mark.parametrize(("role", "folders", "name", "expected"), CAN_WRITE)
def test_can_write(role: Role, folders: tuple[str, ...], name: str, expected: bool) -> None:
    assert Principal("p", role, folders).can_write(name) is expected


@given(
    folder=st.from_regex(r"[a-z]{1,4}", fullmatch=True),
    name=st.from_regex(r"[a-z]{1,4}(/[a-z]{1,4}){0,3}", fullmatch=True),
)
def test_a_write_token_writes_exactly_below_its_folder(folder: str, name: str) -> None:
    inside = name.split("/")[0] == folder and "/" in name
    assert Principal("p", Role.WRITE, (folder,)).can_write(name) is inside


def test_top_write_and_readers() -> None:
    assert Principal("p", Role.WRITE, ("/",)).can_write_top
    assert not Principal("p", Role.WRITE, ("team-a",)).can_write_top
    assert not Principal("p", Role.READ).can_write_top
    assert ANONYMOUS.can_write_top and ANONYMOUS.can_write("_queues")
    assert not Principal("p", Role.READ).can_read("_queues")
    assert Principal("p", Role.READ).can_read("team-a/x")


def test_resolves_within_follows_symlinks(tmp_path: Path) -> None:
    (tmp_path / "team-a").mkdir()
    (tmp_path / "team-b").mkdir()
    (tmp_path / "team-a" / "link").symlink_to(tmp_path / "team-b")
    p = Principal("p", Role.WRITE, ("team-a",))
    assert p.resolves_within(tmp_path, tmp_path / "team-a" / "x.yaml")
    assert p.resolves_within(tmp_path, tmp_path / "team-a" / "new" / "x.yaml")
    assert not p.resolves_within(tmp_path, tmp_path / "team-a" / "link" / "x.yaml")
    assert not p.resolves_within(tmp_path, tmp_path / "team-b" / "x.yaml")


def test_load_tokens_sources(tmp_path: Path) -> None:
    base = Settings(tasks_dir=tmp_path)
    assert not load_tokens(base, environ={}).required
    env = load_tokens(base, environ={"RAYQUEUE_API_TOKEN": "from-env-0123456789abcdef-0123456"})
    assert env.identify(b"from-env-0123456789abcdef-0123456") is not None
    (tmp_path / "tok").write_text("  from-file-0123456789abcdef-0123456\n")
    (tmp_path / "tok").chmod(0o600)
    from_file = Settings(tasks_dir=tmp_path, token_file=tmp_path / "tok")
    tokens = load_tokens(
        from_file, environ={"RAYQUEUE_API_TOKEN": "from-env-0123456789abcdef-0123456"}
    )
    assert (
        tokens.identify(b"from-file-0123456789abcdef-0123456") is not None
        and tokens.identify(b"from-env-0123456789abcdef-0123456") is None
    )
    (tmp_path / "two").write_text("a b\n")
    (tmp_path / "two").chmod(0o600)
    with pytest.raises(AccessError, match="more than one"):
        load_tokens(Settings(tasks_dir=tmp_path, token_file=tmp_path / "two"), environ={})
    team = tmp_path / "team.yaml"
    team.write_bytes(tokens_file({"name": "api-token", "sha256": H, "role": "read"}))
    team.chmod(0o600)
    with pytest.raises(AccessError, match="reserved"):
        load_tokens(
            Settings(
                tasks_dir=tmp_path, team_tokens=team, api_token="t0k3n-0123456789abcdef-0123456789"
            ),
            environ={},
        )


@pytest.mark.parametrize(
    ("host", "token", "insecure", "refused"),
    [
        ("127.0.0.1", None, False, False),
        ("::1", None, False, False),
        ("localhost", None, False, False),
        ("0.0.0.0", None, False, True),
        ("::", None, False, True),
        ("10.0.0.5", None, False, True),
        ("myhost", None, False, True),
        ("0.0.0.0", "t0k3n-0123456789abcdef-0123456789", False, False),
        ("0.0.0.0", None, True, False),
    ],
)
def test_exposure(
    tmp_path: Path, host: str, token: str | None, insecure: bool, refused: bool
) -> None:
    settings = Settings(tasks_dir=tmp_path, host=host, api_token=token, insecure_no_auth=insecure)
    problem = exposure_problem(settings, load_tokens(settings, environ={}))
    assert (problem is not None) is refused
    if problem:
        assert "RAYQUEUE_API_TOKEN" in problem and "--insecure-no-auth" in problem
    assert not exposure_problem(
        Settings(tasks_dir=tmp_path, host=host, api=False), load_tokens(settings, environ={})
    )


def test_is_loopback() -> None:
    assert is_loopback("127.0.0.2") and is_loopback("[::1]") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("localhost.example")


# --- the origin rule --------------------------------------------------------------------------

OWN = "http://localhost:8264"
ORIGIN_CASES = [
    # (method, Origin, Sec-Fetch-Site, allowed, refused?)
    ("POST", None, None, (), False),  # curl
    ("POST", "http://localhost:8264", "same-origin", (), False),
    ("POST", "http://LOCALHOST:8264", None, (), False),
    ("POST", "http://evil.example", None, (), True),
    ("PUT", "http://evil.example", "cross-site", (), True),
    ("PATCH", "null", None, (), True),
    ("DELETE", "http://localhost:8265", "same-site", (), True),
    ("DELETE", None, "cross-site", (), True),
    ("DELETE", None, "same-site", (), True),
    ("DELETE", None, "none", (), False),
    ("POST", "http://localhost:8264", "cross-site", (), True),
    ("POST", "https://ui.example", "cross-site", ("https://ui.example",), False),
    ("POST", "https://ui.example:443", "cross-site", ("https://ui.example",), False),
    ("POST", "https://ui.example.evil", "cross-site", ("https://ui.example",), True),
    ("POST", None, "cross-site", ("https://ui.example",), True),
    ("GET", "http://evil.example", "cross-site", (), False),
    ("HEAD", "http://evil.example", "cross-site", (), False),
    ("OPTIONS", "http://evil.example", "cross-site", (), False),
    ("POST", "not a url", None, (), True),
    ("POST", "http://localhost:8264/path", None, (), True),
]


@pytest.mark.parametrize(("method", "origin", "site", "allowed", "refused"), ORIGIN_CASES)
def test_origin_rule(
    method: str, origin: str | None, site: str | None, allowed: tuple[str, ...], refused: bool
) -> None:
    allow = frozenset(n for n in map(normalize_origin, allowed) if n)
    problem = origin_problem(
        method,
        origin.encode() if origin is not None else None,
        site.encode() if site is not None else None,
        normalize_origin(OWN),
        allow,
    )
    assert (problem is not None) is refused
    if problem:
        assert "--allowed-origins" in problem


def test_allowed_hosts(tmp_path: Path) -> None:
    assert allowed_hosts(Settings(tasks_dir=tmp_path)) == ["localhost", "127.0.0.1", "[::1]"]
    hosts = allowed_hosts(Settings(tasks_dir=tmp_path, host="::", allowed_hosts=("Rq.Corp",)))
    assert hosts == ["localhost", "127.0.0.1", "[::1]", "rq.corp"]
    assert "[fd00::5]" in allowed_hosts(Settings(tasks_dir=tmp_path, host="fd00::5"))
    assert "gpu-box" in allowed_hosts(Settings(tasks_dir=tmp_path, host="gpu-box"))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("allowed_hosts", ("a/b",)),
        ("allowed_hosts", ("x.*",)),
        ("allowed_origins", ("evil.example",)),
        ("allowed_origins", ("http://x/path",)),
        ("allowed_origins", ("ftp://x",)),
    ],
)
def test_settings_refuse_bad_hosts_and_origins(
    tmp_path: Path, field: str, value: tuple[str, ...]
) -> None:
    with pytest.raises(ValueError, match=field.replace("_", "-")):
        Settings(tasks_dir=tmp_path, **{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("a" * 36, "uses only 1 distinct characters; at least 8"),
        ("ab" * 18, "uses only 2 distinct characters; at least 8"),
        ("0" * 64, "uses only 1 distinct characters"),
        ("abcdefghij" * 4, "too regular: about 33 bits"),  # one part said four times
    ],
)
def test_a_guessable_token_is_refused_naming_the_rule(tmp_path: Path, token: str, why: str) -> None:
    with pytest.raises(AccessError) as caught:
        load_tokens(Settings(tasks_dir=tmp_path, api_token=token), environ={})
    assert why in str(caught.value) and "secrets.token_urlsafe(32)" in str(caught.value)


def test_random_tokens_pass_the_entropy_check() -> None:
    """What the docs tell users to make, and 128 random bits written as 32 hex digits."""
    for _ in range(200):
        assert token_weakness(secrets.token_urlsafe(32)) is None
        assert token_weakness(secrets.token_hex(16)) is None
    assert token_bits("abc" * 20) == pytest.approx(3 * math.log2(3))
    assert token_bits("abcabcab") == pytest.approx(3 * math.log2(3))  # a cut-short last part
