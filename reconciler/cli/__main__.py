"""`python -m reconciler.cli`: the same as the `rayqueue` command."""

import sys

from reconciler.cli.main import main

sys.exit(main())
