"""Quantities, read and written: memory as Kubernetes-style strings (or bare numbers meaning GiB,
the legacy unit), and the readable forms every surface people read shows (`15Gi`, `0.5 CPU`,
`1 task`), beside the parser so that both speak the same units."""

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
    """A rounded, human form for messages and tables, in the binary units Kubernetes writes:
    '15Gi' for 16145911399, '3.5Gi', '512Mi'; at most three significant digits, never an
    exponent; below a kibibyte, bytes ('512B')."""
    for suffix in ("Pi", "Ti", "Gi", "Mi", "Ki"):
        size = _BINARY[suffix]
        if num_bytes >= size:
            return f"{_significant(num_bytes / size)}{suffix}"
    return f"{max(int(num_bytes), 0)}B"


def _significant(value: float) -> str:
    """`value` to three significant digits, written without an exponent or trailing zeros."""
    digits = 0 if value >= 100 else 1 if value >= 10 else 2
    text = f"{round(value, digits):.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def readable_memory(value: object) -> str:
    """A memory amount as a person reads it, from bytes or from a quantity string of a status
    document ('16145911399B' -> '15Gi'); a value that is not a quantity is shown as it is."""
    if isinstance(value, str):
        try:
            num_bytes = parse_memory(value)
        except QuantityError:
            return value
        return "0" if num_bytes == 0 else human_memory(num_bytes)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return "0" if value == 0 else human_memory(value)


def readable_count(amount: float, unit: str) -> str:
    """A number of CPUs or GPUs with its unit: '0.5 CPU', '4 CPU' (Ray's and Kueue's
    resources are named in the singular, so the unit is not pluralised)."""
    return f"{_significant(amount) if amount < 1000 else f'{amount:.0f}'} {unit}"


def readable_resources(cpu: object, gpu: object, memory: object) -> str:
    """`4 CPU, 1 GPU, 15Gi`, resources at zero (or absent) left out; `0` when all are."""
    parts = []
    for amount, unit in ((cpu, "CPU"), (gpu, "GPU")):
        if isinstance(amount, int | float) and not isinstance(amount, bool) and amount:
            parts.append(readable_count(amount, unit))
        elif isinstance(amount, str) and amount not in ("", "0"):
            parts.append(f"{amount} {unit}")
    if memory not in (None, 0, 0.0, "", "0"):
        parts.append(readable_memory(memory))
    return ", ".join(parts) or "0"


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """'1 task', '2 tasks', '0 tasks': the count with its noun in the right number."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"
