"""What every command shares: exit codes, the folder and address options, errors, and tables."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.shell.ops import head_record
from specs.folder.store import FolderUnavailable, TaskStore
from specs.service.tasks import TaskService
from specs.service.views import TaskView
from specs.settings.process import address_from_env, knobs
from specs.settings.rayaddress import DashboardUrl, parse_ray_address
from specs.task.models import ARRAY_LIMIT_VAR, MAX_ARRAY_ELEMENTS

if TYPE_CHECKING:
    from reconciler.shell.raycluster.adapter import RayJobsAdapter

EXIT_OK = 0
EXIT_ERROR = 1  # invalid input, not found, Ray unreachable
EXIT_USAGE = 2  # bad flags; argparse uses the same code

LOCATE_TIMEOUT_SECONDS = 5.0  # for each step from a Ray address to its dashboard

# The type argparse gives add_subparsers(); generic only in the stubs, not at run time.
if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    Subparsers = argparse._SubParsersAction


class CliError(Exception):
    """A failure the user can act on; main() prints `error: <message>` and exits with `code`."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the line breaks of descriptions and epilogs (the examples in --help)."""


def folder_parent() -> argparse.ArgumentParser:
    """--dir and --status-dir for a subcommand.

    The default is SUPPRESS so that the same flags given before the subcommand
    (`rayqueue --dir X get`) are not overwritten by the subcommand's defaults.
    """
    parent = argparse.ArgumentParser(add_help=False)
    add_folder_options(parent, default=argparse.SUPPRESS)
    return parent


def add_folder_options(parser: argparse.ArgumentParser, default: object = None) -> None:
    parser.add_argument(
        "--dir",
        type=Path,
        default=default,
        metavar="DIR",
        help="the tasks folder (default: $RAYQUEUE_DIR, else ./tasks)",
    )
    parser.add_argument(
        "--status-dir",
        type=Path,
        default=default,
        metavar="DIR",
        help="where sidecars live if not beside the specs (as given to `rayqueue serve`)",
    )


def add_address_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--address",
        default=None,
        help="the Ray address: the dashboard's URL (http://head:8265), the GCS's host:port "
        "(head:6379) or auto (default: $RAY_DASHBOARD_ADDRESS, then $RAY_ADDRESS)",
    )


def tasks_dir(value: Path | None) -> Path:
    """--dir, then $RAYQUEUE_DIR, then ./tasks."""
    if value is not None:
        return value
    env = os.environ.get("RAYQUEUE_DIR")
    return Path(env) if env else Path("tasks")


def max_array_elements() -> int:
    """The setting max_array_elements from $RAYQUEUE_MAX_ARRAY_ELEMENTS, so every command
    reads a folder as serve with the same environment does; a bad value is a usage error."""
    text = os.environ.get(ARRAY_LIMIT_VAR, "").strip()
    if not text:
        return MAX_ARRAY_ELEMENTS
    try:
        value = int(text)
    except ValueError:
        raise CliError(
            f"{ARRAY_LIMIT_VAR} must be a whole number, not {text!r}", EXIT_USAGE
        ) from None
    problem = dict(knobs())["max_array_elements"].problem("", value, label=ARRAY_LIMIT_VAR)
    if problem is not None:
        raise CliError(problem, EXIT_USAGE)
    return value


def open_store(args: argparse.Namespace) -> TaskStore:
    return TaskStore(tasks_dir(args.dir), args.status_dir, max_array_elements=max_array_elements())


def open_service(args: argparse.Namespace) -> TaskService:
    return TaskService(open_store(args))


def load_views(service: TaskService) -> list[TaskView]:
    """Every task in the folder with its sidecar, in queue order."""
    try:
        return service.views()
    except FolderUnavailable as exc:
        raise CliError(f"{exc} (pass --dir, or set RAYQUEUE_DIR)") from None


