"""Authorization: which caller may write which task, and the audit line of every write.

The caller (a specs.tenancy.access.Principal) is what TokenAuth found in the request's bearer token;
without tokens configured, everyone is the anonymous admin (loopback only, see
specs.tenancy.access.exposure_problem). Names are checked after specs.folder.store.validate_name, so
`..`, empty segments and URL-encoded tricks are refused as names before any prefix test, and the
spec's path is resolved so a symlink cannot carry a team's write into another folder.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

from fastapi import Depends, Request

from api.errors import ApiError, NotFound
from api.security import PRINCIPAL_KEY
from specs.service.tasks import Check, TaskService, WriterCheck
from specs.task.records import Task
from specs.tenancy.access import ANONYMOUS, Principal, is_config
from specs.tenancy.policy import UNRESTRICTED, spec_violation, task_limit_violation
from specs.tenancy.runtimepaths import RuntimePaths

audit_log = logging.getLogger("rayqueue.audit")


class Forbidden(ApiError):
    def __init__(self, detail: str) -> None:
        super().__init__(403, detail)


def get_principal(request: Request) -> Principal:
    principal = request.scope.get(PRINCIPAL_KEY)
    if isinstance(principal, Principal):
        return principal
    if request.app.state.tokens_required:
        # Only the unauthenticated probes get here without a caller; they write nothing.
        raise Forbidden("this route needs a token")
    return ANONYMOUS


Caller = Annotated[Principal, Depends(get_principal)]


def refuse(request: Request, principal: Principal, target: str, why: str) -> Forbidden:
    # The audit line is written by api.frontdoor.FrontDoor, once for every 401 and 403.
    del request
    return Forbidden(f"token {principal.name} may not change {target}: it {why}")


def require_write(request: Request, principal: Principal, service: TaskService, name: str) -> None:
    """403 unless `principal` may write the task `name` (400 first if the name is invalid)."""
    path = service.store.spec_path(name)  # InvalidName (400): '..', '//', hidden, outside
    if not principal.can_write(name):
        raise refuse(request, principal, name, principal.describe_scope())
    require_within(request, principal, service, name, path)


def require_within(
    request: Request, principal: Principal, service: TaskService, name: str, path: Path
) -> None:
    """403 unless `path`, the file `name` names, lies in one of the caller's folders once its
    symlinks are resolved: the one check of every path the API resolves for a caller."""
    if not principal.resolves_within(service.store.root, path):
        raise refuse(request, principal, name, "resolves (through a symlink) outside its folders")


def spec_check(request: Request, principal: Principal) -> WriterCheck | None:
    """What `principal` may not put in a spec it writes: runtimeEnv local paths outside its
    roots (specs/tenancy/runtimepaths.py; 403 naming the field). None when confinement is off."""
    paths: RuntimePaths = request.app.state.runtime_paths
    return paths.writer_check(principal)


def require_top(request: Request, principal: Principal) -> None:
    """The legacy API names no folder: it needs write on the whole tree."""
    if not principal.can_write_top:
        raise refuse(
            request,
            principal,
            "tasks through the old API",
            f"needs write on the top folder ('/') or admin; it {principal.describe_scope()}",
        )


def deny(principal: Principal, why: str) -> Forbidden:
    """403 for a write the token's policy forbids; `why` starts with "may not". The front door
    (api.frontdoor) writes the audit line, as for every 403."""
    return Forbidden(f"token {principal.name} {why}")


def policy_check(principal: Principal) -> Check | None:
    """The token policy's rules on a spec, for TaskService's put, create and patch."""
    if principal.policy == UNRESTRICTED:
        return None

    def check(name: str, new: Task, before: Task | None) -> None:
        why = spec_violation(principal.policy, new, before)
        if why is not None:
            raise deny(principal, why)

    return check


def checks(*each: Check | None) -> Check | None:
    """One Check that runs each given one in turn (None: none given)."""
    given = [c for c in each if c is not None]
    if not given:
        return None

    def check(name: str, new: Task, before: Task | None) -> None:
        for one in given:
            one(name, new, before)

    return check


@contextmanager
def task_quota(
    request: Request, principal: Principal, service: TaskService, name: str
) -> Iterator[None]:
    """Around a write that may create `name`: 403 if the token's folders already hold
    maxTasks tasks. Creates under a limit are serialized, so two cannot both take the last."""
    if principal.policy.max_tasks is None:
        yield
        return
    with request.app.state.quota_lock:
        if service.read(name) is None:
            held = sum(1 for task in service.entries() if principal.holds(task))
            why = task_limit_violation(principal.policy, held)
            if why is not None:
                raise deny(principal, why)
        yield


def readable(principal: Principal, service: TaskService, name: str) -> bool:
    """Whether `principal` may see the task `name`; 403 for configuration (admin-only), 400
    for an invalid name."""
    path = service.store.spec_path(name)  # InvalidName (400)
    if is_config(name) and not principal.can_read(name):
        raise Forbidden(f"token {principal.name} may not read {name}: configuration is admin-only")
    return principal.can_read(name) and principal.reads_within(service.store.root, path)


def require_read(principal: Principal, service: TaskService, name: str) -> None:
    """404, the answer for a task that does not exist, unless `principal` may read `name`: a
    `read: own` token learns nothing of other folders, not even which names are taken."""
    if not readable(principal, service, name):
        raise NotFound(f"no task {name}")


def require_admin(request: Request, principal: Principal, service: TaskService, file: str) -> None:
    """403 unless `principal` may edit the configuration file `file` and the file, symlinks
    resolved, lies in its folders (400 if `file` is not a configuration file name)."""
    if not principal.can_write(file):
        raise refuse(request, principal, file, "is not an admin token (configuration)")
    require_within(request, principal, service, file, service.config_path(file))


def audit(request: Request, principal: Principal, action: str, target: str) -> None:
    """One line per write: who, what, which task. Never the token."""
    audit_log.info(
        "%s %s by %s (%s %s)", action, target, principal.name, request.method, request.url.path
    )
