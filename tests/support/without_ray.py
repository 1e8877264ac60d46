"""python -m tests.support.without_ray [pytest args]: pytest as if Ray were not installed.

Proves the pure suites need no Ray: any `import ray` fails as it would on such a machine.
"""

from __future__ import annotations

import sys

import pytest


def main(args: list[str]) -> int:
    sys.modules["ray"] = None  # type: ignore[assignment]  # None in sys.modules: ImportError
    return int(pytest.main(args))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
