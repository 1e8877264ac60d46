"""`rayqueue token hash` and `rayqueue token new`: entries for the team tokens file.

The file (--team-tokens) stores only each token's sha256, so a leaked file grants nothing. A
token is read from standard input, never from the command line, where `ps` and the shell's
history would keep it.
"""

from __future__ import annotations

import argparse
import getpass
import secrets
import sys

import yaml

from reconciler.cli.common import EXIT_OK, CliError, HelpFormatter, Subparsers
from specs.tenancy.access import (
    AccessError,
    Role,
    hash_token,
    parse_tokens_file,
    token_weakness,
)

EPILOG = """\
examples:
  rayqueue token new --name team-a-ci --role write --folder team-a >> tokens.yaml.part
  printf %s "$TOKEN" | rayqueue token hash
  (umask 077; python3 -c 'import secrets; print(secrets.token_urlsafe(32))' > api-token)
                                                            # a token for --token-file

`new` prints the token once, on standard error, and the YAML entry (its hash) on standard
output; put the entries under `tokens:` in the file given to `rayqueue serve --team-tokens`.
"""


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "token",
        formatter_class=HelpFormatter,
        help="make API tokens and their hashes for --team-tokens",
        description="Hash a token, or make a new one with its entry for the team tokens file.",
        epilog=EPILOG,
    )
    actions = p.add_subparsers(dest="token_command", metavar="ACTION", required=True)
    hashing = actions.add_parser(
        "hash", help="print the sha256 of the token read from standard input"
    )
    hashing.set_defaults(func=run_hash)
    new = actions.add_parser(
        "new", help="make a random token; print it (stderr) and its YAML entry (stdout)"
    )
    new.add_argument("--name", required=True, help="who the token is for (shown in audits)")
    new.add_argument("--role", required=True, choices=[r.value for r in Role])
    new.add_argument(
        "--folder",
        action="append",
        default=[],
        help="for write: a folder the token may change (repeat; '/' for all); for admin: "
        "the team folders it administers (their _queues.yaml too), none: the whole cluster",
    )
    new.set_defaults(func=run_new)


def read_token() -> str:
    """The token from standard input (a prompt without echo on a terminal)."""
    text = getpass.getpass("token: ") if sys.stdin.isatty() else sys.stdin.read()
    token = text.strip()
    if not token or any(c.isspace() for c in token):
        raise CliError("give exactly one token on standard input")
    return token


def run_hash(args: argparse.Namespace) -> int:
    """The hash of a clear token, once it passes the check serve makes of the tokens it sees
    in clear ($RAYQUEUE_API_TOKEN, --token-file): the tokens file holds only hashes, so this is
    the last place a guessable team token can be refused."""
    del args
    token = read_token()
    weakness = token_weakness(token)
    if weakness is not None:
        raise CliError(
            f"the token {weakness}, so it could be guessed; `rayqueue token new` makes one"
        )
    print(hash_token(token))
    return EXIT_OK


def run_new(args: argparse.Namespace) -> int:
    token = secrets.token_urlsafe(32)
    entry: dict[str, object] = {"name": args.name, "sha256": hash_token(token), "role": args.role}
    if args.folder:
        entry["folders"] = list(args.folder)
    text = yaml.safe_dump([entry], sort_keys=False, default_flow_style=None)
    try:
        # The same checks serve makes, so a bad entry fails now and not at the next start.
        parse_tokens_file(yaml.safe_dump({"tokens": [entry]}).encode(), "the new entry")
    except AccessError as exc:
        raise CliError(str(exc)) from None
    print(f"token for {args.name} (shown once; store it as a secret): {token}", file=sys.stderr)
    sys.stdout.write(text)
    return EXIT_OK
