"""Where Ray's dashboard is, from a Ray address in any form Ray's job client takes: the one
resolution every entry uses (serve, plan, describe, logs, and the adapter when Ray did not
answer at start).

Ray's `JobSubmissionClient` (ray.dashboard.utils.get_address_for_submission_client) takes an
http(s) URL as the dashboard's, and reads anything else as the GCS's address (`auto`: the one
in `<ray temp dir>/ray_current_cluster`, written by `ray start`), whose key-value store holds
the dashboard's `host:port` under the key `dashboard` of the namespace `dashboard`. rayqueue
does the same, with two differences: a `host:port` is first asked whether it is a dashboard
(so a dashboard's own `host:port` is taken too), and every step is timed, where Ray's helper
retries for long and leaves its GCS connection set up process-wide.

What answers is checked: the dashboard must answer `/api/version` with Ray's version. Something
that answers otherwise is refused (AddressRefused: fatal at start, exit 2), naming what was
given, what answered and what to give instead; nothing answering at all is NotAnswering, which
`serve` outlives (Ray may come later).
"""

from __future__ import annotations

import json
import os
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from specs.settings.rayaddress import (
    WHAT_TO_GIVE,
    Auto,
    DashboardUrl,
    HostPort,
    parse_ray_address,
)

# ray._private.ray_constants.DASHBOARD_ADDRESS and KV_NAMESPACE_DASHBOARD.
_DASHBOARD_KEY = b"dashboard"
_DASHBOARD_NAMESPACE = b"dashboard"
_ADDRESS_FILE = "ray_current_cluster"  # ray._common.utils.get_ray_address_file
_ANSWER_BYTES = 65536  # of /api/version's answer: Ray's is a few hundred bytes
_SHOWN_BYTES = 60  # of an answer that is not the dashboard's, in the refusal


class AddressRefused(Exception):
    """The address answers, but not as Ray does, or names nothing to ask: a start-up error."""


class NotAnswering(Exception):
    """Nothing answers at the address (refused, timed out, unknown host): Ray may come later."""


@dataclass(frozen=True)
class Located:
    """Where the dashboard is, and how it was found."""

    dashboard: str  # http(s)://host:port, with the given URL's path if any
    how: str  # one line for the log: the steps from the address given to the dashboard
    gcs: str | None = None  # host:port of the GCS the dashboard was found through


@dataclass(frozen=True)
class _Answer:
    """What a GET of /api/version got back: an HTTP answer, or bytes that are not HTTP."""

    http: bool
    status: int
    body: bytes


def locate(
    given: str,
    *,
    timeout_seconds: float = 5.0,
    environ: Mapping[str, str] | None = None,
) -> Located:
    """The dashboard the Ray address `given` leads to. ValueError for a value of no form
    (parse_ray_address), AddressRefused, NotAnswering."""
    form = parse_ray_address(given)
    if isinstance(form, DashboardUrl):
        _check_dashboard(form.url, given, timeout_seconds)
        return Located(form.url, f"the Ray dashboard at {form.url}")
    if isinstance(form, Auto):
        path = address_file(os.environ if environ is None else environ)
        gcs = _read_address_file(path)
        located = _through_gcs(gcs, given, timeout_seconds)
        return Located(located.dashboard, f"auto: {path} names the GCS {gcs}; {located.how}", gcs)
    assert isinstance(form, HostPort)
    url = f"http://{form.text}"
    answer = _get_version(url, timeout_seconds)
    if _is_dashboard(answer):
        return Located(url, f"the Ray dashboard at {url}")
    if answer.http:
        raise AddressRefused(
            f"the Ray address {given!r} answers HTTP, but not as a Ray dashboard "
            f"({_described(answer)}); {WHAT_TO_GIVE}"
        )
    # Bytes that are not HTTP/1: the HTTP/2 frames a gRPC server such as Ray's GCS sends.
    return _through_gcs(form.text, given, timeout_seconds)


def address_file(environ: Mapping[str, str]) -> Path:
    """`<temp>/ray/ray_current_cluster`, where `ray start` records the GCS of the head it
    started last, the temp folder chosen as Ray chooses it (get_default_system_temp_dir)."""
    root = environ.get("RAY_TMPDIR") or environ.get("TMPDIR") or "/tmp"
    return Path(root) / "ray" / _ADDRESS_FILE


def _read_address_file(path: Path) -> str:
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        raise AddressRefused(
            f"the Ray address 'auto' finds no Ray head started on this machine ({path} does "
            f"not exist; `ray start --head` writes it); {WHAT_TO_GIVE}"
        ) from None
    except OSError as exc:
        raise AddressRefused(f"the Ray address 'auto': cannot read {path}: {exc}") from None
    try:
        form = parse_ray_address(text)
    except ValueError:
        form = None
    if not isinstance(form, HostPort):
        raise AddressRefused(
            f"the Ray address 'auto': {path} holds {text[:80]!r}, not a GCS host:port; "
            f"{WHAT_TO_GIVE}"
        )
    return form.text


