"""The `rayqueue` subcommands, one module each; reconciler/cli.py assembles the parser."""
