"""The task service's errors (specs/service/tasks.py); each front end turns them into its words (an
exit code and a line on stderr, or an HTTP status and a JSON detail)."""

from __future__ import annotations

from dataclasses import dataclass

from specs.task.errors import SpecError


class TaskNotFound(LookupError):
    def __init__(self, name: str) -> None:
        super().__init__(f"no task {name}")
        self.name = name


class Conflict(Exception):
    """The edit cannot be made as asked: the file changed, exists, or is broken."""


class SpecBroken(Conflict):
    """The spec file is invalid now, so a patch has nothing to apply to."""

    def __init__(self, name: str, errors: list[SpecError]) -> None:
        problems = "; ".join(str(e) for e in errors) or "not a mapping"
        super().__init__(f"the spec file of {name} is invalid ({problems})")
        self.name = name
        self.errors = errors


@dataclass(frozen=True)
class IdUser:
    """Who already has a submission id: a task (by name), or a Ray job outside this queue."""

    task: str | None


class SpecRejected(ValueError):
    """The new content would be an invalid spec; nothing was written."""

    def __init__(self, name: str, errors: list[SpecError], *, with_position: bool) -> None:
        super().__init__(f"the edit would make {name} invalid: {errors[0]}")
        self.name = name
        self.errors = errors
        self.with_position = with_position  # YAML bodies have lines; JSON ones do not


class SpecForbidden(SpecRejected):
    """The spec names something its writer may not (a runtimeEnv path outside its roots)."""


class ConfigRejected(ValueError):
    """A configuration file body that is not a YAML mapping; nothing was written."""


class QueryError(ValueError):
    """A label selector or phase list that cannot be understood."""
