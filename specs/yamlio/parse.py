"""YAML in and out for tasks and statuses, with errors that name the file, field, line and column.

Every failure, including ones we did not foresee, comes out as SpecParseError: one bad file must
never crash the reconcile loop.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from specs.task.errors import SpecError
from specs.task.models import ARRAY_LIMIT_VAR, MAX_ARRAY_ELEMENTS, TaskModel
from specs.task.records import Task
from specs.task.status import TaskStatus, TaskStatusModel
from specs.yamlio import blockyaml, fastyaml, plainspec
from specs.yamlio.depth import TooDeep, check_nesting
from specs.yamlio.dump import dump_status as dump_status
from specs.yamlio.dump import dump_task as dump_task
from specs.yamlio.errors import (
    MAX_ERRORS,
    FatalSpecError,
    document_error,
    dotted_path,
    line_of,
    node_error,
    validation_message,
)
from specs.yamlio.errors import Problem as Problem
from specs.yamlio.errors import SpecParseError as SpecParseError
from specs.yamlio.nodes import MAX_DEPTH, MERGE_TAG, load_nodes

log = logging.getLogger("rayqueue.parse")

MAX_FILE_BYTES = 1 << 20
# Characters the YAML spec allows; checked up front for a precise line and column.
_NOT_PRINTABLE = re.compile(
    "[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
)
# Model-level (not field-level) validator errors, pinned on the field they are about.
_MODEL_ERROR_FIELDS: dict[tuple[str | int, ...], str] = {("spec",): "resources"}

M = TypeVar("M", bound=BaseModel)


def parse_task(
    text: str | bytes,
    *,
    file: str,
    expected_name: str | None = None,
    task_name: str | None = None,
    check: Callable[[Task], Sequence[Problem]] | None = None,
    max_array_elements: int = MAX_ARRAY_ELEMENTS,
) -> Task:
    """Parse one task document. `expected_name`, if given, must match metadata.name when set.
    `task_name` (the full name, team-a/train) lets dependsOn be checked against the task itself.
    `check` finds what depends on more than the file (runtimeEnv paths and the roots allowed
    for them); each problem is pinned on the line of the field it names. An array of more than
    `max_array_elements` elements (the setting of that name) is refused."""
    return _guarded(
        file,
        lambda: _parse_task(text, file, expected_name, task_name, check, max_array_elements),
    )


def parse_tasks(
    text: str | bytes, *, file: str, max_array_elements: int = MAX_ARRAY_ELEMENTS
) -> list[Task]:
    """Parse a multi-document stream (CLI `apply -f`); every task must carry metadata.name."""
    return _guarded(file, lambda: _parse_tasks(text, file, max_array_elements))


def parse_status(text: str | bytes, *, file: str = "<status>") -> TaskStatus:
    """Parse a status sidecar."""
    return _guarded(file, lambda: _parse_status(text, file))


def _parse_status(text: str | bytes, file: str) -> TaskStatus:
    decoded = _decode(text, file)
    fast = _fast_single(decoded, TaskStatusModel)
    model = fast if fast is not None else _parse_single(decoded, file, TaskStatusModel)[0]
    return TaskStatus.from_model(model)  # validated as a file, kept as the lean record


# --- parsing ------------------------------------------------------------------------------


T = TypeVar("T")


def _guarded(file: str, parse: Callable[[], T]) -> T:
    """The boundary: whatever goes wrong below becomes a SpecParseError."""
    try:
        return parse()
    except SpecParseError:
        raise
    except FatalSpecError as found:
        raise SpecParseError([found.error]) from None
    except RecursionError:
        raise SpecParseError([document_error(file, "nesting is too deep")]) from None
    except Exception as exc:
        log.debug("unexpected error parsing %s", file, exc_info=True)
        message = f"could not parse: {type(exc).__name__}: {exc}"
        raise SpecParseError([document_error(file, message)]) from None


def _parse_task(
    text: str | bytes,
    file: str,
    expected_name: str | None,
    task_name: str | None,
    check: Callable[[Task], Sequence[Problem]] | None = None,
    max_array_elements: int = MAX_ARRAY_ELEMENTS,
) -> Task:
    decoded = _decode(text, file)
    fast = _fast_task(decoded)
    if fast is not None and _task_holds(fast, expected_name, task_name, check, max_array_elements):
        return fast
    model, node = _parse_single(decoded, file, TaskModel)
    task = Task.from_model(model)
    _check_array_size(file, task, node, max_array_elements)
    for index, dep in enumerate(task.spec.depends_on):
        if dep.name == task_name:
            at = _find(node, "spec", "dependsOn")
            item = at.value[index] if isinstance(at, SequenceNode) else at
            field = f"spec.dependsOn[{index}].name"
            message = f'a task cannot depend on itself ("{dep.name}")'
            raise SpecParseError([node_error(file, field, _find(item, "name") or item, message)])
    name = task.metadata.name
    if expected_name is not None and name is not None and name != expected_name:
        message = f'metadata.name "{name}" must equal the file\'s stem "{expected_name}"'
        raise SpecParseError(
            [node_error(file, "metadata.name", _find(node, "metadata", "name"), message)]
        )
    problems = check(task) if check is not None else ()
    if problems:
        raise SpecParseError(_pinned(file, node, problems))
    return task


def _task_holds(
    task: Task,
    expected_name: str | None,
    task_name: str | None,
    check: Callable[[Task], Sequence[Problem]] | None,
    max_array_elements: int,
) -> bool:
    """Whether a task from the fast path passes the checks beyond its model; if not, the slow
    path finds the same problem again, with the line of the field."""
    if any(dep.name == task_name for dep in task.spec.depends_on):
        return False
    if task.spec.array is not None and task.spec.array.size > max_array_elements:
        return False
    name = task.metadata.name
    if expected_name is not None and name is not None and name != expected_name:
        return False
    return not (check is not None and check(task))


def _fast_task(text: str) -> Task | None:
    """A valid task the fast way: a plain spec (specs/yamlio/plainspec.py) built directly, any other
    validated by the model; None: the slow path decides."""
    data = _fast_data(text)
    if not isinstance(data, dict):
        return None
    plain = plainspec.task_of(data)
    if plain is not None:
        return plain
    try:
        return Task.from_model(TaskModel.model_validate(data))
    except ValidationError:
        return None


def _fast_single(text: str, model: type[M]) -> M | None:
    """A valid document the fast way, or None: the slow path decides."""
    data = _fast_data(text)
    if not isinstance(data, dict):
        return None
    try:
        return model.model_validate(data)
    except ValidationError:
        return None


def _fast_data(text: str) -> object:
    """The data of a document the fast way (specs/yamlio/blockyaml.py for plain block style, else
    specs/yamlio/fastyaml.py), or None."""
    data = blockyaml.load(text)
    if data is None:
        try:
            check_nesting(text)
        except TooDeep:
            return None
        data = fastyaml.load(text)
    return data


def _parse_single(text: str | bytes, file: str, model: type[M]) -> tuple[M, Node]:
    docs = load_nodes(_decode(text, file), file, single=True)
    if not docs:
        raise FatalSpecError(document_error(file, "empty file"))
    node, data = docs[0]
    return _validate(model, node, data, file), node


def _check_array_size(file: str, task: Task, node: Node, limit: int) -> None:
    """An array over the limit is refused here, not by the model: the limit is a setting.
    Its size is a product of list lengths, so this costs nothing however large it is."""
    array = task.spec.array
    if array is None or array.size <= limit:
        return
    message = f"has {array.size} elements; the limit is {limit} (the setting {ARRAY_LIMIT_VAR})"
    raise SpecParseError([node_error(file, "spec.array", _find(node, "spec", "array"), message)])


def _parse_tasks(text: str | bytes, file: str, max_array_elements: int) -> list[Task]:
    docs = load_nodes(_decode(text, file), file, single=False)
    if not docs:
        raise FatalSpecError(document_error(file, "empty file"))
    tasks: list[Task] = []
    errors: list[SpecError] = []
    seen: dict[str, int] = {}
    for node, data in docs:
        try:
            task = Task.from_model(_validate(TaskModel, node, data, file))
            _check_array_size(file, task, node, max_array_elements)
        except SpecParseError as exc:
            errors.extend(exc.errors)
            continue
        name = task.metadata.name
        name_node = _find(node, "metadata", "name")
        if name is None:
            at = _find(node, "metadata") or node
            errors.append(node_error(file, "metadata.name", at, "required field is missing"))
        elif name in seen:
            message = f'task "{name}" is defined twice (first on line {seen[name]})'
            errors.append(node_error(file, "metadata.name", name_node, message))
        else:
            seen[name] = line_of(name_node) or 0
            tasks.append(task)
    if errors:
        raise SpecParseError(errors[:MAX_ERRORS])
    return tasks


def _decode(text: str | bytes, file: str) -> str:
    """Bytes to str, enforcing the size limit before any parsing and rejecting bad characters."""
    too_big = f"file is larger than the {MAX_FILE_BYTES // 1024} KiB limit"
    if isinstance(text, bytes | bytearray):
        data = bytes(text)
        if len(data) > MAX_FILE_BYTES:
            raise FatalSpecError(document_error(file, too_big))
        try:
            result = data.decode("utf-8").removeprefix("\ufeff")
        except UnicodeDecodeError as exc:
            line_start = data.rfind(b"\n", 0, exc.start) + 1
            line = data.count(b"\n", 0, exc.start) + 1
            before = data[line_start : exc.start].decode("utf-8").removeprefix("\ufeff")
            column = len(before) + 1
            message = f"not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})"
            raise FatalSpecError(SpecError(file, None, line, column, message)) from None
    else:
        if (
            len(text) > MAX_FILE_BYTES
            or len(text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES
        ):
            raise FatalSpecError(document_error(file, too_big))
        result = text.removeprefix("\ufeff")
    bad = _NOT_PRINTABLE.search(result)
    if bad is not None:
        line_start = result.rfind("\n", 0, bad.start()) + 1
        line = result.count("\n", 0, bad.start()) + 1
        message = f"character U+{ord(bad.group()):04X} is not allowed in YAML"
        raise FatalSpecError(SpecError(file, None, line, bad.start() - line_start + 1, message))
    return result


def _validate(model: type[M], node: Node, data: Any, file: str) -> M:
    if not isinstance(data, dict):
        message = "expected a mapping with apiVersion, kind, metadata and spec"
        if model is TaskStatusModel:
            message = "expected a mapping with apiVersion, kind, metadata and status"
        raise SpecParseError([node_error(file, None, node, message)])
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = [_pydantic_error(file, node, err) for err in exc.errors()]
        raise SpecParseError(errors[:MAX_ERRORS]) from None


def _pydantic_error(file: str, root: Node, err: Any) -> SpecError:
    loc: tuple[str | int, ...] = tuple(err["loc"])
    kind: str = err["type"]
    if kind == "value_error" and loc in _MODEL_ERROR_FIELDS:
        loc = (*loc, _MODEL_ERROR_FIELDS[loc])
        kind = "value_error_model"
    path, node, key = _locate(root, loc)
    if kind == "extra_forbidden" and key is not None:
        node = key  # the typo itself, on its own line
    if kind in ("missing", "value_error_model") and len(path) < len(loc):
        path = loc[: len(path) + 1]  # name the absent field; point at its parent
    return node_error(file, dotted_path(path) or None, node, validation_message(err))


def _locate(
    root: Node, loc: tuple[str | int, ...]
) -> tuple[tuple[str | int, ...], Node, Node | None]:
    """Follow `loc` down the node tree as far as it goes: (matched path, node, its key node)."""
    node: Node = root
    key_node: Node | None = None
    matched: list[str | int] = []
    for segment in loc:
        child: tuple[Node | None, Node] | None = None
        if isinstance(node, MappingNode) and isinstance(segment, str):
            child = _lookup(node, segment)
        elif (
            isinstance(node, SequenceNode)
            and isinstance(segment, int)
            and 0 <= segment < len(node.value)
        ):
            child = (None, node.value[segment])
        if child is None:
            break  # union tags and the like: stop at the deepest real node
        key_node, node = child
        matched.append(segment)
    return tuple(matched), node, key_node


def _lookup(node: MappingNode, name: str, hops: int = 0) -> tuple[Node, Node] | None:
    """(key node, value node) for `name`, looking through "<<" merges as the builder does."""
    for key, value in node.value:
        if key.tag != MERGE_TAG and isinstance(key, ScalarNode) and key.value == name:
            return key, value
    if hops > MAX_DEPTH:
        return None  # a merge cycle; the builder has rejected it already
    for key, value in node.value:
        if key.tag == MERGE_TAG:
            sources = value.value if isinstance(value, SequenceNode) else [value]
            for source in sources:
                found = _lookup(source, name, hops + 1) if isinstance(source, MappingNode) else None
                if found is not None:
                    return found
    return None


def _find(node: Node | None, *keys: str) -> Node | None:
    for key in keys:
        found = _lookup(node, key) if isinstance(node, MappingNode) else None
        if found is None:
            return None
        node = found[1]
    return node


# --- other documents (queue configuration: specs/queues/parse.py)
# -----------------------------------


def parse_document(
    text: str | bytes,
    *,
    file: str,
    model: type[M],
    check: Callable[[M], Sequence[Problem]] | None = None,
) -> M:
    """Parse a one-document file into `model`, with the same file:line:column errors as tasks.

    `check` finds what a model cannot see field by field (duplicates across a list); each
    problem is pinned on the line of the field it names.
    """

    def parse() -> M:
        value, node = _parse_single(text, file, model)
        problems = check(value) if check is not None else ()
        if problems:
            raise SpecParseError(_pinned(file, node, problems))
        return value

    return _guarded(file, parse)


def locate(text: str | bytes, *, file: str, problems: Sequence[Problem]) -> list[SpecError]:
    """Each problem of a file that parses, placed on the line of the field it names: notes
    that do not refuse the file (a value bounded by what a parent allows), worded as errors."""

    def place() -> list[SpecError]:
        docs = load_nodes(_decode(text, file), file, single=True)
        if not docs:
            return [node_error(file, dotted_path(loc) or None, None, m) for loc, m in problems]
        return _pinned(file, docs[0][0], problems, limit=len(problems))

    return _guarded(file, place)


def _pinned(
    file: str, node: Node, problems: Sequence[Problem], limit: int = MAX_ERRORS
) -> list[SpecError]:
    errors = []
    for loc, message in problems[:limit]:
        at = _locate(node, loc)[1]
        errors.append(node_error(file, dotted_path(loc) or None, at, message))
    return errors
