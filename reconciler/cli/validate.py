"""`rayqueue validate FILE|DIR...`: exit 0 if every spec is valid, 1 otherwise."""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
from pathlib import Path

from reconciler.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    HelpFormatter,
    Subparsers,
    max_array_elements,
)
from reconciler.cli.files import STDIN, Source, parse_source, read_sources
from specs.folder.store import FolderUnavailable, TaskStore
from specs.queues.bounds import Bounded
from specs.queues.config import CONFIG_FILE
from specs.queues.parse import parse_queue_config
from specs.queues.tree import divide_tree
from specs.settings.process import Settings
from specs.task.errors import SpecError
from specs.tenancy.access import Tokens
from specs.tenancy.runtimepaths import RuntimePaths
from specs.yamlio.parse import MAX_FILE_BYTES, SpecParseError, parse_task

EPILOG = """\
A file is read as `apply -f` reads it: several `---`-separated tasks are allowed.
A folder is read as `rayqueue serve` reads a tasks folder: one task per file, named
after the file, hidden files, editor leftovers and status sidecars ignored. Its queue
configuration (_queues.yaml), if any, is checked too; so is a _queues.yaml named alone,
or any file of `kind: QueueConfig` (as given to serve --queues).

Errors read `file:line:column: field: message`, one per line, on stderr. A field of a
team's own _queues.yaml asked beyond what its parent grants is a warning of the same form
(the file is valid: the parent's bound is in force).

examples:
  rayqueue validate examples/tasks/hello.yaml
  rayqueue validate tasks/                # in CI, before a GitOps commit lands
  rayqueue validate tasks/_queues.yaml    # the queue configuration alone
"""


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "validate",
        formatter_class=HelpFormatter,
        help="check spec files without writing anything (exit 0 valid, 1 invalid)",
        description="Check spec files and tasks folders offline, with the reconciler's parser.",
        epilog=EPILOG,
    )
    p.add_argument("paths", nargs="+", metavar="FILE|DIR|-", help="what to check")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the errors")
    p.add_argument(
        "--working-dir-root",
        action="append",
        default=[],
        metavar="PATH",
        dest="working_dir_roots",
        help="check a folder's runtimeEnv local paths as `serve --working-dir-root` does "
        "(repeat for more; relative paths resolve against the current directory)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    failed = False
    for arg in args.paths:
        if arg != STDIN and Path(arg).is_dir():
            results = _check_folder(Path(arg), tuple(args.working_dir_roots))
        elif arg != STDIN and (Path(arg).name == CONFIG_FILE or _is_queue_config(Path(arg))):
            results = [_check_queues(Path(arg))]
        else:
            results = [_check_file(source) for source in read_sources([arg], recursive=False)]
        for display, names, errors in results:
            if errors:
                failed = True
                for error in errors:
                    print(error, file=sys.stderr)
            elif not args.quiet:
                shown = ", ".join(n if n.startswith("queue") else f"task/{n}" for n in names)
                print(f"{display}: ok ({shown})")
    return EXIT_ERROR if failed else EXIT_OK


def _check_file(source: Source) -> tuple[str, list[str], list[SpecError]]:
    try:
        items = parse_source(source)
    except SpecParseError as exc:
        return source.display, [], exc.errors
    return source.display, [name for name, _ in items], []


def _check_folder(
    root: Path, working_dir_roots: tuple[str, ...] = ()
) -> list[tuple[str, list[str], list[SpecError]]]:
    """Exactly what the reconciler would see, with every error of each file (not just one)."""
    try:
        settings = Settings(tasks_dir=root, working_dir_roots=working_dir_roots)
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    paths = RuntimePaths.from_settings(settings, Tokens())
    try:
        limit = max_array_elements()
        entries = TaskStore(root, check=paths.store_check(), max_array_elements=limit).scan()
    except FolderUnavailable as exc:
        raise CliError(str(exc)) from None
    if not entries:
        raise CliError(f"no task specs in {root}")
    results: list[tuple[str, list[str], list[SpecError]]] = []
    if (root / CONFIG_FILE).exists():
        results.append(_check_queues(root / CONFIG_FILE))
        results += _check_sub_queues(root)
    for name, entry in sorted(entries.items()):
        path = entry.path
        assert path is not None  # a scanned task names its file
        display = os.path.join(str(root), name + path.suffix)
        if entry.error is None:
            results.append((display, [name], []))
            continue
        errors = [dataclasses.replace(entry.error, file=display)]
        try:
            if path.stat().st_size <= MAX_FILE_BYTES:
                stem = name.rsplit("/", 1)[-1]
                parse_task(
                    path.read_bytes(),
                    file=display,
                    expected_name=stem,
                    task_name=name,
                    max_array_elements=limit,
                )
        except SpecParseError as exc:
            errors = exc.errors  # all of them, where the scan keeps the first
        except OSError:
            pass
        results.append((display, [], errors))
    return results


_QUEUE_KIND = re.compile(rb"^kind:[ \t]*[\"']?QueueConfig[\"']?[ \t]*(#.*)?$", re.MULTILINE)


def _is_queue_config(path: Path) -> bool:
    """A file that says `kind: QueueConfig` at its top level is checked as serve reads
    `--queues FILE`, whatever its name (an unreadable one is left to the task reader)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(MAX_FILE_BYTES + 1)
    except OSError:
        return False
    return _QUEUE_KIND.search(head) is not None


def _check_sub_queues(root: Path) -> list[tuple[str, list[str], list[SpecError]]]:
    """The queues' own files (`team-a/_queues.yaml`, nested queues), read as serve reads them
    with the default depth limit; nothing when the top file is bad (reported above)."""
    try:
        top = parse_queue_config((root / CONFIG_FILE).read_bytes())
    except (SpecParseError, OSError):
        return []
    prefix = str(root) + os.sep
    bounded: list[Bounded] = []
    try:
        tree = divide_tree(top, root, prefix=prefix, bounded=bounded)
    except SpecParseError as exc:
        return [(exc.errors[0].file if exc.errors else prefix, [], exc.errors)]
    except OSError as exc:
        return [(prefix, [], [SpecError(prefix, None, None, None, f"cannot read: {exc}")])]
    for item in bounded:  # valid: what a team's file asks beyond its parent is bounded
        print(f"warning: {item.note}", file=sys.stderr)
    added = tree.queue_names()[len(top.spec.queues) : -1]
    return [(prefix + "(sub-queues)", [f"queues {', '.join(added)}"], [])] if added else []


def _check_queues(path: Path) -> tuple[str, list[str], list[SpecError]]:
    """`_queues.yaml` as `serve` reads it; a bad one would leave the last good one in force."""
    display = str(path)
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            message = f"file is larger than the {MAX_FILE_BYTES // 1024} KiB limit"
            return display, [], [SpecError(display, None, None, None, message)]
        config = parse_queue_config(path.read_bytes(), file=display)
    except SpecParseError as exc:
        return display, [], exc.errors
    except OSError as exc:
        return display, [], [SpecError(display, None, None, None, f"cannot read: {exc.strerror}")]
    return display, [f"queues {', '.join(config.queue_names())}"], []
