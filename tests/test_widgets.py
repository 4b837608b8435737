"""The chapter widgets build with their initial state drawn and compute what they print."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from tinyprof import count_flops, flop_report, models
from tinyprof.plots import plot_shares
from tinyprof.widgets import GPT_FLOP_PARTS, AttentionShare, attention_share_explorer


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def controls(widget) -> dict[str, object]:
    return {child.description: child for child in widget.children if hasattr(child, "value")}


def test_attention_share_explorer_starts_at_gpt2_small_and_matches_the_report():
    widget = attention_share_explorer()
    assert {name: c.value for name, c in controls(widget).items()} == {
        "sequence length": 1024, "d_model": 768, "n_layer": 12}
    here = widget.result
    assert isinstance(here, AttentionShare)

    # The explorer counts a one-head model; heads do not change FLOPs, so it must agree with
    # GPT-2 small's own per-layer report (12 heads) row for row.
    gpt2_small = models.gpt2("small", shape_only=True)
    records = flop_report(gpt2_small, (1, 1024)).to_records()
    scores = sum(r["flops"] for r in records if r["type"] == "MultiHeadAttention")
    head = sum(r["flops"] for r in records if r["type"] == "TiedLMHead")
    assert here.parts["QKᵀ + AV"] == scores == 38_654_705_664
    assert here.parts["LM head"] == head == 79_047_426_048
    assert here.total == count_flops(gpt2_small, (1, 1024)) == 291_648_307_200
    assert here.share == pytest.approx(38_654_705_664 / 291_648_307_200)   # 13.3%
    assert here.break_even == pytest.approx(6 * 768)                        # 4,608
    printed = widget.text
    assert "(13.3%)" in printed and "S = 4,608" in printed


def test_moving_the_sliders_recomputes_the_share():
    widget = attention_share_explorer()
    controls(widget)["sequence length"].value = 4608
    at_break_even = widget.result
    assert at_break_even.seq_len == 4608
    assert (at_break_even.parts["QKᵀ + AV"]
            == at_break_even.parts["attention projections"] + at_break_even.parts["MLP"])

    controls(widget)["d_model"].value = 1600          # GPT-2 XL's width
    controls(widget)["n_layer"].value = 48
    xl = widget.result
    assert (xl.d_model, xl.n_layer) == (1600, 48)
    assert xl.break_even == pytest.approx(6 * 1600)
    wide = models.gpt2("xl", n_ctx=4608, shape_only=True)
    assert xl.total == count_flops(wide, (1, 4608))


def test_plot_shares_stacks_one_band_per_part_and_checks_lengths():
    fig = plot_shares([1, 2, 4], {"a": [1, 2, 3], "b": [3, 2, 1]}, xlabel="x", quantity="FLOPs",
                      marks=[(2, "here")])
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["a", "b", "here"]
    assert ax.get_ylim() == (0, 100)
    with pytest.raises(ValueError, match="one value per x"):
        plot_shares([1, 2], {"a": [1, 2, 3]}, xlabel="x", quantity="FLOPs")
    assert len(GPT_FLOP_PARTS) == 4
