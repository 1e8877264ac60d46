"""The forms of a Ray address rayqueue takes (`--address`, `RAY_DASHBOARD_ADDRESS`,
`RAY_ADDRESS`), read without any I/O, so that a value of no form is refused with the other
settings, before anything starts.

rayqueue talks to Ray's job API, which Ray's dashboard serves. Ray's own job client
(`JobSubmissionClient`) takes the dashboard's URL as it is, and reads any other address as the
cluster's bootstrap address, the GCS (`host:port`, or `auto` for the head this machine started
last), whose key-value store records where the dashboard listens. The same forms are taken
here; which one a `host:port` names (a dashboard, or the GCS) is found out by asking it
(reconciler/shell/raycluster/address.py). A Ray Client address (`ray://`) is not one: it needs
a Ray driver in this process, which rayqueue never starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

DEFAULT_DASHBOARD_PORT = 8265
DEFAULT_GCS_PORT = 6379
AUTO = "auto"

WHAT_TO_GIVE = (
    f"give the Ray dashboard's URL (http://HOST:{DEFAULT_DASHBOARD_PORT}), the address of the "
    f"head's GCS (HOST:{DEFAULT_GCS_PORT}), or `{AUTO}` for the Ray head started on this machine"
)


@dataclass(frozen=True)
class DashboardUrl:
    """An http(s) URL: the dashboard itself (a path is kept, for a dashboard behind a proxy)."""

    url: str


@dataclass(frozen=True)
class HostPort:
    """`host:port` without a scheme: Ray's reading is the GCS; a dashboard is taken too."""

    host: str
    port: int

    @property
    def text(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


@dataclass(frozen=True)
class Auto:
    """`auto`: the GCS named in the address file of the head started last on this machine."""


AddressForm = DashboardUrl | HostPort | Auto


def parse_ray_address(text: str) -> AddressForm:
    """The form of a Ray address; ValueError, saying what was given and what to give instead,
    for a value of no form Ray's job client takes, and for a Ray Client address."""
    given = text.strip()
    if not given:
        raise ValueError(f"the Ray address is empty; {WHAT_TO_GIVE}")
    if given == AUTO:
        return Auto()
    if "://" in given:
        scheme = given.split("://", 1)[0].lower()
        if scheme == "ray":
            raise ValueError(
                f"the Ray address {given!r} is a Ray Client address, which runs a Ray driver; "
                f"rayqueue uses Ray's job API instead: {WHAT_TO_GIVE}"
            )
        if scheme not in ("http", "https"):
            raise ValueError(
                f"the Ray address {given!r} has the scheme {scheme}://; {WHAT_TO_GIVE}"
            )
        parts = _split(given)
        if parts is None or not parts.hostname:
            raise ValueError(f"the Ray address {given!r} names no host; {WHAT_TO_GIVE}")
        return DashboardUrl(given.rstrip("/"))
    parts = _split(f"//{given}")
    if parts is None or not parts.hostname or parts.path or parts.query or parts.username:
        raise ValueError(f"the Ray address {given!r} is not host:port; {WHAT_TO_GIVE}")
    if parts.port is None:
        raise ValueError(f"the Ray address {given!r} has no port; {WHAT_TO_GIVE}")
    return HostPort(parts.hostname, parts.port)


def _split(text: str) -> SplitResult | None:
    """urlsplit's parts, None when the port is not a number in range."""
    parts = urlsplit(text)
    try:
        _ = parts.port
    except ValueError:
        return None
    return parts
