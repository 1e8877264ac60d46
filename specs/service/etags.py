"""If-Match and If-None-Match: a spec's etag is the hash of its file's bytes."""

from __future__ import annotations

from specs.service.errors import Conflict
from specs.service.views import SpecFile


def quote_etag(etag: str) -> str:
    return f'"{etag}"'


def etag_matches(header: str, etag: str | None) -> bool:
    """If-Match semantics: `*` matches any existing file; weak or strong, quoted or bare."""
    for raw in header.split(","):
        candidate = raw.strip()
        if candidate == "*":
            return etag is not None
        candidate = candidate.removeprefix("W/").strip('"')
        if etag is not None and candidate == etag:
            return True
    return False


def check_preconditions(
    name: str, current: SpecFile | None, if_match: str | None, if_none_match: str | None
) -> None:
    """Conflict unless the spec `current` (None: there is none) meets the request's If-Match
    and If-None-Match headers (None: not given)."""
    etag = current.etag if current is not None else None
    if if_match is not None and not etag_matches(if_match, etag):
        if current is None:
            raise Conflict(f"If-Match given, but task {name} does not exist")
        raise Conflict(f"task {name} has changed: its hash is {etag}, not {if_match}")
    if if_none_match is not None and etag_matches(if_none_match, etag):
        raise Conflict(f"task {name} already exists")
