"""`rayqueue logs NAME [-f]`: the log of the task's current run, read from Ray."""

from __future__ import annotations

import argparse
import sys

from reconciler.cli import common
from reconciler.cli.common import (
    EXIT_OK,
    CliError,
    HelpFormatter,
    Subparsers,
    add_address_option,
    folder_parent,
    open_store,
    require_address,
)
from specs.cluster import JobNotFound, RayError, TailLimits
from specs.folder.store import InvalidName, validate_name
from specs.task.arrays import split
from specs.yamlio.parse import SpecParseError, parse_status

EPILOG = """\
The task's sidecar names its current run's Ray submission id; the log comes from Ray's job
API, the only thing besides `plan` that the CLI asks Ray for.

examples:
  rayqueue logs train --address http://head:8265
  RAY_DASHBOARD_ADDRESS=http://head:8265 rayqueue logs train -f     # Ctrl-C to stop following
"""


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "logs",
        parents=[folder_parent()],
        formatter_class=HelpFormatter,
        help="print the log of a task's current run, from Ray",
        description="Print the log of the task's current Ray job; -f follows it until the "
        "job ends.",
        epilog=EPILOG,
    )
    p.add_argument("name", metavar="NAME", help="the task")
    p.add_argument("-f", "--follow", action="store_true", help="stream the log as it grows")
    p.add_argument(
        "--tail", type=int, default=None, metavar="N", help="only the last N lines (not with -f)"
    )
    add_address_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.follow and args.tail is not None:
        raise CliError("--tail cannot be combined with -f", common.EXIT_USAGE)
    address = require_address(args, "logs")
    sid = _submission_id(args)
    adapter = common.make_adapter(address)
    try:
        if not args.follow:
            if args.tail is None:
                text = adapter.logs(sid)
            else:  # only the log's end is read from Ray
                text = adapter.log_tail(sid, TailLimits.requested(args.tail))
                text += "\n" if text else ""
            sys.stdout.write(text)
            return EXIT_OK
        chunks = adapter.tail_logs(sid)
        try:
            for chunk in chunks:
                sys.stdout.write(chunk)
                sys.stdout.flush()
        except KeyboardInterrupt:
            pass  # following ends with Ctrl-C, as with kubectl logs -f
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()  # closes the websocket
    except JobNotFound:
        raise CliError(f"Ray at {address} has no job {sid} (another cluster?)") from None
    except RayError as exc:
        raise CliError(f"cannot read the log from Ray at {address}: {exc}") from None
    return EXIT_OK


def _submission_id(args: argparse.Namespace) -> str:
    """The current run's id, from the sidecar (the spec may already be deleted)."""
    name = args.name
    element = split(name)  # NAME[i]: an element of a task array, in the array's sidecar
    try:
        validate_name(element[0] if element is not None else name)
    except InvalidName as exc:
        raise CliError(str(exc)) from None
    store = open_store(args)
    if element is not None:
        status = store.read_array(element[0]).get(element[1])
        if status is None:
            raise CliError(f'task "{name}" not found (or not seen by the reconciler yet)')
        if not status.status.submission_id:
            phase = status.status.phase.value
            raise CliError(f"task {name} has not been submitted to Ray yet (phase {phase})")
        return status.status.submission_id
    path = store.status_path(name)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        if store.read_spec_text(name) is None:
            raise CliError(f'task "{name}" not found') from None
        raise CliError(
            f"task {name} has no status yet (is `rayqueue serve` running on {store.root}?)"
        ) from None
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}") from None
    try:
        body = parse_status(data, file=str(path)).status
    except SpecParseError as exc:
        raise CliError(f"cannot read the status of {name}: {exc.errors[0]}") from None
    if not body.submission_id:
        raise CliError(f"task {name} has not been submitted to Ray yet (phase {body.phase.value})")
    return body.submission_id
