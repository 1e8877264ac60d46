"""The team queues (`_queues.yaml`): quota, use and counts per queue, as of the loop's last
pass. Read from `_queues.status.yaml`, which only the loop writes."""

from __future__ import annotations

from typing import Any

import yaml
from fastapi import APIRouter

from api.deps import SettingsDep
from api.errors import NotFound
from specs.queues import config_path, status_path
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


@router.get("")
def list_queues(settings: SettingsDep) -> dict[str, Any]:
    """Every queue: nominal quota, usage, borrowed, lent, decayed usage (`decayedUsage`, CPU-,
    GPU- and byte-seconds), weighted share, pending and admitted counts; whether the
    configuration file is valid; `fairSharing` (mode, usageHalfLife in seconds)."""
    body = queue_status(settings)
    result: dict[str, Any] = {"config": body.get("config"), "items": body.get("queues", [])}
    if body.get("warning"):
        result["warning"] = body["warning"]
    for key in ("fairSharing", "usageAt"):  # how past use counts, and when it was measured
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
