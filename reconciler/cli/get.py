"""`rayqueue get`: the tasks in queue order, as a table, YAML, JSON or names; -w to watch."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import TextIO

import yaml

from reconciler.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    HelpFormatter,
    Subparsers,
    folder_parent,
    load_views,
    number,
    one_line,
    open_store,
    table,
)
from specs.folder.store import TaskStore
from specs.service.arrayviews import ArrayView, group
from specs.service.tasks import (
    QueryError,
    Requirement,
    TaskService,
    parse_phases,
    parse_selector,
    select,
)
from specs.service.views import TaskView, human_age
from specs.task.arrays import element_values, split
from specs.task.quantity import readable_memory
from specs.task.status import TaskStatusBody

WATCH_INTERVAL_SECONDS = 0.5
MESSAGE_WIDTH = 70  # the MESSAGE column without -o wide
HEADER = ("NAME", "PRIORITY", "PHASE", "CPU", "GPU", "MEMORY", "POSITION", "AGE", "MESSAGE")
WIDE_HEADER = (
    *HEADER[:-1],
    "RUN",
    "SUBMISSION ID",
    "RAY STATUS",
    "DEPENDS",
    "LABELS",
    "MESSAGE",
)
_CLEAR_SCREEN = "\x1b[H\x1b[2J"

EPILOG = """\
Order: running and starting tasks first, then the queue as the reconciler takes it (priority
high to low, then the time a task was queued, then name), then unschedulable, suspended and
not-yet-seen tasks, then invalid ones, then finished ones. POSITION is the place in the queue
at the reconciler's last pass; AGE counts from when the current run was queued.

examples:
  rayqueue get
  rayqueue get -o wide --phase Queued,Running
  rayqueue get -l team=vision -o yaml
  rayqueue get -w                         # redraws on change; Ctrl-C to stop
