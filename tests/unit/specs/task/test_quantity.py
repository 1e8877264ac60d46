"""Memory quantities: units, the GiB default for bare numbers, and the canonical text form."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specs.task.quantity import (
    MAX_BYTES,
    QuantityError,
    format_memory,
    human_memory,
    parse_memory,
    plural,
    readable_count,
    readable_memory,
    readable_resources,
)

GIB = 2**30
MIB = 2**20


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (4, 4 * GIB),  # bare numbers mean GiB, as in the legacy API
        ("4", 4 * GIB),
        (0.5, 512 * MIB),
        (0, 0),
        ("512Mi", 512 * MIB),
        ("4Gi", 4 * GIB),
        ("1.5Gi", 3 * GIB // 2),
        ("2G", 2 * 10**9),
        ("2M", 2 * 10**6),
        ("3k", 3000),
        ("3K", 3000),
        ("1Ki", 1024),
        ("1Ti", 2**40),
        ("100B", 100),
        (" 8 Gi ", 8 * GIB),
        ("0.1Ki", 103),  # rounded up: a reservation must never be smaller than asked
        ("1024Pi", MAX_BYTES),
    ],
)
def test_parse_memory(value: object, expected: int) -> None:
    assert parse_memory(value) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (True, "expected a number of GiB"),
        (None, "expected a number of GiB"),
        ([4], "expected a number of GiB"),
        (-1, "must be >= 0"),
        ("-1Gi", "is not a quantity"),
        ("4Gb", "is not a quantity"),
        ("4 GiB", "is not a quantity"),
        ("", "is not a quantity"),
        ("1e3", "is not a quantity"),
        (math.nan, "must be a finite number"),
        (math.inf, "must be a finite number"),
        ("1025Pi", "larger than any cluster"),
        (2**61, "larger than any cluster"),
    ],
)
def test_parse_memory_rejects(value: object, message: str) -> None:
    with pytest.raises(QuantityError, match=message):
        parse_memory(value)


def test_quantity_error_is_a_value_error() -> None:
    # pydantic turns ValueError (only) into a validation error with a location.
    assert issubclass(QuantityError, ValueError)


@pytest.mark.parametrize(
    ("num_bytes", "text"),
    [
        (0, "0"),
        (1, "1B"),
        (100, "100B"),
        (1024, "1Ki"),
        (1536 * MIB, "1536Mi"),
        (4 * GIB, "4Gi"),
        (2 * 10**9, "1953125Ki"),
        (2**50, "1Pi"),
    ],
)
def test_format_memory(num_bytes: int, text: str) -> None:
    assert format_memory(num_bytes) == text


@settings(database=None)
@given(st.integers(min_value=0, max_value=2**53))
def test_format_then_parse_is_identity(num_bytes: int) -> None:
    # Up to 2**53 (8 PiB): parse_memory goes through float, so odd byte counts above that
    # lose their last bits (9007199254740993B parses as ...992).
    assert parse_memory(format_memory(num_bytes)) == num_bytes


@settings(database=None)
@given(st.integers(min_value=0, max_value=MAX_BYTES // 2**10))
def test_format_then_parse_is_identity_for_whole_kibibytes(kib: int) -> None:
    assert parse_memory(format_memory(kib * 2**10)) == kib * 2**10


@pytest.mark.parametrize(
    ("num_bytes", "text"),
    [(0, "0B"), (512, "512B"), (3.5 * GIB, "3.5Gi"), (1536, "1.5Ki"), (2**41, "2Ti")],
)
def test_human_memory(num_bytes: float, text: str) -> None:
    assert human_memory(num_bytes) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (16145911399, "15Gi"),
        ("16145911399B", "15Gi"),
        (512 * 2**20, "512Mi"),
        ("4Gi", "4Gi"),
        (1000 * GIB, "1000Gi"),
        (12.34 * GIB, "12.3Gi"),
        (0, "0"),
        ("0", "0"),
        ("not a quantity", "not a quantity"),
    ],
)
def test_readable_memory_is_in_binary_units_without_exponents(value: object, text: str) -> None:
    assert readable_memory(value) == text


def test_readable_cpus_resources_and_counts() -> None:
    assert readable_count(0.5, "CPU") == "0.5 CPU"
    assert readable_count(4, "CPU") == "4 CPU"
    assert readable_resources(64, 8, "16145911399B") == "64 CPU, 8 GPU, 15Gi"
    assert readable_resources(0.5, 0, 0) == "0.5 CPU"
    assert readable_resources(0, 0, "0") == "0"
    assert [plural(n, "task") for n in (0, 1, 2)] == ["0 tasks", "1 task", "2 tasks"]
