"""The team queues (`_queues.yaml`): quota, use and counts per queue, as of the loop's last
pass. Read from `_queues.status.yaml`, which only the loop writes."""

from __future__ import annotations

from typing import Any

import yaml
from fastapi import APIRouter

from api.deps import SettingsDep
from api.errors import ApiError, NotFound
from specs.queues import DEFAULT_QUEUE, config_path, status_path
from specs.settings import Settings

router = APIRouter(prefix="/queues", tags=["queues"])


def queue_status(settings: Settings) -> dict[str, Any]:
    """The status document's body; 404 when no queues are configured or none are known yet."""
    config = config_path(settings.tasks_dir, settings.queues_path)
    path = status_path(config, settings.status_dir)
    try:
        document = yaml.safe_load(path.read_bytes())
    except (OSError, yaml.YAMLError):
        document = None
    body = document.get("status") if isinstance(document, dict) else None
    if not isinstance(body, dict):
        if not config.exists():
            raise NotFound(f"no queues are configured: there is no {config.name}")
        raise NotFound("the queues have no status yet: the loop has not completed a pass")
    return body


def require_room(settings: Settings, name: str) -> None:
    """429 if a new task `name` would go to a queue that holds its `maxQueued` queued tasks,
    as of the loop's last pass (a file dropped there instead waits as QueueFull)."""
    config = config_path(settings.tasks_dir, settings.queues_path)
    try:
        document = yaml.safe_load(status_path(config, settings.status_dir).read_bytes())
    except (OSError, yaml.YAMLError):
        return
    body = document.get("status") if isinstance(document, dict) else None
    entries = body.get("queues") if isinstance(body, dict) else None
    if not isinstance(entries, list):
        return
    named = {e.get("name"): e for e in entries if isinstance(e, dict)}
    owner: object = max(
        (q for q in named if isinstance(q, str) and name.startswith(q + "/")),
        key=len,
        default=DEFAULT_QUEUE,
    )
    seen: set[str] = set()
    while isinstance(owner, str) and owner not in seen:  # its queue, then those it lies in
        seen.add(owner)
        entry = named.get(owner)
        if not isinstance(entry, dict):
            return
        limit, pending = entry.get("maxQueued"), entry.get("pending", 0)
        if isinstance(limit, int) and isinstance(pending, int) and pending >= limit:
            raise ApiError(
                429,
                f"queue {owner} is full: {pending} tasks queued, its maxQueued is {limit}; "
                "try again once some have started",
                headers={"Retry-After": "30"},
            )
        owner = entry.get("parent")


@router.get("")
def list_queues(settings: SettingsDep) -> dict[str, Any]:
    """Every queue: nominal quota, usage, borrowed, lent, decayed usage (`decayedUsage`, CPU-,
    GPU- and byte-seconds), weighted share, pending and admitted counts; whether the
    configuration file is valid; `fairSharing` (mode, usageHalfLife in seconds)."""
    body = queue_status(settings)
    result: dict[str, Any] = {"config": body.get("config"), "items": body.get("queues", [])}
    if body.get("warning"):
        result["warning"] = body["warning"]
    # how past use counts, when it was measured, and since when it has been tracked
    for key in ("fairSharing", "usageAt", "usageSince"):
        if key in body:
            result[key] = body[key]
    return result


@router.get("/{name:path}")
def get_queue(name: str, settings: SettingsDep) -> dict[str, Any]:
    """One queue by name (`team-a`, `org/team-c`, or `default`)."""
    for entry in queue_status(settings).get("queues", []):
        if isinstance(entry, dict) and entry.get("name") == name:
            return entry
    raise NotFound(f"no queue named {name!r}")
