"""The resource API: specs as resources, named by their path under the tasks folder."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from api.authz import (
    Caller,
    audit,
    checks,
    policy_check,
    readable,
    require_read,
    require_write,
    spec_check,
    task_quota,
)
from api.deps import (
    JSON_TYPES,
    YAML_TYPES,
    IfMatch,
    IfNoneMatch,
    MediaType,
    RawBody,
    RayDep,
    ReconcilerDep,
    Service,
    SettingsDep,
    parse_json,
)
from api.errors import ApiError, NotFound, Unprocessable
from api.idclaims import id_check
from api.models import TaskList, TaskRow
from api.ports import Loop
from api.routes.queues import queue_room
from specs.cluster import JobNotFound, TailLimits
from specs.service.arrayviews import array_status
from specs.service.tasks import TaskService, parse_phases, parse_selector, quote_etag, select
from specs.service.views import SpecFile, TaskView, human_age, resources, status_body, task_object
from specs.task import ownership
from specs.task.arrays import element_name, split
from specs.task.ownership import Proof
from specs.yamlio.mergepatch import dump_document

router = APIRouter(prefix="/tasks", tags=["tasks"])

_SPEC_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {"type": "object", "description": "a rayqueue/v1 Task document"}
            },
            "application/yaml": {"schema": {"type": "string", "description": "a Task as YAML"}},
        },
    }
}
_PATCH_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/merge-patch+json": {
                "schema": {"type": "object", "description": "RFC 7386 merge patch"},
                "example": {"spec": {"priority": 7}},
            },
            "application/json": {"schema": {"type": "object"}},
        },
    }
}


# --- helpers ----------------------------------------------------------------------------------


def _places(reconciler: Loop | None) -> Mapping[str, int]:
    """Each waiting task's exact place in its queue, as the loop's last pass computed it."""
    if reconciler is None:
        return {}
    return {
        name: place
        for names in reconciler.state.queue_order.values()
        for place, name in enumerate(names, 1)
    }


def _exact_place(body: dict[str, Any], name: str, places: Mapping[str, int]) -> None:
    """Fill in `queuePosition` where the sidecar shows only a bucket (docs/scheduling.md,
    "Queue positions"); the bucket stays, so a reader sees both."""
    if body.get("queuePositionBucket") is not None and body.get("queuePosition") is None:
        place = places.get(name)
        if place is not None:
            body["queuePosition"] = place


def _object_response(service: TaskService, spec: SpecFile, status_code: int = 200) -> JSONResponse:
    body = task_object(spec, service.status(spec.name))
    return JSONResponse(body, status_code, headers={"ETag": quote_etag(spec.etag)})


def _known_labels(view: TaskView) -> dict[str, str]:
    # While a file is broken the loop keeps its last good spec; so does the listing.
    task = view.known
    return dict(task.metadata.labels) if task is not None else {}


# --- routes -----------------------------------------------------------------------------------


@router.get("", response_model=TaskList)
def list_tasks(
    service: Service,
    caller: Caller,
    reconciler: ReconcilerDep,
    phase: Annotated[
        str | None, Query(description="comma-separated phases, e.g. Queued,Running")
    ] = None,
    labelSelector: Annotated[  # Kubernetes' parameter name
        str | None, Query(description="key=value,key2!=value2,key3,!key4")
    ] = None,
    queue: Annotated[
        str | None, Query(description="only the tasks of this team queue, e.g. team-a")
    ] = None,
) -> TaskList:
    """Every spec with its status: phase, priority, queue, queue position, resources and age."""
    phases = parse_phases(phase or "")  # QueryError: 400
    selector = parse_selector(labelSelector or "")
    views = select(service.views(), selector, phases, labels=_known_labels)
    if queue is not None:
        views = [v for v in views if v.status is not None and v.status.status.queue == queue]
    views = [v for v in views if caller.can_read(v.name)]  # read: own hides other folders
    now = service.clock()
    rows = []
    places = _places(reconciler)
    for view in sorted(views, key=lambda v: v.name):
        task = view.known
        body = status_body(view.status, [view.error] if view.error is not None else [])
        _exact_place(body, view.name, places)
        age = view.age_seconds(now)
        age = age if age is not None else 0.0
        rows.append(
            TaskRow(
                name=view.name,
                phase=body.get("phase"),
                reason=body.get("reason"),
                message=body.get("message"),
                overusing=view.overusing,
                priority=task.spec.priority if task is not None else None,
                queue=body.get("queue"),
                position=body.get("queuePosition"),
                resources=resources(task),
                suspend=task.spec.suspend if task is not None else None,
                labels=_known_labels(view),
                submissionId=body.get("submissionId"),
                age=human_age(age),
                ageSeconds=round(age, 3),
            )
        )
    return TaskList(items=rows)


@router.get("/{name:path}/logs", response_class=PlainTextResponse)
def task_logs(
    name: str,
    service: Service,
    ray: RayDep,
    caller: Caller,
    settings: SettingsDep,
    tail: Annotated[int | None, Query(ge=1, le=100_000, description="the last N lines")] = None,
) -> Response:
    """The Ray log of the task's current or last run; 404 if it never ran. Served only when
    Ray's job under the id its status names is that run by our own record (the job's metadata:
    specs/task/ownership.py): the status file is one its team can write."""
    element = split(name)  # NAME[i], an element of a task array: its array's file decides
    owner = element[0] if element is not None else name
    visible = readable(caller, service, owner)  # read: own: another folder's task is "no task"
    spec = service.read(name) if visible and element is None else None
    status = service.status(name) if visible else None
    if spec is None and status is None:
        # A task whose own name ends in "/logs" is still reachable here.
        inner = f"{name}/logs"
        found = service.read(inner) if readable(caller, service, inner) else None
        if found is not None:
            return _object_response(service, found)
        raise NotFound(f"no task {name}")
    body = status.status if status is not None else None
    submission_id = body.submission_id if body is not None else None
    if body is None or not submission_id:
        raise NotFound(f"task {name} has not run yet")
    if ray is None:
        raise ApiError(503, "no Ray connection in this process")
    explicit = spec.task.spec.submission_id if spec is not None and spec.task else None
    try:
        job = ray.job_info(submission_id)
        proof = ownership.prove(name, body, explicit, job, settings.resolved_queue_id)
        if proof is not Proof.OURS:
            # Another's job, whatever the file says: for this task, Ray has none (the same
            # answer as for an absent job, so the route tells nothing of other jobs).
            raise JobNotFound(submission_id)
        if tail is None:
            text = ray.logs(submission_id)
        else:  # only the log's end is read, never the whole log
            text = ray.log_tail(submission_id, TailLimits.requested(tail))
            text += "\n" if text else ""
    except JobNotFound:
        raise NotFound(f"Ray has no job {submission_id} (any more)") from None
    return PlainTextResponse(text)


@router.get("/{name:path}/elements")
def array_elements(name: str, service: Service, caller: Caller) -> Response:
    """The elements of a task array, in index order: name, index, phase, reason, message,
    run, submission id and exit code of each."""
    visible = readable(caller, service, name)
    spec = service.read(name) if visible else None
    if spec is None:
        inner = f"{name}/elements"  # a task whose own name ends in "/elements"
        found = service.read(inner) if readable(caller, service, inner) else None
        if found is not None:
            return _object_response(service, found)
        raise NotFound(f"no task {name}")
    if spec.task is None or spec.task.spec.array is None:
        raise NotFound(f"task {name} is not a task array")
    statuses = service.elements(name)
    items = []
    for index in range(spec.task.spec.array.size):
        body = statuses[index].status if index in statuses else None
        items.append(
            {
                "name": element_name(name, index),
                "index": index,
                "phase": body.phase.value if body is not None else None,
                "reason": body.reason if body is not None else None,
                "message": body.message if body is not None else None,
                "run": body.run if body is not None else 0,
                "submissionId": body.submission_id if body is not None else None,
                "exitCode": body.exit_code if body is not None else None,
            }
        )
    return JSONResponse({"name": name, "items": items})


@router.get("/{name:path}")
def get_task(name: str, service: Service, caller: Caller, reconciler: ReconcilerDep) -> Response:
    """The spec as written, and its status. The ETag header is the file's hash (for If-Match).
    A task array's status sums up its elements (`/tasks/NAME/elements` lists them). A task
    beyond its queue's exact places (a `queuePositionBucket` in its sidecar) gets its exact
    `queuePosition` from the loop's last pass."""
    require_read(caller, service, name)
    spec = service.require(name)
    if spec.task is not None and spec.task.spec.array is not None:
        body = task_object(spec, None)
        body["status"] = array_status(service.elements(name), spec.task.spec.array.size)
        return JSONResponse(body, headers={"ETag": quote_etag(spec.etag)})
    body = task_object(spec, service.status(spec.name))
    _exact_place(body["status"], spec.name, _places(reconciler))
    return JSONResponse(body, headers={"ETag": quote_etag(spec.etag)})


