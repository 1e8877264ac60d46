"""The `rayqueue` command line: one module per subcommand; `main.py` assembles the parser."""
