"""How a spec and its sidecar are shown: the full object, a list row, and the legacy answer."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from typing import Any

from api.service import SpecFile
from specs.models import Task, TaskStatus
from specs.parse import SpecError
from specs.quantity import format_memory


def jsonable(value: Any) -> Any:
    """YAML can hold dates, bytes and sets; JSON cannot. Anything odd is shown as a string."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    return str(value)


def status_body(status: TaskStatus | None, errors: list[SpecError] | None = None) -> dict[str, Any]:
    """The sidecar's status; for a task the loop has not seen yet, what we can tell now."""
    if status is not None:
        body: dict[str, Any] = status.to_document()["status"]
    elif errors:
        body = {"phase": "Invalid", "reason": "InvalidSpec", "message": str(errors[0])}
    else:
        body = {
            "phase": None,
            "reason": "NotYetReconciled",
            "message": "the reconciler has not seen this task yet",
        }
    if errors:
        body["specErrors"] = [str(e) for e in errors]
    return body


def task_object(spec: SpecFile, status: TaskStatus | None) -> dict[str, Any]:
    """Kubernetes style: the spec as written in the file, plus the status beside it.

    A GET result can be sent back with PUT: `status` is ignored there.
    """
    document = spec.document() if spec.task is not None else None
    if document is None:
        document = {"apiVersion": "rayqueue/v1", "kind": "Task", "spec": None}
    out = jsonable(document)
    metadata = out.get("metadata") if isinstance(out.get("metadata"), dict) else {}
    # metadata.name is the file's stem (the folder is in the URL), so a PUT of this is valid.
    out["metadata"] = {"name": spec.name.rsplit("/", 1)[-1], **metadata}
    out["status"] = status_body(status, spec.errors)
    return out


def resources(task: Task | None) -> dict[str, Any] | None:
    if task is None:
        return None
    r = task.spec.resources
    return {"cpu": r.cpu, "gpu": r.gpu, "memory": format_memory(r.memory)}


def human_age(seconds: float) -> str:
    """kubectl's style: 45s, 12m, 3h, 5d."""
    seconds = max(seconds, 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * (2 if unit != "m" else 1):
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def legacy_state(
    task_id: str, name: str, spec: SpecFile, status: TaskStatus | None
) -> dict[str, Any]:
    """The answer of the old endpoints: the task's id, its spec's knobs and its phase."""
    task = spec.task
    body = status_body(status, spec.errors)
    return {
        "task_id": task_id,
        "task": name,
        "priority": task.spec.priority if task else None,
        "suspend": task.spec.suspend if task else None,
        "phase": body.get("phase"),
        "reason": body.get("reason"),
        "message": body.get("message"),
        "queue_position": body.get("queuePosition"),
        "submission_id": body.get("submissionId"),
    }
