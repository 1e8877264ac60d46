"""Authorization: which caller may write which task, and the audit line of every write.

The caller (a specs.access.Principal) is what TokenAuth found in the request's bearer token;
without tokens configured, everyone is the anonymous admin (loopback only, see
specs.access.exposure_problem). Names are checked after specs.store.validate_name, so `..`,
empty segments and URL-encoded tricks are refused as names before any prefix test, and the
spec's path is resolved so a symlink cannot carry a team's write into another folder.
"""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import Depends, Request

from api.errors import ApiError
from api.security import PRINCIPAL_KEY
from specs.access import ANONYMOUS, Principal
from specs.runtimepaths import RuntimePaths
from specs.service import TaskService, WriterCheck

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
    audit_log.warning(
        "refused %s %s by %s: %s", request.method, request.url.path, principal.name, why
    )
    return Forbidden(f"token {principal.name} may not change {target}: it {why}")


def require_write(request: Request, principal: Principal, service: TaskService, name: str) -> None:
    """403 unless `principal` may write the task `name` (400 first if the name is invalid)."""
    path = service.store.spec_path(name)  # InvalidName (400): '..', '//', hidden, outside
    if not principal.can_write(name):
        raise refuse(request, principal, name, principal.describe_scope())
    if not principal.resolves_within(service.store.root, path):
        raise refuse(request, principal, name, "resolves (through a symlink) outside its folders")


def spec_check(request: Request, principal: Principal) -> WriterCheck | None:
    """What `principal` may not put in a spec it writes: runtimeEnv local paths outside its
    roots (specs/runtimepaths.py; 403 naming the field). None when confinement is off."""
    paths: RuntimePaths = request.app.state.runtime_paths
    return paths.writer_check(principal)


def require_top(request: Request, principal: Principal) -> None:
    """The old API names no folder: it needs write on the whole tree."""
    if not principal.can_write_top:
        raise refuse(
            request,
            principal,
            "tasks through the old API",
            f"needs write on the top folder ('/') or admin; it {principal.describe_scope()}",
        )


def require_admin(request: Request, principal: Principal, file: str) -> None:
    if not principal.can_write(file):
        raise refuse(request, principal, file, "is not an admin token (configuration)")


def audit(request: Request, principal: Principal, action: str, target: str) -> None:
    """One line per write: who, what, which task. Never the token."""
    audit_log.info(
        "%s %s by %s (%s %s)", action, target, principal.name, request.method, request.url.path
    )
