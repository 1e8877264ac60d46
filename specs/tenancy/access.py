"""Who may do what through the HTTP API: bearer tokens, their roles and their folders.

Tokens are never stored: the team tokens file holds each token's sha256 next to a name, a role
and (for `write`) the folders the token may change. The single token of $RAYQUEUE_API_TOKEN or
--token-file is an `admin` named `api-token`. With no token at all (loopback only), every
caller is the `anonymous` admin.

    tokens:
      - name: team-a-ci
        sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
        role: write
        folders: [team-a]

Roles: `read` sees everything but changes nothing; `write` creates, edits and deletes tasks
under its folders only (`/` means the whole tree); `admin` also edits configuration, the
top-level names starting with `_` (such as `_queues.yaml`), which no `write` token may touch.
An `admin` token with `folders: [team-a]` is a team's admin: it writes under team-a/ and edits
the queue files there (`team-a/_queues.yaml`, its sub-queues; nested queues), nothing above.

Each entry may also carry a policy (specs.tenancy.policy: maxPriority, allowNonPreemptible,
forbiddenEnvVars, read, maxTasks, requestsPerMinute). A `write` token reads only its own
folders unless it says `read: all`; a `read` token with `read: own` lists the folders it reads.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import math
import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml

from specs.folder.store import InvalidName, validate_name
from specs.queues.config import CONFIG_FILE as QUEUES_FILE
from specs.settings.process import Settings
from specs.task.visibility import TOP, Visibility, under
from specs.tenancy.policy import POLICY_KEYS, UNRESTRICTED, Policy, PolicyError, parse_policy
from specs.yamlio.depth import TooDeep, check_nesting

TOKEN_ENV = "RAYQUEUE_API_TOKEN"
SINGLE_TOKEN_NAME = "api-token"
ANONYMOUS_NAME = "anonymous"
CONFIG_PREFIX = "_"  # top-level names reserved for configuration (admin only)
MAX_TOKENS_FILE_BYTES = 1 << 20
# 32 characters of a random token are ~190 bits (token_urlsafe): far beyond guessing over HTTP.
MIN_TOKEN_LENGTH = 32
# Length alone passes 36 copies of one letter. A token is also judged by a rough estimate of
# its entropy: the length of its shortest repeating unit times log2 of the number of distinct
# characters it uses. A random token of MIN_TOKEN_LENGTH hex digits (128 bits) clears it.
MIN_TOKEN_BITS = 100
MIN_TOKEN_DISTINCT = 8
MAKE_TOKEN = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
# Group write or any access by others. Group read stays allowed: it is how Kubernetes (fsGroup,
# defaultMode 0440) shares a Secret with a non-root process.
_LOOSE_MODE = stat.S_IWGRP | stat.S_IRWXO

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,99}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_ENTRY_KEYS = frozenset({"name", "sha256", "role", "folders", "workingDirRoots"}) | POLICY_KEYS


class Role(StrEnum):
    READ = "read"
    WRITE = "write"
    ADMIN = "admin"


class AccessError(ValueError):
    """The token configuration cannot be used; the message says which file and what."""


def hash_token(token: str) -> str:
    """The hex sha256 the tokens file stores for `token` (tokens are long random strings, so a
    plain hash is enough: there is nothing to guess from a dictionary)."""
    return hashlib.sha256(token.encode()).hexdigest()


def is_config(name: str) -> bool:
    """A top-level name starting with `_` is configuration (`_queues`), not a team's task."""
    return name.split("/", 1)[0].startswith(CONFIG_PREFIX)


def queue_file_folder(name: str) -> str | None:
    """`team-a` for `team-a/_queues.yaml`, a queue's own division into sub-queues; else None."""
    folder, _, file = name.rpartition("/")
    return folder if folder and file == QUEUES_FILE else None