"""


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "get",
        parents=[folder_parent()],
        formatter_class=HelpFormatter,
        help="list tasks with their phase, in queue order",
        description="List the tasks of the folder with their status, read from the sidecars.",
        epilog=EPILOG,
    )
    p.add_argument("names", nargs="*", metavar="NAME", help="only these tasks")
    p.add_argument(
        "-o",
        "--output",
        choices=["table", "wide", "yaml", "json", "name"],
        default="table",
        metavar="FORMAT",
        help="wide (more columns), yaml, json or name (task/NAME); default: a table",
    )
    p.add_argument(
        "-l",
        "--selector",
        action="append",
        default=[],
        metavar="SELECTOR",
        help="label selector: key=value, key!=value, key or !key; comma-separated or repeated",
    )
    p.add_argument(
        "--phase",
        action="append",
        default=[],
        metavar="PHASE",
        help="only tasks in these phases, e.g. Queued,Running (case-insensitive)",
    )
    p.add_argument(
        "--elements",
        action="store_true",
        help="one row per element of a task array (default: one row per array, with progress)",
    )
    p.add_argument(
        "-w",
        "--watch",
        action="store_true",
        help=f"redraw whenever something changes (checks every {WATCH_INTERVAL_SECONDS:g} s)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    store = open_store(args)
    try:
        selector = parse_selector(args.selector)
        phases = parse_phases(args.phase)
    except QueryError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None

    def render() -> tuple[str, str, list[str]]:
        views, missing = select_views(store, args.names, selector, phases)
        text, signature = render_views(
            views, args.output, single=len(args.names) == 1, elements=args.elements
        )
        return text, signature, missing

    text, signature, missing = render()
    for name in missing:
        print(f'error: task "{name}" not found', file=sys.stderr)
    if not args.watch:
        if text:
            sys.stdout.write(text)
        elif not missing:
            print(f"No tasks found in {store.root}.", file=sys.stderr)
        return EXIT_ERROR if missing else EXIT_OK
    return watch(render, sys.stdout, first=(text, signature))


def select_views(
    store: TaskStore, names: Sequence[str], selector: Sequence[Requirement], phases: set[str]
) -> tuple[list[TaskView], list[str]]:
    """The named tasks (all without names) that match; and the names not found."""
    views = load_views(TaskService(store))
    missing: list[str] = []
    if names:
        # An array's name stands for its elements.
        known = {v.name for v in views} | {p[0] for v in views if (p := split(v.name))}
        missing = [n for n in names if n not in known]
        wanted = set(names)
        views = [
            v
            for v in views
            if v.name in wanted or ((p := split(v.name)) is not None and p[0] in wanted)
        ]
    return select(views, selector, phases), missing


def render_views(
    views: Sequence[TaskView], output: str, *, single: bool, elements: bool = False
) -> tuple[str, str]:
    """(text to print, signature): the signature leaves out AGE, so -w redraws on real changes."""
    if output == "name":
        text = "".join(f"task/{v.name}\n" for v in views)
        return text, text
    if output in ("yaml", "json"):
        objects = [v.to_object() for v in views]
        document: object = (
            objects[0]
            if single and len(objects) == 1
            else {"apiVersion": "v1", "kind": "List", "items": objects}
        )
        if output == "json":
            text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
        else:
            text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=10_000)
        return text, text
    if not views:
        return "", ""
    wide = output == "wide"
    now = time.time()
    if elements:
        # One row per element, each with its own values (lr=0.1,seed=2) before the message.
        header = (*(WIDE_HEADER if wide else HEADER)[:-1], "VALUES", "MESSAGE")
        rows = [[*(row := _row(v, now, wide))[:-1], _values(v), row[-1]] for v in views]
        age = HEADER.index("AGE")
        signature = repr([row[:age] + row[age + 1 :] for row in rows])
        return table(header, rows), signature
    if wide:
        rows = [_row(v, now, wide) for v in views]
    else:  # an array is one row, its progress as the message
        rows = [
            _row(v, now, wide) if isinstance(v, TaskView) else _array_row(v, now)
            for v in group(views)
        ]
    age = HEADER.index("AGE")
    signature = repr([row[:age] + row[age + 1 :] for row in rows])
    return table(WIDE_HEADER if wide else HEADER, rows), signature


def _row(view: TaskView, now: float, wide: bool) -> list[str]:
    task, body = view.task, view.body
    if task is not None:
        res = task.spec.resources
        memory = readable_memory(res.memory)
        cells = [str(task.spec.priority), number(res.cpu), number(res.gpu), memory]
    else:
        cells = ["-", "-", "-", "-"]
    position = body.queue_position if body is not None else None
    age = view.age_seconds(now)
    row = [
        view.name,
        cells[0],
        view.phase,
        *cells[1:],
        str(position) if position is not None else _bucket(body),
        human_age(age) if age is not None else "-",
    ]
    if wide:
        labels = view.labels
        row += [
            str(body.run) if body is not None and body.run else "-",
            (body.submission_id if body is not None else None) or "-",
            (body.ray_status if body is not None else None) or "-",
            _depends(view),
            ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "-",
            one_line(view.message),
        ]
    else:
        row.append(one_line(view.message, MESSAGE_WIDTH))
    return row


def _array_row(array: ArrayView, now: float) -> list[str]:
    row = _row(array.first, now, wide=False)
    positions = [e.body.queue_position for e in array.elements if e.body is not None]
    shown = [p for p in positions if p is not None]
    row[0], row[2] = array.name, array.phase
    row[HEADER.index("POSITION")] = str(min(shown)) if shown else "-"
    row[-1] = array.progress
    return row


def _values(view: TaskView) -> str:
    """An array element's own values (`lr=0.1,seed=2`); `-` for a plain task or a `count`
    array, whose elements differ only by their index."""
    parts = split(view.name)
    array = view.task.spec.array if view.task is not None else None
    if parts is None or array is None:
        return "-"
    values = element_values(array)
    own = values[parts[1]] if parts[1] < len(values) else {}
    return ",".join(f"{k}={v}" for k, v in own.items()) or "-"


def _depends(view: TaskView) -> str:
    """train, or train(Finished) for a condition other than the default Succeeded."""
    if view.task is None or not view.task.spec.depends_on:
        return "-"
    return ",".join(
        d.name if d.condition == "Succeeded" else f"{d.name}({d.condition})"
        for d in view.task.spec.depends_on
    )


def watch(
    render: Callable[[], tuple[str, str, list[str]]],
    out: TextIO,
    *,
    first: tuple[str, str],
    interval_seconds: float = WATCH_INTERVAL_SECONDS,
    sleep: Callable[[float], None] | None = None,
) -> int:
    """Print, then redraw whenever the signature changes, until Ctrl-C (exit 0)."""
    sleep = sleep or time.sleep
    clear = out.isatty()
    text, signature = first
    try:
        _draw(out, text, clear, initial=True)
        while True:
            sleep(interval_seconds)
            try:
                new_text, new_signature, _ = render()
            except CliError as exc:  # the folder vanished for a moment: say so, keep watching
                new_text, new_signature = f"error: {exc}\n", f"error: {exc}"
            if new_signature != signature:
                text, signature = new_text, new_signature
                _draw(out, text, clear, initial=False)
            elif clear and new_text != text:
                text = new_text  # only AGE moved: refresh in place on a terminal
                _draw(out, text, clear, initial=False)
    except KeyboardInterrupt:
        return EXIT_OK


def _draw(out: TextIO, text: str, clear: bool, *, initial: bool) -> None:
    shown = text or "No tasks.\n"
    if clear:
        out.write(_CLEAR_SCREEN + shown)
    else:
        out.write(shown if initial else "\n" + shown)
    out.flush()


def _bucket(body: TaskStatusBody | None) -> str:
    """Beyond the exact places a sidecar shows only a bucket such as `>1000`."""
    bucket = body.queue_position_bucket if body is not None else None
    return bucket or "-"