@router.put("/{name:path}", openapi_extra=_SPEC_BODY)
def put_task(
    name: str,
    request: Request,
    service: Service,
    caller: Caller,
    body: RawBody,
    kind: MediaType,
    reconciler: ReconcilerDep,
    settings: SettingsDep,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatch = None,
) -> Response:
    """Create (201) or replace (200) a spec; JSON, or YAML with Content-Type application/yaml.

    Validated with the reconciler's own parser before anything is written (422 names the
    field). A YAML body is written byte for byte, comments included.
    """
    require_write(request, caller, service, name)  # 400 for a bad name, 403 if not ours
    from_json = kind in JSON_TYPES or kind.endswith("+json")
    if from_json:
        document = parse_json(body)
        if not isinstance(document, dict):
            raise Unprocessable("the JSON body must be an object (a Task document)")
        document.pop("status", None)  # what GET returns can be sent back as is
        data = dump_document(document).encode()
    elif kind in YAML_TYPES or kind in ("", "text/plain"):
        data = body
    else:
        raise ApiError(415, f"send application/json or application/yaml, not {kind}")
    check = checks(
        policy_check(caller),
        id_check(service, caller, reconciler, settings.resolved_queue_id),
    )
    # 429 when its queue holds maxQueued tasks, counting creates since the loop's last pass
    room = queue_room(request.app.state.queue_room, settings, service, name)
    with room, task_quota(request, caller, service, name):
        spec, created = service.put(
            name,
            data,
            from_json=from_json,
            if_match=if_match,
            if_none_match=if_none_match,
            author=caller.name,
            check=check,
            paths=spec_check(request, caller),
        )
    audit(request, caller, "created" if created else "replaced", name)
    return _object_response(service, spec, 201 if created else 200)


