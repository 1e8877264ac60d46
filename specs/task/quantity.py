"""Memory quantities: Kubernetes-style strings, or bare numbers meaning GiB (the legacy unit)."""

from __future__ import annotations

import math
import re

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}
_DECIMAL = {"k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15}
_UNITS = {**_BINARY, **_DECIMAL, "B": 1}
_QUANTITY = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(Ki|Mi|Gi|Ti|Pi|k|K|M|G|T|P|B)?\s*$")

GIB = 2**30
# Far beyond any real node; keeps arithmetic in plain ints and rejects typos like 4e30.
MAX_BYTES = 2**60


class QuantityError(ValueError):
    """The value is not a memory quantity."""


def parse_memory(value: object) -> int:
    """Return bytes. Numbers (and numeric strings) mean GiB; `512Mi`, `2G`, `100B` carry a unit."""
    if isinstance(value, bool):
        raise QuantityError("expected a number of GiB or a quantity such as 512Mi or 4Gi")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise QuantityError("must be a finite number")
        number, unit = float(value), GIB
    elif isinstance(value, str):
        match = _QUANTITY.match(value)
        if match is None:
            raise QuantityError(
                f"{value!r} is not a quantity; use a number of GiB or 512Mi, 4Gi, 2G, 1024B"
            )
        number = float(match.group(1))
        unit = _UNITS[match.group(2)] if match.group(2) else GIB
    else:
        raise QuantityError("expected a number of GiB or a quantity such as 512Mi or 4Gi")
    if number < 0:
        raise QuantityError("must be >= 0")
    result = math.ceil(number * unit)
    if result > MAX_BYTES:
        raise QuantityError("is larger than any cluster could hold")
    return result


def format_memory(num_bytes: int) -> str:
    """The shortest exact binary quantity, e.g. 4294967296 -> '4Gi'; 0 -> '0'."""
    if num_bytes == 0:
        return "0"
    for suffix in ("Pi", "Ti", "Gi", "Mi", "Ki"):
        size = _BINARY[suffix]
        if num_bytes % size == 0:
            return f"{num_bytes // size}{suffix}"
    return f"{num_bytes}B"


def human_memory(num_bytes: float) -> str:
    """A rounded, human form for messages and tables: '3.5Gi'."""
    for suffix in ("Ti", "Gi", "Mi", "Ki"):
        size = _BINARY[suffix]
        if num_bytes >= size:
            return f"{num_bytes / size:.3g}{suffix}"
    return f"{int(num_bytes)}B"
