"""`rayqueue schema`: the JSON Schema of a task spec, for editors and CI."""

from __future__ import annotations

import argparse
import sys

from reconciler.cli.common import EXIT_OK, HelpFormatter, Subparsers
from specs.task.schema import render_schema

EPILOG = """\
The same text is committed as specs/task.schema.json. Point an editor at it with a first line
such as:
  # yaml-language-server: $schema=../../specs/task.schema.json

examples:
  rayqueue schema > task.schema.json
"""


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "schema",
        formatter_class=HelpFormatter,
        help="print the JSON Schema of a task spec",
        description="Print the JSON Schema (draft-07) of a rayqueue/v1 Task, generated from "
        "the pydantic models.",
        epilog=EPILOG,
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    del args
    sys.stdout.write(render_schema())
    return EXIT_OK
