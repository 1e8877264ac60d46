"""`rayqueue apply -f FILE|DIR|-`: validate everything, then write the specs into the folder."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from reconciler.cli.common import (
    EXIT_OK,
    CliError,
    HelpFormatter,
    Subparsers,
    folder_parent,
    open_store,
)
from reconciler.cli.files import parse_source, read_sources
from specs.models import Task
from specs.parse import SpecParseError, parse_task
from specs.store import InvalidName, TaskStore, validate_name

EPILOG = """\
examples:
  rayqueue apply -f examples/tasks/hello.yaml       # task/hello created
  rayqueue apply -f examples/tasks/ -R              # every spec below the folder
  rayqueue apply -f examples/bundle.yaml -n demo    # several tasks, into the folder demo/
  cat train.yaml | rayqueue apply -f -              # from stdin (metadata.name required)
"""


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "apply",
        parents=[folder_parent()],
        formatter_class=HelpFormatter,
        help="validate spec files and write them into the tasks folder",
        description="Validate every document first, then write each task into the tasks folder "
        "atomically. Nothing is written if any document is invalid. Prints `task/NAME created`, "
        "`configured` or `unchanged` for each task, as kubectl does. A file with one task may "
        "leave metadata.name out (the name is the file's stem); in a file with several "
        "`---`-separated tasks each must name itself.",
        epilog=EPILOG,
    )
    p.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        metavar="FILE|DIR|-",
        help="a spec file, a folder of them, or - for stdin (repeatable)",
    )
    p.add_argument(
        "-R",
        "--recursive",
        action="store_true",
        help="with a folder, also read its subfolders (team-a/x.yaml becomes task team-a/x)",
    )
    p.add_argument(
        "-n",
        "--namespace",
        default="",
        metavar="FOLDER",
        help="put the tasks into this subfolder of the tasks folder",
    )
    p.add_argument("--dry-run", action="store_true", help="validate and report, but write nothing")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    store = open_store(args)
    prefix = args.namespace.strip("/")
    prefix = f"{prefix}/" if prefix else ""
    sources = read_sources(args.filename, recursive=args.recursive)

    planned: list[tuple[str, Task]] = []
    errors: list[str] = []
    defined_in: dict[str, str] = {}
    for source in sources:
        try:
            items = parse_source(source)
        except SpecParseError as exc:
            errors.extend(str(e) for e in exc.errors)
            continue
        for name, task in items:
            full = prefix + name
            try:
                validate_name(full)
            except InvalidName as exc:
                errors.append(f"{source.display}: metadata.name: {exc}")
                continue
            if full in defined_in:
                other = defined_in[full]
                errors.append(f"{source.display}: task {full} is also defined in {other}")
                continue
            defined_in[full] = source.display
            planned.append((full, task))
    if errors:
        for line in errors:
            print(line, file=sys.stderr)
        count = f"{len(errors)} error" + ("s" if len(errors) > 1 else "")
        raise CliError(f"{count}; nothing was applied")

    _ensure_folder(store, args.dry_run)
    suffix = " (dry run)" if args.dry_run else ""
    for name, task in planned:
        outcome = _outcome(store, name, task)
        if outcome != "unchanged" and not args.dry_run:
            try:
                store.write_spec(name, task)
            except (OSError, InvalidName) as exc:
                raise CliError(f"cannot write task {name}: {exc}") from None
        print(f"task/{name} {outcome}{suffix}")
    return EXIT_OK


def _ensure_folder(store: TaskStore, dry_run: bool) -> None:
    root = store.root
    if root.is_dir():
        return
    if root.exists():
        raise CliError(f"{root} is not a folder")
    if not dry_run:
        try:
            root.mkdir(parents=True)
        except OSError as exc:
            raise CliError(f"cannot create the tasks folder {root}: {exc.strerror}") from None
    print(f"created the tasks folder {root}", file=sys.stderr)


def _outcome(store: TaskStore, name: str, task: Task) -> str:
    """created, configured or unchanged, comparing what the specs mean, not their text."""
    try:
        current = store.read_spec_text(name)
    except OSError:
        current = None
    if current is None:
        return "created"
    stem = name.rsplit("/", 1)[-1]
    try:
        existing = parse_task(current, file=name, expected_name=stem)
    except SpecParseError:
        return "configured"  # replacing an invalid file
    return "unchanged" if _meaning(existing) == _meaning(task) else "configured"


def _meaning(task: Task) -> dict[str, Any]:
    # metadata.name is optional and, when given, equals the stem: it carries no meaning.
    document = task.to_document()
    metadata = {k: v for k, v in document.get("metadata", {}).items() if k != "name"}
    return {**document, "metadata": metadata}