def find_view(views: Iterable[TaskView], name: str) -> TaskView:
    for view in views:
        if view.name == name:
            return view
    raise CliError(f'task "{name}" not found')


def address_of(args: argparse.Namespace) -> str | None:
    """The Ray dashboard's URL from --address, then $RAY_DASHBOARD_ADDRESS, then $RAY_ADDRESS,
    then the address a running `rayqueue serve` on this folder recorded (said on stderr); None
    if there is none, or a GCS address or `auto` that does not answer (said on stderr)."""
    given = getattr(args, "address", None) or address_from_env()
    if given:
        return dashboard_of(str(given), required=False)
    return _recorded_address(args, quiet_if_absent=True)


def _recorded_address(args: argparse.Namespace, *, quiet_if_absent: bool) -> str | None:
    path = tasks_dir(getattr(args, "dir", None)) / ".rayqueue"
    found = head_record.lookup(path)
    if found.address is not None or found.stale or not quiet_if_absent:
        print(f"rayqueue: {found.note}", file=sys.stderr)
    return found.address


def require_address(args: argparse.Namespace, command: str) -> str:
    """As address_of, but a command that cannot work without Ray fails when there is none."""
    given = getattr(args, "address", None) or address_from_env()
    if given:
        dashboard = dashboard_of(str(given), required=True)
        assert dashboard is not None
        return dashboard
    address = _recorded_address(args, quiet_if_absent=False)
    if address is None:
        raise CliError(
            f"`rayqueue {command}` needs the Ray dashboard address: start `rayqueue serve` on "
            "this folder, pass --address http://HOST:8265, or set RAY_DASHBOARD_ADDRESS"
        )
    return address


def dashboard_of(given: str, *, required: bool) -> str | None:
    """The dashboard URL a Ray address leads to, found as serve finds it
    (reconciler/shell/raycluster/address.py). A value of no form, or one that answers but not
    as Ray does, is a usage error. A dashboard URL that does not answer is kept, so the command
    says what fails; another address that does not answer is an error when `required`, else
    said on stderr and None."""
    # Imported here: only a command that talks to Ray needs it (and the GCS form loads Ray).
    from reconciler.shell.raycluster.address import AddressRefused, NotAnswering, locate

    try:
        return locate(given, timeout_seconds=LOCATE_TIMEOUT_SECONDS).dashboard
    except (ValueError, AddressRefused) as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    except NotAnswering as exc:
        form = parse_ray_address(given)
        if isinstance(form, DashboardUrl):
            return form.url
        if required:
            raise CliError(f"Ray at {given} does not answer: {exc}") from None
        print(f"rayqueue: Ray at {given} does not answer: {exc}", file=sys.stderr)
        return None


def make_adapter(
    address: str, timeout_seconds: float = 10.0, *, entrypoint_resources: bool = False
) -> RayJobsAdapter:
    """The Ray adapter for read-only commands. Imported late: `ray` takes a second to import.

    Tests replace this function to hand in a fake.
    """
    from reconciler.shell.raycluster.adapter import RayJobsAdapter

    try:
        return RayJobsAdapter(
            address, timeout_seconds=timeout_seconds, entrypoint_resources=entrypoint_resources
        )
    except ValueError as exc:
        raise CliError(str(exc)) from exc


def dashboard_link(address: str, submission_id: str) -> str:
    base = address if "://" in address else f"http://{address}"
    return f"{base.rstrip('/')}/#/jobs/{submission_id}"


# --- formatting ------------------------------------------------------------------------------


def number(value: float) -> str:
    return f"{value:g}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell, three spaces apart, as kubectl prints them."""
    widths = [len(h) for h in header]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = []
    for row in [header, *rows]:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row)]
        lines.append("   ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


def one_line(text: str | None, limit: int | None = None) -> str:
    if not text:
        return ""
    first = text.strip().splitlines()[0] if text.strip() else ""
    if limit is not None and len(first) > limit:
        return first[: limit - 1] + "…"
    return first
