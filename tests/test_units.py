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


def test_table_html_separates_cells_and_keeps_each_on_one_line():
    import re

    from tinyprof import Table

    table = Table(["name", "saves input", "shape"], [["layers.0", True, (32, 512, 768)]])
    page = table._repr_html_()
    cells = re.findall(r"<t[dh] style=\"([^\"]*)\">([^<]*)</t[dh]>", page)
    assert [text for _, text in cells] == ["name", "saves input", "shape", "layers.0", "True",
                                           "(32, 512, 768)"]
    for style, _ in cells:
        assert "padding:0.25em 0.8em" in style and "white-space:nowrap" in style
        assert "rgba(127,127,127" in style        # a rule visible on light and dark themes
    assert page.startswith("<table") and "overflow-x:auto" in page.split(">")[0]


def test_breakdown_titles_agree_with_their_quantity():
    import matplotlib.pyplot as plt

    from tinyprof.plots import plot_breakdown

    for quantity, title in (("parameters", "Where the parameters go"),
                            ("memory", "Where the memory goes")):
        fig = plot_breakdown(["a", "b"], [1.0, 2.0], quantity=quantity)
        assert fig.axes[0].get_title(loc="left") == title
        plt.close(fig)


def test_one_interval_formatter():
    from tinyprof.units import format_interval

    assert format_interval((0.00123, 0.00135)) == "1.23 ms – 1.35 ms"
    assert format_interval((1.0512, 1.1249), "ratio") == "1.05–1.12×"
    assert format_interval((1.0512, 1.1249), "ratio", 3) == "1.051–1.125×"
    assert format_interval((0.0101, 0.032), "change") == "+1.0% to +3.2%"
    with pytest.raises(ValueError, match="kind is 'seconds', 'ratio' or 'change', got 'x'"):
        format_interval((1, 2), "x")


def test_one_percent_and_ratio_formatter():
    from tinyprof.units import format_percent, format_ratio

    assert format_percent(0.1234) == "12.3%" and format_percent(0.05, signed=True) == "+5.0%"
    assert format_percent(-0.021, 2, signed=True) == "-2.10%"
    assert format_ratio(1.2345) == "1.23×" and format_ratio(1.2345, 3) == "1.234×"
