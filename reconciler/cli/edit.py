"""`delete`, `suspend`, `resume`, `set-priority` and `rerun`: small edits of spec files.

An edit changes one field as a targeted text edit, so comments and layout survive. The edit is
made by specs.service.tasks, the same code the HTTP API uses: validated before it is written,
written atomically, and redone from the new text if the file changed while we edited it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from reconciler.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    CliError,
    HelpFormatter,
    Subparsers,
    folder_parent,
    open_service,
    open_store,
)
from specs.folder.store import InvalidName, TaskStore, validate_name
from specs.service.tasks import Conflict, SpecBroken, SpecRejected, TaskNotFound, TaskService
from specs.service.views import rfc3339
from specs.task.arrays import RERUN_ELEMENTS, element_name, rerun_elements, split
from specs.task.models import RESTARTED_AT
from specs.task.quantity import plural
from specs.task.records import Task


def register(sub: Subparsers) -> None:
    folder = folder_parent()

    p = sub.add_parser(
        "delete",
        parents=[folder],
        formatter_class=HelpFormatter,
        help="delete task specs; the reconciler stops their jobs",
        description="Remove the spec files. If a task's job is Starting or Running, the "
        "reconciler stops it, then removes the sidecar.",
        epilog="example:\n  rayqueue delete train team-a/eval",
    )
    p.add_argument("names", nargs="+", metavar="NAME", help="tasks to delete")
    p.set_defaults(func=run_delete)

    p = sub.add_parser(
        "suspend",
        parents=[folder],
        formatter_class=HelpFormatter,
        help="set spec.suspend: true (a running job is stopped)",
        description="Keep tasks out of the queue; a Starting or Running job is stopped "
        "(phase Suspended).",
        epilog="example:\n  rayqueue suspend train",
    )
    p.add_argument("names", nargs="+", metavar="NAME", help="tasks to suspend")
    p.set_defaults(func=run_suspend)

    p = sub.add_parser(
        "resume",
        parents=[folder],
        formatter_class=HelpFormatter,
        help="remove spec.suspend (a new run is queued)",
        description="Undo suspend: the task is queued again for a new run.",
        epilog="example:\n  rayqueue resume train",
    )
    p.add_argument("names", nargs="+", metavar="NAME", help="tasks to resume")
    p.set_defaults(func=run_resume)

    p = sub.add_parser(
        "set-priority",
        parents=[folder],
        formatter_class=HelpFormatter,
        help="change spec.priority (applies in place, no new run)",
        description="Set a task's priority, 0..9 (9 runs first). A running job keeps running.",
        epilog="example:\n  rayqueue set-priority train 9",
    )
    p.add_argument("name", metavar="NAME", help="the task")
    p.add_argument("priority", type=_priority, metavar="N", help="the new priority, 0..9")
    p.set_defaults(func=run_set_priority)

    p = sub.add_parser(
        "rerun",
        parents=[folder],
        formatter_class=HelpFormatter,
        help=f"start a new run (sets the {RESTARTED_AT} annotation)",
        description=f"Set the annotation {RESTARTED_AT} to the current time (RFC 3339). "
        "A finished task is queued for a new run; a running one is stopped and queued again. "
        "This is `kubectl rollout restart` for a task.",
        epilog="example:\n  rayqueue rerun train",
    )
    p.add_argument("name", metavar="NAME", help="the task")
    p.add_argument(
        "--failed",
        action="store_true",
        help="a task array: run again only the elements that failed (Failed, TimedOut, Lost)",
    )
    p.set_defaults(func=run_rerun)


def _priority(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 0 <= value <= 9:
        raise argparse.ArgumentTypeError(f"{value} is not in 0..9")
    return value


def run_delete(args: argparse.Namespace) -> int:
    service = open_service(args)
    status = EXIT_OK
    for name in args.names:
        _check_name(name)
        try:
            service.delete(name)
        except TaskNotFound:
            print(f'error: task "{name}" not found', file=sys.stderr)
            status = EXIT_ERROR
            continue
        except OSError as exc:
            raise CliError(f"cannot delete task {name}: {exc.strerror}") from None
        print(f"task/{name} deleted")
    return status


def run_suspend(args: argparse.Namespace) -> int:
    return _edit_each(
        args, {"spec": {"suspend": True}}, "suspended", lambda t: t.spec.suspend is True
    )


def run_resume(args: argparse.Namespace) -> int:
    # null removes the key: back to the default (false), leaving the file as it was before.
    return _edit_each(args, {"spec": {"suspend": None}}, "resumed", lambda t: not t.spec.suspend)


def run_set_priority(args: argparse.Namespace) -> int:
    args.names = [args.name]
    patch = {"spec": {"priority": args.priority}}
    return _edit_each(args, patch, "configured", lambda t: t.spec.priority == args.priority)


def run_rerun(args: argparse.Namespace) -> int:
    now = rfc3339(datetime.now(UTC), timespec="seconds")
    args.names = [args.name]
    if args.failed:
        return _rerun_failed(args, now)
    patch = {"metadata": {"annotations": {RESTARTED_AT: now}}}
    return _edit_each(args, patch, "restarted", lambda t: False)


def _rerun_failed(args: argparse.Namespace, now: str) -> int:
    """Mark the failed elements of an array for a new run (specs/task/arrays.py RERUN_ELEMENTS),
    keeping the marks of earlier reruns so their elements do not run again."""
    store = open_store(args)
    _check_name(args.name)
    spec = TaskService(store).read(args.name)
    if spec is None or spec.task is None:
        raise CliError(f'task "{args.name}" not found or invalid')
    if spec.task.spec.array is None:
        raise CliError(f"{args.name} is not a task array; use `rayqueue rerun {args.name}`")
    statuses = store.read_statuses()
    failed = sorted(
        index
        for element, status in statuses.items()
        if (parts := split(element)) is not None
        and parts[0] == args.name
        and status.status.phase.value in ("Failed", "TimedOut", "Lost")
        for index in [parts[1]]
    )
    if not failed:
        print(f"task/{args.name} unchanged (no failed elements)")
        return EXIT_OK
    marks = rerun_elements(spec.task) | dict.fromkeys(failed, now)
    text = json.dumps({str(i): marks[i] for i in sorted(marks)}, separators=(",", ":"))
    patch = {"metadata": {"annotations": {RERUN_ELEMENTS: text}}}
    edit_spec(store, args.name, patch, lambda t: False)
    shown = ", ".join(element_name(args.name, i) for i in failed[:5])
    more = f" and {len(failed) - 5} more" if len(failed) > 5 else ""
    print(f"task/{args.name} restarted {plural(len(failed), 'failed element')}: {shown}{more}")
    return EXIT_OK


def _edit_each(
    args: argparse.Namespace,
    patch: dict[str, Any],
    verb: str,
    done: Callable[[Task], bool],
) -> int:
    store = open_store(args)
    status = EXIT_OK
    for name in args.names:
        _check_name(name)
        try:
            changed = edit_spec(store, name, patch, done)
        except CliError as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = EXIT_ERROR
            continue
        print(f"task/{name} {verb if changed else 'unchanged'}")
    return status


def edit_spec(
    store: TaskStore, name: str, patch: dict[str, Any], done: Callable[[Task], bool]
) -> bool:
    """Apply a merge patch to the spec file of `name`; False if nothing needed to change."""
    try:
        _, changed = TaskService(store).patch(name, patch, done=done)
    except TaskNotFound:
        raise CliError(f'task "{name}" not found') from None
    except SpecBroken as exc:
        first = exc.errors[0] if exc.errors else "not a mapping"
        raise CliError(f"the spec of {name} is invalid ({first}); fix the file first") from None
    except (SpecRejected, Conflict) as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot write {store.spec_path(name)}: {exc.strerror}") from None
    return changed


def _check_name(name: str) -> None:
    try:
        validate_name(name)
    except InvalidName as exc:
        raise CliError(str(exc)) from None
