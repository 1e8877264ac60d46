"""The `rayqueue` command line: builds the parser; each command lives in reconciler/cli/.

The folder is the database: every command but `serve`, `logs` and `plan` works on the tasks
folder alone, without a server. Exit codes: 0 ok, 1 error (invalid, not found, Ray
unreachable), 2 usage.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import metadata

from reconciler.cli import (
    apply,
    describe,
    edit,
    get,
    logs,
    plan,
    queues,
    schema,
    serve,
    suggest,
    token,
    validate,
)
from reconciler.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    HelpFormatter,
    add_folder_options,
    tasks_dir,
)

__all__ = [
    "EXIT_ERROR",
    "EXIT_OK",
    "EXIT_USAGE",
    "build_parser",
    "main",
    "package_version",
    "tasks_dir",
]

EPILOG = """\
The tasks folder is --dir, else $RAYQUEUE_DIR, else ./tasks. The Ray address (logs, plan,
describe) is --address, else $RAY_DASHBOARD_ADDRESS, else $RAY_ADDRESS.

a first session:
  rayqueue serve --dir tasks &                 # the loop, with a private local Ray head
  rayqueue apply -f examples/tasks/ -R --dir tasks
  rayqueue get --dir tasks -w

Run `rayqueue COMMAND --help` for a command's options and examples.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rayqueue",
        formatter_class=HelpFormatter,
        description="A declarative job queue in front of a shared Ray cluster: "
        "YAML specs in a folder, Ray jobs out, status files back.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"rayqueue {package_version()}")
    # Also accepted before the command (`rayqueue --dir X get`), as kubectl takes -n.
    add_folder_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for module in (serve, apply, get, describe):
        module.register(sub)
    edit.register(sub)  # delete, suspend, resume, set-priority, rerun
    for module in (queues, suggest, logs, validate, plan, schema, token):
        module.register(sub)
    return parser


def package_version() -> str:
    """The installed package's version, from its metadata (pyproject.toml's `version`)."""
    try:
        return metadata.version("rayqueue")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) and usage errors (2), as a return value
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if not hasattr(args, "func"):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.func(args))
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except BrokenPipeError:
        # `rayqueue get | head`: the reader left; not an error worth a traceback.
        sys.stderr.close()
        return EXIT_OK
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
