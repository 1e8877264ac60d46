"""The pure core: specs, statuses, what Ray reports and `now` in; decisions out. No I/O, no
clock, no randomness (pyproject's `pure-core` import-linter contract)."""
