"""The `rayqueue` command line. Each subcommand parses its flags into explicit objects."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from reconciler.settings import DEFAULT_PORT, Settings, address_from_env

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2


def _serve_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "serve",
        help="run the reconcile loop and the HTTP API",
        description="Watch a folder of task specs and keep a Ray cluster in line with it. "
        "With no Ray address, a private local Ray head is started on loopback.",
    )
    p.add_argument(
        "--dir", type=Path, default=None, help="tasks folder (default: $RAYQUEUE_DIR or ./tasks)"
    )
    p.add_argument(
        "--address",
        default=None,
        help="Ray dashboard address, e.g. http://head:8265 (default: "
        "$RAY_DASHBOARD_ADDRESS, then $RAY_ADDRESS, else a local Ray head)",
    )
    p.add_argument(
        "--status-dir",
        type=Path,
        default=None,
        help="write status sidecars into this parallel tree instead of beside specs",
    )
    p.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="folder for resource history and the lock (default: <dir>/.rayqueue)",
    )
    p.add_argument(
        "--queue-id",
        default=None,
        help="tag for this queue's Ray jobs (default: derived from the folder path)",
    )
    p.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"HTTP port ({DEFAULT_PORT})")
    p.add_argument("--no-api", action="store_true", help="run the loop without the HTTP API")
    p.add_argument(
        "--policy",
        choices=["strict", "besteffort"],
        default="strict",
        help="admission policy (default strict: the head of the queue is never overtaken)",
    )
    p.add_argument(
        "--interval",
        type=float,
        default=1.0,
        dest="interval_seconds",
        help="seconds between full passes (default 1)",
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
        "--num-cpus",
        type=float,
        default=None,
        dest="local_num_cpus",
        help="CPUs the embedded local Ray head declares",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    p.set_defaults(func=_cmd_serve)


def tasks_dir(value: Path | None) -> Path:
    if value is not None:
        return value
    env = os.environ.get("RAYQUEUE_DIR")
    return Path(env) if env else Path("tasks")


def _cmd_serve(args: argparse.Namespace) -> int:
    from reconciler.serve import ServeError, serve

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
    settings = Settings(
        tasks_dir=tasks_dir(args.dir),
        address=args.address or address_from_env(),
        status_dir=args.status_dir,
        state_dir=args.state_dir,
        queue_id=args.queue_id,
        host=args.host,
        port=args.port,
        api=not args.no_api,
        interval_seconds=args.interval_seconds,
        policy=args.policy,
        max_inflight=args.max_inflight,
        start_timeout_seconds=args.start_timeout_seconds,
        lost_grace_seconds=args.lost_grace_seconds,
        max_stops_per_pass=args.max_stops_per_pass,
        allow_mass_delete=args.allow_mass_delete,
        count_foreign_jobs=args.count_foreign_jobs,
        local_num_cpus=args.local_num_cpus,
    )
    try:
        serve(settings)
    except ServeError as exc:
        print(f"rayqueue serve: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        pass
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rayqueue",
        description="A declarative job queue in front of a shared Ray cluster: "
        "YAML specs in a folder, Ray jobs out, status files back.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _serve_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
