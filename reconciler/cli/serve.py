"""`rayqueue serve`: run the reconcile loop (and the HTTP API) on a tasks folder."""

from __future__ import annotations

import argparse
import logging
import sys

from reconciler.app.logsetup import chosen_format, setup_logging
from reconciler.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    HelpFormatter,
    Subparsers,
    add_address_option,
    folder_parent,
)
from reconciler.cli.flags import add_setting_flags, settings_from_args
from specs.settings.process import Settings

EPILOG = """\
examples:
  rayqueue serve --dir examples/tasks                      # a private local Ray head
  rayqueue serve --dir /tasks --address http://head:8265 --host 0.0.0.0
  rayqueue serve --dir /git/repo/tasks --status-dir /status   # read-only git checkout
  RAYQUEUE_MAX_INFLIGHT=8 rayqueue serve --dir /tasks        # a tuning knob

Tuning knobs (timeouts, limits, intervals) are environment variables RAYQUEUE_<NAME>,
listed in docs/settings.md; `plan` reads the same ones.
"""


def add_loop_options(p: argparse.ArgumentParser) -> None:
    """The options that decide what a pass does; `plan` takes the same ones as `serve`."""
    add_setting_flags(p, "plan")


def loop_settings(args: argparse.Namespace) -> Settings:
    """Settings from the parsed flags; a refused value is a usage error (exit 2)."""
    return settings_from_args(args)


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "serve",
        parents=[folder_parent()],
        formatter_class=HelpFormatter,
        help="run the reconcile loop and the HTTP API",
        description="Watch a folder of task specs and keep a Ray cluster in line with it. "
        "With no Ray address, a private local Ray head is started on loopback.",
        epilog=EPILOG,
    )
    add_address_option(p)
    add_setting_flags(p, "serve")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from reconciler.app.daemon import ServeError, serve

    settings = settings_from_args(args)  # CliError (exit 2) for a refused value
    setup_logging(
        level=logging.DEBUG if args.verbose else logging.INFO,
        kind=chosen_format(settings.log_format, team_tokens=settings.team_tokens is not None),
        access_log=settings.access_log,
    )
    try:
        serve(settings)
    except ServeError as exc:
        print(f"rayqueue serve: {exc}", file=sys.stderr)
        return EXIT_USAGE if exc.usage else EXIT_ERROR
    except KeyboardInterrupt:
        pass
    return EXIT_OK
