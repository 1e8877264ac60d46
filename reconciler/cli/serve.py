"""`rayqueue serve`: run the reconcile loop (and the HTTP API) on a tasks folder."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from reconciler import policies
from reconciler.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    HelpFormatter,
    Subparsers,
    add_address_option,
    folder_parent,
    tasks_dir,
)
from specs.settings import DEFAULT_PORT, Settings, address_from_env

# The policy modules import nothing heavy, so listing them keeps `--help` fast and in step.
POLICIES = tuple(policies.POLICIES)

EPILOG = """\
examples:
  rayqueue serve --dir examples/tasks                      # a private local Ray head
  rayqueue serve --dir /tasks --address http://head:8265 --host 0.0.0.0
  rayqueue serve --dir /git/repo/tasks --status-dir /status   # read-only git checkout
"""


def add_loop_options(p: argparse.ArgumentParser) -> None:
    """The options that decide what a pass does; `plan` takes the same ones as `serve`."""
    p.add_argument(
        "--queue-id",
        default=None,
        help="tag for this queue's Ray jobs (default: derived from the folder path)",
    )
    p.add_argument(
        "--policy",
        choices=POLICIES,
        default="strict",
        help="admission policy (default strict: the head of the queue is never overtaken; "
        "backfill: EASY backfilling, later tasks start only if they cannot delay the head; "
        "besteffort: anything that fits starts). See docs/scheduling.md",
    )
    p.add_argument(
        "--max-inflight",
        type=int,
        default=32,
        help="jobs that may be Starting at once (default 32)",
    )
    p.add_argument(
        "--start-timeout",
        type=float,
        default=600.0,
        dest="start_timeout_seconds",
        help="seconds a job may stay PENDING in Ray (default 600)",
    )
    p.add_argument(
        "--lost-grace",
        type=float,
        default=60.0,
        dest="lost_grace_seconds",
        help="seconds a running job may be missing from Ray before it is Lost",
    )
    p.add_argument(
        "--max-stops-per-pass",
        type=int,
        default=10,
        help="most jobs stopped in one pass for deleted specs (0: no limit)",
    )
    p.add_argument(
        "--allow-mass-delete",
        action="store_true",
        help="carry out deletions beyond --max-stops-per-pass",
    )
    p.add_argument(
        "--count-foreign-jobs",
        action="store_true",
        help="subtract other clients' Ray jobs from free capacity",
    )
    p.add_argument(
        "--ray-history-retention",
        type=float,
        default=None,
        dest="ray_history_retention_seconds",
        metavar="SECONDS",
        help="delete this queue's finished jobs from Ray this long after they ended, once the "
        "outcome is in the sidecar (default: keep them; Ray's job list then grows forever)",
    )


def loop_settings(args: argparse.Namespace, **extra: object) -> Settings:
    """Settings from the folder and loop options; `extra` adds serve's own fields."""
    return Settings(
        tasks_dir=tasks_dir(args.dir),
        address=args.address or address_from_env(),
        status_dir=args.status_dir,
        state_dir=getattr(args, "state_dir", None),
        queue_id=args.queue_id,
        policy=args.policy,
        max_inflight=args.max_inflight,
        start_timeout_seconds=args.start_timeout_seconds,
        lost_grace_seconds=args.lost_grace_seconds,
        max_stops_per_pass=args.max_stops_per_pass,
        allow_mass_delete=args.allow_mass_delete,
        count_foreign_jobs=args.count_foreign_jobs,
        ray_history_retention_seconds=args.ray_history_retention_seconds,
        **extra,  # type: ignore[arg-type]
    )


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
    p.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="folder for resource history and the lock (default: <dir>/.rayqueue)",
    )
    p.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"HTTP port ({DEFAULT_PORT})")
    p.add_argument("--no-api", action="store_true", help="run the loop without the HTTP API")
    p.add_argument(
        "--interval",
        type=float,
        default=1.0,
        dest="interval_seconds",
        help="seconds between full passes (default 1)",
    )
    add_loop_options(p)
    p.add_argument(
        "--num-cpus",
        type=float,
        default=None,
        dest="local_num_cpus",
        help="CPUs the embedded local Ray head declares",
    )
    p.add_argument(
        "--standby",
        action="store_true",
        help="if another serve holds this folder's lock, wait and take over when it exits",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from reconciler.daemon import ServeError, serve

    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.port <= 0 or args.port > 65535:
        print(f"rayqueue serve: --port {args.port} is not a TCP port", file=sys.stderr)
        return EXIT_USAGE
    if args.max_inflight < 1:
        print("rayqueue serve: --max-inflight must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    settings = loop_settings(
        args,
        host=args.host,
        port=args.port,
        api=not args.no_api,
        interval_seconds=args.interval_seconds,
        local_num_cpus=args.local_num_cpus,
        standby=args.standby,
    )
    try:
        serve(settings)
    except ServeError as exc:
        print(f"rayqueue serve: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        pass
    return EXIT_OK