@dataclass(frozen=True)
class Principal:
    """The caller, as its token names it."""

    name: str
    role: Role
    folders: tuple[str, ...] = ()  # folder prefixes ("team-a", "team-a/nlp") or TOP
    policy: Policy = UNRESTRICTED  # specs.tenancy.policy: limits from the team tokens file
    # Absolute folders under which its specs' runtimeEnv may name local paths (runtimepaths.py).
    working_dir_roots: tuple[str, ...] = ()

    def can_read(self, name: str) -> bool:
        """May this caller see the task `name` (spec, status, logs)? With `read: own`, only
        under its folders. `name` must have passed validate_name, as for can_write."""
        if self.role is Role.ADMIN:
            return True
        return not is_config(name) and (self.policy.read_all or self.holds(name))

    def holds(self, name: str) -> bool:
        """Whether `name` lies under one of this caller's folders."""
        return under(self.folders, name)

    def can_write(self, name: str) -> bool:
        """May this caller create, change or delete the task (or config) `name`?

        `name` must already have passed specs.folder.store.validate_name: no `..`, no empty or
        hidden segments, so a plain prefix test on whole segments is exact."""
        if self.role is Role.ADMIN and TOP in self.folders:
            return True
        if self.role is Role.READ or is_config(name):
            return False
        folder = queue_file_folder(name)
        if folder is not None:  # a team's admin owns its queues' files, a write token none
            return self.role is Role.ADMIN and (folder in self.folders or self.holds(folder))
        return self.holds(name)

    @property
    def can_write_top(self) -> bool:
        """Write on the top folder: what the legacy API's endpoints need (they name no folder)."""
        return self.role in (Role.ADMIN, Role.WRITE) and TOP in self.folders

    def describe_scope(self) -> str:
        if self.role is Role.ADMIN and TOP not in self.folders:
            return "is an admin of " + ", ".join(f"{f}/" for f in self.folders) + " only"
        if self.role is Role.WRITE:
            return "may write under " + ", ".join(
                "the whole tree" if f == TOP else f"{f}/" for f in self.folders
            )
        return f"has the {self.role.value} role"

    def reads_within(self, root: Path, path: Path) -> bool:
        """resolves_within for a `read: own` caller; True for the others."""
        return self.policy.read_all or self.resolves_within(root, path)

    def resolves_within(self, root: Path, path: Path) -> bool:
        """Whether `path` (a spec or configuration file under `root`), symlinks resolved, still
        lies in one of this caller's folders: a link inside team-a's folder must not lead into
        team-b's, nor up to the top folder's configuration. The one check every path the API
        resolves for a caller goes through."""
        if TOP in self.folders:
            return True  # the store itself keeps every path inside the root
        real = resolved_path(path)
        if real is None:
            return False
        return any(lies_in(real, os.path.realpath(root / folder)) for folder in self.folders)


def resolved_path(path: Path) -> str | None:
    """The path the system reaches through `path`, every symlink followed; None when that
    cannot be known (a loop of links, a folder it may not search), so the caller refuses.
    A dangling link resolves to where it points: that is where a write through it lands."""
    try:
        return os.path.realpath(path, strict=True)
    except (FileNotFoundError, NotADirectoryError):
        # Missing (or under a file): every link up to the missing part is still followed.
        return os.path.realpath(path)
    except OSError:
        return None


def lies_in(real: str, real_top: str) -> bool:
    """Whether the resolved path `real` lies in the resolved folder `real_top` (not the folder
    itself: a file is never its own folder)."""
    return real.startswith(real_top.rstrip(os.sep) + os.sep)


ANONYMOUS = Principal(ANONYMOUS_NAME, Role.ADMIN, (TOP,))


@dataclass(frozen=True)
class _Entry:
    digest: bytes
    principal: Principal


@dataclass(frozen=True)
class Tokens:
    """Every accepted token, as hashes. Empty: the API needs no token (ANONYMOUS)."""

    entries: tuple[_Entry, ...] = ()

    @property
    def required(self) -> bool:
        return bool(self.entries)

    def visibility(self) -> Visibility:
        """What each task may see of the others, for the planner (specs.task.visibility): the
        folders of every token that reads only its own, and of every token that writes only
        some folders. A team that commits files by git without a token is held by the same
        line: its folder's tokens are the ones that read its statuses."""
        return visibility_of(entry.principal for entry in self.entries)

    def identify(self, token: bytes) -> Principal | None:
        """The principal `token` belongs to, or None. Every entry is compared, in constant
        time, so the time taken says nothing about which entry (if any) was close."""
        digest = hashlib.sha256(token).digest()
        found: Principal | None = None
        for entry in self.entries:
            if hmac.compare_digest(digest, entry.digest) and found is None:
                found = entry.principal
        return found


