"""The team queues (`_queues.yaml`): quota, use and counts per queue, as of the loop's last
pass. Read from `_queues.status.yaml`, which only the loop writes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import yaml
from fastapi import APIRouter

from api.deps import SettingsDep
from api.errors import ApiError, NotFound
from specs.queues.config import DEFAULT_QUEUE, config_path, status_path
from specs.service.tasks import TaskService
from specs.settings.process import Settings
from specs.task.quantity import plural

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


class QueueRoom:
    """Creates through the API, one at a time, counted against `maxQueued` until the loop has
    counted them itself. The queue status file says what the last pass counted; a task created
    here since is added to it while it has no status sidecar yet, or was created after that
    file was written. Without this, writes between two passes would all see the same stale count
    and all get in (held on the app: `app.state.queue_room`)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.created: dict[str, float] = {}  # task name -> wall-clock time it was created

    def pending_since(self, status_written: float, has_status: Callable[[str], bool]) -> list[str]:
        """The tasks created here that the last pass's counts do not include; forgets the rest."""
        counted = [
            name for name, at in self.created.items() if at < status_written and has_status(name)
        ]
        for name in counted:
            del self.created[name]
        return list(self.created)


@contextmanager
def queue_room(
    room: QueueRoom, settings: Settings, service: TaskService, name: str
) -> Iterator[None]:
    """Around a write that may create `name`: 429 when its queue (or one it lies in) holds its
    `maxQueued` queued tasks, counting this process's creates the loop has not counted yet."""
    with room.lock:
        if service.read(name) is not None:
            yield  # a replacement: it adds no task
            return
        require_room(settings, name, room, service)
        yield
        if service.read(name) is not None:
            room.created[name] = time.time()


def require_room(
    settings: Settings,
    name: str,
    room: QueueRoom | None = None,
    service: TaskService | None = None,
) -> None:
    """429 if a new task `name` would go to a queue that holds its `maxQueued` queued tasks,
    as of the loop's last pass plus what was created since (a file dropped there instead
    waits as QueueFull)."""
    config = config_path(settings.tasks_dir, settings.queues_path)
    path = status_path(config, settings.status_dir)
    try:
        written = path.stat().st_mtime
        document = yaml.safe_load(path.read_bytes())
    except (OSError, yaml.YAMLError):
        return
    body = document.get("status") if isinstance(document, dict) else None
    entries = body.get("queues") if isinstance(body, dict) else None
    if not isinstance(entries, list):
        return
    named = {e.get("name"): e for e in entries if isinstance(e, dict)}
    recent: list[str] = []
    if room is not None and service is not None:
        store = service.store
        recent = room.pending_since(written, lambda task: store.status_path(task).exists())
    owner: object = _owner(named, name)
    seen: set[str] = set()
    while isinstance(owner, str) and owner not in seen:  # its queue, then those it lies in
        seen.add(owner)
        entry = named.get(owner)
        if not isinstance(entry, dict):
            return
        limit, pending = entry.get("maxQueued"), entry.get("pending", 0)
        if isinstance(limit, int) and isinstance(pending, int):
            pending += sum(1 for task in recent if _within(named, task, owner))
            if pending >= limit:
                raise ApiError(
                    429,
                    f"queue {owner} is full: {plural(pending, 'task')} queued, its maxQueued is "
                    f"{limit}; try again once some have started",
                    headers={"Retry-After": "30"},
                )
        owner = entry.get("parent")


def _owner(named: Mapping[object, Any], name: str) -> object:
    """The deepest queue whose folder holds `name` (the default queue otherwise)."""
    return max(
        (q for q in named if isinstance(q, str) and name.startswith(q + "/")),
        key=len,
        default=DEFAULT_QUEUE,
    )


def _within(named: Mapping[object, Any], task: str, queue: str) -> bool:
    """Whether `task` is counted in `queue`: its own queue is `queue` or lies in it."""
    owner: object = _owner(named, task)
    seen: set[object] = set()
    while isinstance(owner, str) and owner not in seen:
        if owner == queue:
            return True
        seen.add(owner)
        entry = named.get(owner)
        owner = entry.get("parent") if isinstance(entry, dict) else None
    return False


@router.get("")
def list_queues(settings: SettingsDep) -> dict[str, Any]:
    """Every queue: nominal quota, usage, borrowed, lent, decayed usage (`decayedUsage`, CPU-,
    GPU- and byte-seconds), weighted share, pending and admitted counts, and `effective`, what
    it may do once bounded by its parent (its preemption block, borrowing and lending limits,
    and `bounded`: each field its own file asked beyond them); whether the configuration file
    is valid; `fairSharing` (mode, usageHalfLife in seconds). With a census of Ray's jobs,
    each queue's `observed` block (what its live runs declare, hold in Ray and use, a
    parent's including its sub-queues') and `observedAt`, when that census was taken: per
    queue only, as every other figure here."""
    body = queue_status(settings)
    result: dict[str, Any] = {"config": body.get("config"), "items": body.get("queues", [])}
    if body.get("warning"):
        result["warning"] = body["warning"]
    # how past use counts, when it was measured, and since when it has been tracked
    for key in ("fairSharing", "usageAt", "usageSince", "observedAt"):
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