def _through_gcs(gcs: str, given: str, timeout_seconds: float) -> Located:
    """The dashboard the GCS at `gcs` records, checked."""
    recorded = dashboard_in_gcs(gcs, given, timeout_seconds)
    url = f"http://{recorded}"
    _check_dashboard(url, given, timeout_seconds, via=f"the GCS at {gcs} records {recorded}")
    return Located(url, f"the GCS at {gcs} records the Ray dashboard at {url}", gcs)


def dashboard_in_gcs(gcs: str, given: str, timeout_seconds: float) -> str:
    """The dashboard's host:port as the GCS at `gcs` records it. Called only once `gcs` has
    answered as a gRPC server: Ray's client, made for a GCS, waits long for one that is not."""
    # Imported here: importing Ray takes a while, and only this form needs it.
    from ray._raylet import GcsClient  # type: ignore[attr-defined]

    try:
        client = GcsClient(address=gcs)
        value = client.internal_kv_get(
            _DASHBOARD_KEY, _DASHBOARD_NAMESPACE, timeout=timeout_seconds
        )
    except Exception as exc:
        raise AddressRefused(
            f"the Ray address {given!r}: {gcs} answers, but neither as a Ray dashboard nor as "
            f"a Ray GCS ({type(exc).__name__}: {str(exc)[:200]}); {WHAT_TO_GIVE}"
        ) from exc
    if not value:
        raise AddressRefused(
            f"the Ray address {given!r}: the GCS at {gcs} records no dashboard (was the head "
            "started with --include-dashboard false?); rayqueue needs the dashboard's job API"
        )
    return bytes(value).decode(errors="replace").strip()


def _check_dashboard(url: str, given: str, timeout_seconds: float, via: str = "") -> None:
    answer = _get_version(url, timeout_seconds, via=via)
    if not _is_dashboard(answer) and answer.status not in (401, 403):
        # 401 and 403: a dashboard behind a proxy that wants credentials; the adapter's own
        # requests say so, as they would for a dashboard that later asks for them.
        where = f" ({via})" if via else ""
        raise AddressRefused(
            f"the Ray address {given!r}{where} answers, but not as a Ray dashboard "
            f"({_described(answer)}); {WHAT_TO_GIVE}"
        )


def _is_dashboard(answer: _Answer) -> bool:
    if not answer.http or answer.status != 200:
        return False
    try:
        document = json.loads(answer.body)
    except ValueError:
        return False
    return isinstance(document, dict) and "ray_version" in document


def _described(answer: _Answer) -> str:
    start = answer.body[:_SHOWN_BYTES]
    if not answer.http:
        return (
            f"its answer is not HTTP: {start!r}... (a gRPC server such as Ray's GCS answers "
            "this way)"
        )
    if answer.status != 200:
        return f"GET /api/version: HTTP {answer.status} {start!r}"
    return f"GET /api/version: HTTP 200 without Ray's version, {start!r}"


def _get_version(url: str, timeout_seconds: float, via: str = "") -> _Answer:
    """GET <url>/api/version on a connection of its own, read to its close (Connection:
    close); NotAnswering when nothing answers."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    where = f"{url} ({via})" if via else url
    try:
        sock = socket.create_connection((host, port), timeout=timeout_seconds)
    except OSError as exc:
        raise NotAnswering(f"nothing answers at {where}: {exc}") from exc
    try:
        if parts.scheme == "https":
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
        target = parts.path.rstrip("/") + "/api/version"
        request = (
            f"GET {target} HTTP/1.1\r\nHost: {parts.netloc.rpartition('@')[2]}\r\n"
            "Accept: application/json\r\nConnection: close\r\n\r\n"
        )
        sock.sendall(request.encode())
        data = b""
        while len(data) < _ANSWER_BYTES:
            try:
                chunk = sock.recv(_ANSWER_BYTES)
            except OSError:
                break  # a reset after the answer (a gRPC server's GOAWAY): judge what came
            if not chunk:
                break
            data += chunk
    except OSError as exc:
        raise NotAnswering(f"nothing answers at {where}: {exc}") from exc
    finally:
        sock.close()
    if not data:
        raise NotAnswering(f"{where} closed the connection without an answer")
    return _parsed(data)


def _parsed(data: bytes) -> _Answer:
    if not data.startswith(b"HTTP/1."):
        return _Answer(False, 0, data)
    head, _, body = data.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].split()
    try:
        status = int(status_line[1])
    except (IndexError, ValueError):
        return _Answer(False, 0, data)
    headers = head.lower()
    if b"transfer-encoding: chunked" in headers:
        body = _unchunked(body)
    return _Answer(True, status, body)


def _unchunked(body: bytes) -> bytes:
    out = b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        try:
            size = int(size_line.split(b";")[0], 16)
        except ValueError:
            break
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2 :]
    return out
