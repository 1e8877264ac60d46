"""The task service shared by the CLI and the HTTP API: query, read and edit tasks through
the folder, with the views and errors both front ends show."""

from specs.service.arrayviews import ArrayView, array_status, elements_of, group
from specs.service.errors import (
    ConfigRejected,
    Conflict,
    IdUser,
    QueryError,
    SpecBroken,
    SpecForbidden,
    SpecRejected,
    TaskNotFound,
)
from specs.service.etags import etag_matches, quote_etag
from specs.service.query import Requirement, parse_phases, parse_selector, select
from specs.service.tasks import LEGACY_TASK_ID, WRITTEN_BY, Check, TaskService, WriterCheck
from specs.service.views import (
    NOT_SEEN,
    NOT_SEEN_MESSAGE,
    SpecFile,
    TaskView,
    human_age,
    resources,
    rfc3339,
    status_body,
    task_object,
)

__all__ = [
    "LEGACY_TASK_ID",
    "NOT_SEEN",
    "NOT_SEEN_MESSAGE",
    "WRITTEN_BY",
    "ArrayView",
    "Check",
    "ConfigRejected",
    "Conflict",
    "IdUser",
    "QueryError",
    "Requirement",
    "SpecBroken",
    "SpecFile",
    "SpecForbidden",
    "SpecRejected",
    "TaskNotFound",
    "TaskService",
    "TaskView",
    "WriterCheck",
    "array_status",
    "elements_of",
    "etag_matches",
    "group",
    "human_age",
    "parse_phases",
    "parse_selector",
    "quote_etag",
    "resources",
    "rfc3339",
    "select",
    "status_body",
    "task_object",
]
