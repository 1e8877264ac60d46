"""The legacy API's endpoints, word for word. They only write spec files.

POST /add_task writes a new spec whose first run's Ray submission id is the legacy task id;
/change_task_priority and /cancel_task edit that spec (priority, or suspend: true).
"""

from __future__ import annotations

import re
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from api.authz import (
    Caller,
    audit,
    checks,
    policy_check,
    require_top,
    require_write,
    spec_check,
    task_quota,
)
from api.deps import LegacyParams, ReconcilerDep, Service, SettingsDep
from api.errors import BadRequest, NotFound
from api.idclaims import id_check
from api.models import (
    AddTaskRequest,
    AddTaskResponse,
    ChangePriorityRequest,
    LegacyTaskState,
    TaskIdRequest,
)
from api.ports import Loop
from api.views import legacy_state
from specs.folder.store import MAX_NAME_LENGTH, InvalidName, validate_name
from specs.service.tasks import LEGACY_TASK_ID, TaskService
from specs.task import submission_ids
from specs.task.models import API_VERSION
from specs.task.quantity import GIB, format_memory, human_memory
from specs.yamlio.mergepatch import dump_document

router = APIRouter(tags=["legacy (old scheduler API)"])

LEGACY_LABEL = "rayqueue/api"
LEGACY_NAME = "rayqueue/legacyName"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_SUBMISSION_ID = submission_ids.MAX_LENGTH  # specs.task.models.TaskSpec.submission_id


def file_name_for(task_id: str) -> str:
    """The spec's task name: the id itself when it is a valid name, else a cleaned-up form.

    Legacy names may hold spaces or other characters a file name should not; the uuid at the end
    keeps cleaned names unique.
    """
    try:
        return validate_name(task_id)
    except InvalidName:
        pass
    cleaned = _UNSAFE.sub("-", task_id).strip("-.") or "task"
    if len(cleaned) > MAX_NAME_LENGTH:
        cleaned = cleaned[: MAX_NAME_LENGTH - 37] + "-" + cleaned[-36:]  # keep the uuid
    return cleaned.removesuffix(".status")


def _check_capacity(body: AddTaskRequest, reconciler: Loop | None) -> None:
    """The legacy API's rejections: nothing requested, or more than the whole cluster has."""
    if body.cpu == 0 and body.gpu == 0 and body.memory == 0:
        raise BadRequest("task must request at least one resource")
    capacity = reconciler.state.capacity if reconciler is not None else None
    if capacity is None:
        return  # not seen yet: accept; the loop marks it Unschedulable if it never fits
    if body.cpu > capacity.cpu:
        raise BadRequest(
            f"task requests {body.cpu} cpu, more than the whole cluster has ({capacity.cpu:g} cpu)"
        )
    if body.gpu > capacity.gpu:
        raise BadRequest(
            f"task requests {body.gpu} gpu, more than the whole cluster has ({capacity.gpu:g} gpu)"
        )
    if body.memory * GIB > capacity.memory:
        raise BadRequest(
            f"task requests {body.memory} GB memory, more than the whole cluster has "
            f"({human_memory(capacity.memory)})"
        )


def submission_id_for(task_id: str) -> str:
    """The first run's Ray submission id: the legacy id itself, unless the name in it holds
    characters a submission id may not (spaces, '%', accents): then a cleaned form, and the
    legacy id is kept in the annotation the legacy endpoints look tasks up by."""
    return task_id if submission_ids.problem(task_id) is None else submission_ids.cleaned(task_id)


def _spec_document(body: AddTaskRequest, task_id: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"entrypoint": body.entrypoint}
    if body.runtime_env:
        spec["runtimeEnv"] = body.runtime_env
    spec |= {
        "priority": body.priority,
        "resources": {
            "cpu": body.cpu,
            "gpu": body.gpu,
            "memory": format_memory(body.memory * GIB),
        },
        "timeoutSeconds": body.timeout,
        "submissionId": submission_id_for(task_id),
    }
    annotations = {LEGACY_NAME: body.name}
    if spec["submissionId"] != task_id:
        annotations[LEGACY_TASK_ID] = task_id
    return {
        "apiVersion": API_VERSION,
        "kind": "Task",
        "metadata": {"labels": {LEGACY_LABEL: "legacy"}, "annotations": annotations},
        "spec": spec,
    }


