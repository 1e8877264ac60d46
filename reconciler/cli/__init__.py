"""The `rayqueue` command line: one module per subcommand; `main.py` assembles the parser.
The command's entry is `reconciler.cli.main:main` (pyproject's `rayqueue` script); this package
re-exports nothing, so that `reconciler.cli.main` stays the module."""