@router.patch("/{name:path}", openapi_extra=_PATCH_BODY)
def patch_task(
    name: str,
    request: Request,
    service: Service,
    caller: Caller,
    body: RawBody,
    kind: MediaType,
    reconciler: ReconcilerDep,
    settings: SettingsDep,
    if_match: IfMatch = None,
) -> Response:
    """JSON merge patch (RFC 7386) of the spec document, e.g. `{"spec": {"priority": 7}}`.

    Only the values the patch changes are edited in the file; comments stay. `null` removes
    a field. The result is validated before it is written.
    """
    require_write(request, caller, service, name)
    if kind in YAML_TYPES:
        raise ApiError(415, "send a JSON merge patch (application/merge-patch+json)")
    if kind and kind not in JSON_TYPES and not kind.endswith("+json"):
        raise ApiError(415, f"send application/merge-patch+json, not {kind}")
    patch: Any = parse_json(body)
    if not isinstance(patch, dict):
        raise Unprocessable("a merge patch must be a JSON object")
    patch.pop("status", None)  # status belongs to the reconciler
    check = checks(
        policy_check(caller),
        id_check(service, caller, reconciler, settings.resolved_queue_id),
    )
    spec, changed = service.patch(
        name,
        patch,
        if_match=if_match,
        author=caller.name,
        check=check,
        paths=spec_check(request, caller),
    )
    audit(request, caller, "patched" if changed else "patched (no change)", name)
    return _object_response(service, spec)


@router.delete("/{name:path}")
def delete_task(
    name: str, request: Request, service: Service, caller: Caller, if_match: IfMatch = None
) -> dict[str, Any]:
    """Remove the spec. The reconciler then stops its job, if it runs, and drops the sidecar."""
    require_write(request, caller, service, name)
    service.delete(name, if_match=if_match)
    audit(request, caller, "deleted", name)
    return {"name": name, "deleted": True, "status": status_body(service.status(name), [])}


__all__ = ["router"]