@router.post("/add_task", response_model=AddTaskResponse)
def add_task(
    body: AddTaskRequest,
    request: Request,
    service: Service,
    reconciler: ReconcilerDep,
    settings: SettingsDep,
    caller: Caller,
) -> AddTaskResponse:
    """Queue a task (legacy body). Writes a spec file; the reconciler submits it in its turn."""
    require_top(request, caller)
    _check_capacity(body, reconciler)
    task_id = (
        f"mlumina-{body.name}-priority-{body.priority}-{body.cpu}cpu-{body.gpu}gpu-"
        f"{body.memory}memory-{uuid.uuid4()}"
    )
    if len(task_id) > _MAX_SUBMISSION_ID:
        too_long = len(task_id) - _MAX_SUBMISSION_ID
        raise RequestValidationError(
            [
                {
                    "loc": ("body", "name"),
                    "msg": f"name is {too_long} characters too long for a task id",
                    "type": "value_error",
                }
            ]
        )
    name = file_name_for(task_id)
    header = f"# Created by POST /add_task (the old scheduler API). Task id: {task_id}\n"
    data = (header + dump_document(_spec_document(body, task_id))).encode()
    check = checks(
        policy_check(caller),
        id_check(service, caller, reconciler, settings.resolved_queue_id),
    )
    with task_quota(request, caller, service, name):
        service.create(
            name, data, author=caller.name, check=check, paths=spec_check(request, caller)
        )
    audit(request, caller, "created", name)
    return AddTaskResponse(task_id=task_id, task=name)


def _validated(model: type[BaseModel], values: dict[str, Any]) -> Any:
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_context=False)
        raise RequestValidationError(errors) from None


def _lookup(service: TaskService, task_id: str) -> str:
    try:
        name = service.find_by_task_id(task_id, file_name_for(task_id))
    except InvalidName:
        name = None
    if name is None:
        raise NotFound(f"no task with id {task_id}")
    return name


def _legacy_body(model: type[BaseModel]) -> dict[str, Any]:
    # The handlers read the body themselves (JSON or query); this documents it in OpenAPI.
    return {
        "requestBody": {
            "required": False,
            "content": {"application/json": {"schema": model.model_json_schema()}},
        }
    }


@router.post(
    "/change_task_priority",
    response_model=LegacyTaskState,
    openapi_extra=_legacy_body(ChangePriorityRequest),
)
def change_task_priority(
    request: Request,
    service: Service,
    caller: Caller,
    params: LegacyParams,
    task_id: Annotated[str | None, Query(description="or in the JSON body")] = None,
    priority: Annotated[int | None, Query(ge=0, le=9, description="or in the JSON body")] = None,
) -> LegacyTaskState:
    """Set the priority of a task by its id. Only `spec.priority` changes in the file."""
    del task_id, priority  # documented here; read (query or body) through `params`
    require_top(request, caller)
    body: ChangePriorityRequest = _validated(ChangePriorityRequest, params)
    name = _lookup(service, body.task_id)
    require_write(request, caller, service, name)  # a symlink, or configuration
    spec, _ = service.patch(
        name,
        {"spec": {"priority": body.priority}},
        author=caller.name,
        check=policy_check(caller),
    )
    audit(request, caller, "set priority of", name)
    return LegacyTaskState(**legacy_state(body.task_id, name, spec, service.status(name)))


@router.post(
    "/cancel_task", response_model=LegacyTaskState, openapi_extra=_legacy_body(TaskIdRequest)
)
def cancel_task(
    request: Request,
    service: Service,
    caller: Caller,
    params: LegacyParams,
    task_id: Annotated[str | None, Query(description="or in the JSON body")] = None,
) -> LegacyTaskState:
    """Cancel a task by its id: sets `spec.suspend: true`. Queued never runs; running stops."""
    del task_id
    require_top(request, caller)
    body: TaskIdRequest = _validated(TaskIdRequest, params)
    name = _lookup(service, body.task_id)
    require_write(request, caller, service, name)  # a symlink, or configuration
    spec, _ = service.patch(
        name, {"spec": {"suspend": True}}, author=caller.name, check=policy_check(caller)
    )
    audit(request, caller, "cancelled", name)
    return LegacyTaskState(**legacy_state(body.task_id, name, spec, service.status(name)))
