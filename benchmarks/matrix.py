"""The scheduling benchmark matrix at the size of its committed table (docs/results/matrix.md).

python -m benchmarks.matrix --trace /work/shared/traces/lublin_256.swf --workers 2   # that table
python -m benchmarks.matrix --trace T --jobs 500                                     # smaller

Every shape, seed (tuning and held-out) and configuration of `python -m reconciler.sim matrix`,
one cell a simulated run; the table goes to stdout and to `--markdown`, every cell's figures to
`--out`. Further arguments go to the matrix command as they are (a later one wins).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from benchmarks.common import RESULTS
from reconciler.sim import matrix

TABLE_JOBS = 2000
"""Jobs a cell in the committed table: the simulator's own default (`--jobs`)."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS / "matrix.json")
    parser.add_argument("--markdown", type=Path, default=RESULTS / "matrix.md")
    args, rest = parser.parse_known_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.markdown.parent.mkdir(parents=True, exist_ok=True)
    command = ["--jobs", str(TABLE_JOBS), "--seeds", "all", *rest]
    return matrix.main([*command, "--json", str(args.out), "--markdown", str(args.markdown)])


if __name__ == "__main__":
    sys.exit(main())
