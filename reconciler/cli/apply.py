"""`rayqueue apply -f FILE|DIR|-`: validate everything, then write the specs into the folder.

Each task is written as the user wrote it (comments and key order kept), through the task
service the HTTP API uses; a task that already means what its file says is not written at all,
so applying an unchanged GitOps folder touches nothing.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from reconciler.cli.common import (
    EXIT_OK,
    CliError,
    HelpFormatter,
    Subparsers,
    folder_parent,
    open_service,
)
from reconciler.cli.files import Document, documents, read_sources
from specs.folder.store import FolderUnavailable, InvalidName, validate_name
from specs.service.tasks import Conflict, SpecRejected, TaskService, quote_etag
from specs.service.views import SpecFile
from specs.task.records import Task
from specs.yamlio.parse import SpecParseError

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
        "atomically, as written (comments and order kept). Nothing is written if any document "
        "is invalid, nor for a task whose file already means the same. Prints `task/NAME created`, "
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
    service = open_service(args)
    prefix = args.namespace.strip("/")
    prefix = f"{prefix}/" if prefix else ""
    sources = read_sources(args.filename, recursive=args.recursive)

    planned: list[Document] = []
    errors: list[str] = []
    defined_in: dict[str, str] = {}
    for source in sources:
        try:
            items = documents(source)
        except SpecParseError as exc:
            errors.extend(str(e) for e in exc.errors)
            continue
        for item in items:
            full = prefix + item.name
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
            try:
                # The very bytes to be written, under their final name, as the service will.
                path = service.store.spec_path(full)
                service.validate(full, item.data, path=path, with_position=True)
            except InvalidName as exc:
                errors.append(f"{source.display}: metadata.name: {exc}")
                continue
            except SpecRejected as exc:
                errors.extend(str(e) for e in exc.errors)
                continue
            planned.append(replace(item, name=full))
    if errors:
        for line in errors:
            print(line, file=sys.stderr)
        count = f"{len(errors)} error" + ("s" if len(errors) > 1 else "")
        raise CliError(f"{count}; nothing was applied")

    _ensure_folder(service.store.root, args.dry_run)
    suffix = " (dry run)" if args.dry_run else ""
    for item in planned:
        print(f"task/{item.name} {_apply(service, item, args.dry_run)}{suffix}")
    return EXIT_OK


def _apply(service: TaskService, item: Document, dry_run: bool) -> str:
    """Write `item` through the task service, the API's own write path (its per-task lock, its
    re-read, the wake-up), unless it means what the file already says. The file is replaced
    only if it is still the version compared here: an edit made meanwhile (by the API, say) is
    never overwritten unseen."""
    try:
        current = service.read(item.name)
        outcome = _outcome(current, item.task)
        if outcome == "unchanged" or dry_run:
            return outcome
        service.put(
            item.name,
            item.data,
            from_json=False,
            if_match=quote_etag(current.etag) if current is not None else None,
            if_none_match="*" if current is None else None,
        )
    except Conflict:
        raise CliError(
            f"task {item.name} changed while it was being applied; it was left as it is now: "
            "apply again to replace it"
        ) from None
    except SpecRejected as exc:
        raise CliError(str(exc)) from None
    except (OSError, InvalidName, FolderUnavailable) as exc:
        raise CliError(f"cannot write task {item.name}: {exc}") from None
    return outcome


def _ensure_folder(root: Path, dry_run: bool) -> None:
    if root.is_dir():
        return
    if root.exists():
        raise CliError(f"{root} is not a folder")
    if dry_run:
        print(f"would create the tasks folder {root} (dry run)", file=sys.stderr)
        return
    try:
        root.mkdir(parents=True)
    except OSError as exc:
        raise CliError(f"cannot create the tasks folder {root}: {exc.strerror}") from None
    print(f"created the tasks folder {root}", file=sys.stderr)


def _outcome(current: SpecFile | None, task: Task) -> str:
    """created, configured or unchanged, comparing what the specs mean, not their text."""
    if current is None:
        return "created"
    if current.task is None:
        return "configured"  # replacing an invalid file
    return "unchanged" if _meaning(current.task) == _meaning(task) else "configured"


def _meaning(task: Task) -> dict[str, Any]:
    # metadata.name is optional and, when given, equals the stem: it carries no meaning.
    document = task.to_document()
    metadata = {k: v for k, v in document.get("metadata", {}).items() if k != "name"}
    return {**document, "metadata": metadata}
