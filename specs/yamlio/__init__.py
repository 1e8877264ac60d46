"""YAML in and out: spec, status and queue files read into records with errors that name the
file, field, line and column; dumps in the usual field order; merge patches that keep comments."""

from specs.yamlio.depth import MAX_NESTING, TooDeep, check_nesting
from specs.yamlio.dump import dump_status, dump_task
from specs.yamlio.errors import FatalSpecError, Problem, SpecParseError
from specs.yamlio.mergepatch import dump_document, load_document, merge_patch, patch_text
from specs.yamlio.nodes import MAX_DEPTH
from specs.yamlio.parse import MAX_FILE_BYTES, parse_document, parse_status, parse_task, parse_tasks

__all__ = [
    "MAX_DEPTH",
    "MAX_FILE_BYTES",
    "MAX_NESTING",
    "FatalSpecError",
    "Problem",
    "SpecParseError",
    "TooDeep",
    "check_nesting",
    "dump_document",
    "dump_status",
    "dump_task",
    "load_document",
    "merge_patch",
    "parse_document",
    "parse_status",
    "parse_task",
    "parse_tasks",
    "patch_text",
]