def visibility_of(principals: Iterable[Principal]) -> Visibility:
    """Tokens.visibility of these principals."""
    readers: list[tuple[str, ...]] = []
    writers: list[tuple[str, ...]] = []
    for principal in principals:
        if principal.role is not Role.ADMIN and not principal.policy.read_all:
            readers.append(principal.folders)
        if principal.role is not Role.READ and TOP not in principal.folders:
            writers.append(principal.folders)
    return Visibility(tuple(sorted(set(readers))), tuple(sorted(set(writers))))


def parse_tokens_file(data: bytes, file: str) -> tuple[_Entry, ...]:
    """Entries of a team tokens file; AccessError naming the file and entry on any mistake."""
    try:
        check_nesting(data)
        document = yaml.safe_load(data)
    except TooDeep as exc:
        raise AccessError(f"{file}: {exc}") from None
    except yaml.YAMLError as exc:
        raise AccessError(f"{file}: not valid YAML: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("tokens"), list):
        raise AccessError(f"{file}: expected a mapping with a list under `tokens:`")
    if set(document) != {"tokens"}:
        extra = ", ".join(sorted(str(k) for k in document if k != "tokens"))
        raise AccessError(f"{file}: unknown top-level keys: {extra}")
    entries: list[_Entry] = []
    names: set[str] = set()
    digests: set[bytes] = set()
    for index, raw in enumerate(document["tokens"]):
        where = f"{file}: tokens[{index}]"
        entry = _parse_entry(raw, where)
        if entry.principal.name in names:
            raise AccessError(f"{where}: the name {entry.principal.name} is used twice")
        if entry.digest in digests:
            raise AccessError(f"{where}: the same token hash is listed twice")
        names.add(entry.principal.name)
        digests.add(entry.digest)
        entries.append(entry)
    return tuple(entries)


def _parse_entry(raw: Any, where: str) -> _Entry:
    if not isinstance(raw, dict):
        raise AccessError(f"{where}: expected a mapping (name, sha256, role, folders)")
    if "token" in raw:
        raise AccessError(
            f"{where}: plain tokens are not stored here; put its sha256 instead "
            "(`rayqueue token hash`)"
        )
    unknown = set(raw) - _ENTRY_KEYS
    if unknown:
        raise AccessError(f"{where}: unknown keys: {', '.join(sorted(map(str, unknown)))}")
    name, digest, role_text = raw.get("name"), raw.get("sha256"), raw.get("role")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise AccessError(f"{where}: name must be letters, digits, '.', '_', '@' or '-'")
    if not isinstance(digest, str) or not _SHA256.fullmatch(digest.lower()):
        raise AccessError(f"{where} ({name}): sha256 must be 64 hex digits")
    if role_text not in tuple(Role):
        raise AccessError(f"{where} ({name}): role must be read, write or admin")
    role = Role(role_text)
    folders = _folders(raw.get("folders"), role, f"{where} ({name})")
    try:
        policy = parse_policy(raw, role.value, has_folders=bool(folders))
    except PolicyError as exc:
        raise AccessError(f"{where} ({name}): {exc}") from None
    roots = _roots(raw.get("workingDirRoots"), f"{where} ({name})")
    return _Entry(bytes.fromhex(digest), Principal(name, role, folders, policy, roots))


def _roots(raw: Any, where: str) -> tuple[str, ...]:
    """workingDirRoots: absolute folders (see specs/tenancy/runtimepaths.py)."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(r, str) for r in raw):
        raise AccessError(f"{where}: workingDirRoots must be a list of absolute paths")
    for root in raw:
        if not os.path.isabs(root) or "\x00" in root:
            raise AccessError(f"{where}: workingDirRoots entry {root!r} must be an absolute path")
    return tuple(raw)


def _folders(raw: Any, role: Role, where: str) -> tuple[str, ...]:
    if role is Role.ADMIN and raw is None:
        return (TOP,)  # the cluster's admin; with folders, a team's (nested queues)
    if role is Role.READ and raw is None:
        return ()  # reads everything (read: all), or parse_policy refuses read: own
    if not isinstance(raw, list) or not raw:
        raise AccessError(f"{where}: a {role.value} token needs folders: [team-a, ...] (or ['/'])")
    folders = []
    for item in raw:
        if not isinstance(item, str):
            raise AccessError(f"{where}: folders must be strings")
        folder = item if item == TOP else item.strip("/")
        if folder != TOP:
            try:
                validate_name(folder)
            except InvalidName as exc:
                raise AccessError(f"{where}: folder {item!r}: {exc}") from None
            if is_config(folder):
                raise AccessError(f"{where}: folder {item!r}: '_' names are admin-only")
        folders.append(folder)
    return tuple(folders)


def _read_small(path: Path, what: str) -> bytes:
    try:
        if not path.is_file():
            raise AccessError(f"{what} {path} is not a file (does it exist?)")
        status = path.stat()
        if status.st_mode & _LOOSE_MODE:
            raise AccessError(
                f"{what} {path} is open to others (mode {stat.S_IMODE(status.st_mode):04o}): "
                f"only its owner (and at most its group, read-only) may read it. "
                f"Fix it with `chmod 600 {path}`"
            )
        if status.st_size > MAX_TOKENS_FILE_BYTES:
            raise AccessError(f"{what} {path} is larger than 1 MiB")
        return path.read_bytes()
    except OSError as exc:
        raise AccessError(f"cannot read {what} {path}: {exc.strerror}") from None


def token_bits(token: str) -> float:
    """The rough entropy estimate of `token`: the length of its shortest repeating unit
    (`abcabc` is `abc` said twice) times log2 of the number of distinct characters."""
    distinct = len(set(token))
    if distinct < 2:
        return 0.0
    return _period(token) * math.log2(distinct)


def _period(text: str) -> int:
    """The length of the shortest unit of which `text` is a repetition (the last one may be
    cut short): the prefix function of Knuth, Morris and Pratt."""
    border = [0] * len(text)
    for index in range(1, len(text)):
        length = border[index - 1]
        while length and text[index] != text[length]:
            length = border[length - 1]
        if text[index] == text[length]:
            length += 1
        border[index] = length
    return len(text) - border[-1] if text else 0


def token_weakness(token: str) -> str | None:
    """Why `token` could be guessed, or None: shorter than MIN_TOKEN_LENGTH, fewer than
    MIN_TOKEN_DISTINCT distinct characters, or below MIN_TOKEN_BITS by token_bits."""
    if len(token) < MIN_TOKEN_LENGTH:
        return f"is {len(token)} characters long; at least {MIN_TOKEN_LENGTH} are needed"
    distinct = len(set(token))
    if distinct < MIN_TOKEN_DISTINCT:
        return f"uses only {distinct} distinct characters; at least {MIN_TOKEN_DISTINCT} are needed"
    bits = token_bits(token)
    if bits < MIN_TOKEN_BITS:
        return (
            f"is too regular: about {bits:.0f} bits by the estimate (length of its shortest "
            f"repeating part x log2 of its distinct characters); at least {MIN_TOKEN_BITS} "
            "are needed"
        )
    return None


def single_token(settings: Settings, environ: Mapping[str, str]) -> str | None:
    """settings.api_token, else --token-file's content, else $RAYQUEUE_API_TOKEN; AccessError
    for a token that could be guessed (token_weakness)."""
    if settings.api_token:
        token, source = settings.api_token, "the API token"
    elif settings.token_file is not None:
        text = _read_small(settings.token_file, "token file").decode(errors="replace").strip()
        if not text:
            raise AccessError(f"token file {settings.token_file} is empty")
        if any(c.isspace() for c in text):
            raise AccessError(f"token file {settings.token_file} holds more than one word")
        token, source = text, f"the token in {settings.token_file}"
    elif environ.get(TOKEN_ENV):
        token, source = environ[TOKEN_ENV], f"${TOKEN_ENV}"
    else:
        return None
    weakness = token_weakness(token)
    if weakness is not None:
        raise AccessError(
            f"{source} {weakness}, so it cannot be guessed. Make one with: {MAKE_TOKEN}"
        )
    return token


def team_visibility(settings: Settings) -> Visibility:
    """Tokens.visibility of the team tokens file (`--team-tokens`); without one, every task
    sees every other. AccessError if the file is unusable."""
    if settings.team_tokens is None:
        return Visibility()
    data = _read_small(settings.team_tokens, "team tokens file")
    entries = parse_tokens_file(data, str(settings.team_tokens))
    return visibility_of(entry.principal for entry in entries)


def load_tokens(settings: Settings, environ: Mapping[str, str] | None = None) -> Tokens:
    """Every token this process accepts, as hashes; AccessError if a file is unusable."""
    env = os.environ if environ is None else environ
    entries: list[_Entry] = []
    token = single_token(settings, env)
    if token is not None:
        principal = Principal(SINGLE_TOKEN_NAME, Role.ADMIN, (TOP,))
        entries.append(_Entry(hashlib.sha256(token.encode()).digest(), principal))
    if settings.team_tokens is not None:
        data = _read_small(settings.team_tokens, "team tokens file")
        team = parse_tokens_file(data, str(settings.team_tokens))
        if entries and any(e.principal.name == SINGLE_TOKEN_NAME for e in team):
            raise AccessError(f"{settings.team_tokens}: the name {SINGLE_TOKEN_NAME} is reserved")
        entries.extend(team)
    return Tokens(tuple(entries))


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: assume it is reachable from elsewhere


def exposure_problem(settings: Settings, tokens: Tokens) -> str | None:
    """Why this HTTP listener must not start, or None: a non-loopback bind needs a token, and
    so does any wildcard in `--allowed-hosts` ('*', '*.com': a web page under a name the
    wildcard matches could rebind that name to this address and read every task from a
    visitor's browser)."""
    if not settings.api or tokens.required:
        return None
    wildcard = next((host for host in settings.allowed_hosts if "*" in host), None)
    if wildcard is not None:
        return (
            f"refusing to serve the HTTP API with --allowed-hosts '{wildcard}' and no token: a "
            "web page under a name it matches could rebind that name to this address (DNS "
            f"rebinding) and read or change tasks from a visitor's browser. Set {TOKEN_ENV} (or "
            "--token-file PATH, or --team-tokens PATH), or list the exact names clients use: "
            "--allowed-hosts rq.example.com"
        )
    if is_loopback(settings.host):
        return None
    if settings.insecure_no_auth:
        return None
    return (
        f"refusing to serve the HTTP API on {settings.host} without a token: anyone who can "
        "reach that address could run any command on the Ray cluster. Set "
        f"{TOKEN_ENV} (or --token-file PATH, or --team-tokens PATH), or bind to loopback "
        "(--host 127.0.0.1). If a firewall or an authenticating proxy guards this port, "
        "--insecure-no-auth starts it anyway."
    )


def insecure_warning(settings: Settings, tokens: Tokens) -> str | None:
    """The warning logged at every start of an unauthenticated non-loopback listener."""
    if not settings.api or tokens.required or is_loopback(settings.host):
        return None
    return (
        f"the HTTP API listens on {settings.host} WITHOUT A TOKEN (--insecure-no-auth): anyone "
        f"who can reach it can run commands on the Ray cluster. Set {TOKEN_ENV} or "
        "--token-file to require a bearer token."
    )


__all__ = [
    "ANONYMOUS",
    "MIN_TOKEN_BITS",
    "MIN_TOKEN_DISTINCT",
    "MIN_TOKEN_LENGTH",
    "SINGLE_TOKEN_NAME",
    "TOKEN_ENV",
    "TOP",
    "AccessError",
    "Principal",
    "Role",
    "Tokens",
    "exposure_problem",
    "hash_token",
    "insecure_warning",
    "is_config",
    "is_loopback",
    "load_tokens",
    "parse_tokens_file",
    "resolved_path",
    "team_visibility",
    "token_bits",
    "token_weakness",
    "visibility_of",
]
