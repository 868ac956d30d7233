"""Sizes and durations as a task YAML writes them and rclone reads them
(skycore.storage.units): one parser each, shown values read back exactly."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skycore.storage import StorageSpecError
from skycore.storage.units import (
    GiB,
    KiB,
    MiB,
    PiB,
    TiB,
    parse_size,
    read_duration,
    read_size,
    show_bytes,
    show_duration,
)


@pytest.mark.parametrize(
    ("text", "size"),
    [("10G", 10 * GiB), ("512M", 512 * MiB), ("64k", 64 * KiB), ("64K", 64 * KiB),
     ("2T", 2 * TiB), ("1P", PiB), ("10Gi", 10 * GiB), ("10GiB", 10 * GiB), ("10GB", 10 * GiB),
     ("1.5M", 3 * MiB // 2), ("100B", 100), ("100b", 100), ("64", 64 * KiB), ("0", 0)],
)  # fmt: skip
def test_sizes_read_as_rclone_reads_a_flag(text: str, size: int) -> None:
    """SkyPilot hands config.mount_cached sizes to rclone as written: binary units, ``B`` is
    bytes and a number alone is KiB."""
    assert read_size(text, "10G", rclone_forms=True) == size


@pytest.mark.parametrize("text", ["100B", "64", "10X", "G", "-1G", "1.2.3M", ""])
def test_a_part_size_needs_a_unit_of_k_or_more(text: str) -> None:
    with pytest.raises(StorageSpecError) as e:
        parse_size(text, "file_mounts./m.chunk_size")
    assert e.value.message.startswith("file_mounts./m.chunk_size: ")
    assert (
        "is not a size with a unit" in e.value.message
        and "e.g. chunk_size: 8MiB" in e.value.message
    )


@pytest.mark.parametrize("value", [64, 1.5, None, True, [1], "10 X", "ten G"])
def test_a_size_that_is_not_one_says_what_to_write(value: object) -> None:
    with pytest.raises(ValueError, match=r"is not a size with a unit; .* e\.g\. 10G$"):
        read_size(value, "10G", rclone_forms=True)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1h", 3600), ("30s", 30), ("1h30m", 5400), ("500ms", 0.5), ("2d", 172800),
     ("1w", 604800), ("1M", 30 * 86400), ("1y", 365 * 86400), ("90", 90), ("1.5h", 5400),
     ("0s", 0), ("250us", 0.00025), ("1m0.5s", 60.5)],
)  # fmt: skip
def test_durations_read_as_rclone_reads_them(text: str, seconds: float) -> None:
    assert read_duration(text, "1h") == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["1 hour", "h", "-5s", "5x", "off", "", 5, None, "1h 30m"])
def test_a_duration_that_is_not_one_says_what_to_write(value: object) -> None:
    with pytest.raises(ValueError, match=r"is not a duration; .* e\.g\. 1h$"):
        read_duration(value, "1h")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(3600, "1h"), (5400, "90m"), (30, "30s"), (0.5, "500ms"), (1.1, "1100ms"), (0, "0ns"),
     (86400 * 365, "8760h"), (1_000_000, "1000000s"), (0.000001, "1us")],
)  # fmt: skip
def test_durations_shown_as_go_reads_them(seconds: float, text: str) -> None:
    """Go's time.ParseDuration (rclone) reads h, m, s, ms, us, ns; never an exponent."""
    assert show_duration(seconds) == text


@given(st.integers(0, 1 << 53))
def test_a_shown_size_reads_back_exactly(n: int) -> None:
    text = show_bytes(n)
    assert read_size(text, "1G", rclone_forms=True) == n
    assert text.endswith(("Ki", "Mi", "Gi", "Ti", "Pi", "B"))  # never a bare number (KiB)


@given(st.integers(0, 10**15))
def test_a_shown_duration_reads_back_exactly(ns: int) -> None:
    seconds = ns / 10**9
    assert read_duration(show_duration(seconds), "1h") == seconds


@given(st.fractions(min_value=0, max_value=10**6, max_denominator=1000))
def test_a_written_decimal_size_is_read_without_float_error(value: Fraction) -> None:
    text = f"{float(value):.3f}M"
    assert read_size(text, "1G", rclone_forms=True) == int(Fraction(text[:-1]) * MiB)
