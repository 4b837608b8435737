"""Friendly units: the strings every report prints."""

import pytest

from tinyprof.units import format_bytes, format_count, format_seconds, format_si


@pytest.mark.parametrize("seconds, text", [
    (1.5, "1.5 s"), (0.00123, "1.23 ms"), (0.0009996, "1 ms"), (0.0052, "5.2 ms"),
    (2.5e-7, "250 ns"), (1.58e-8, "15.8 ns"), (0.9996, "1 s"), (0.0, "0 ns"),
    (123.456, "123 s"),
])
def test_format_seconds_rounds_into_the_right_unit(seconds, text):
    assert format_seconds(seconds) == text


def test_bytes_counts_and_si():
    assert format_bytes(497_759_232) == "497.8 MB"
    assert format_bytes(512) == "512 B"
    assert format_bytes(-2_000) == "-2.0 KB"
    assert format_count(124_439_808) == "124,439,808"
    assert format_si(291_648_307_200, "FLOPs") == "291.6 GFLOPs"
