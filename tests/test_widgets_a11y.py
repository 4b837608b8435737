"""Every figure tinyprof draws says what it shows, computed from its data, and carries that text
into a notebook (alt metadata, an ``<img alt>``, plain text) and into an explorer's static and
live views; every explorer control is a keyboard-operable core widget with a label."""

from __future__ import annotations

import base64
import html

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pytest

import tinyprof.widgets as tw
from tinyprof import models
from tinyprof.abtest import ABResult
from tinyprof.plots import (
    DescribedFigure,
    figure_description,
    plot_ab,
    plot_amdahl,
    plot_batch_scaling,
    plot_breakdown,
    plot_latency,
    plot_latency_log,
    plot_memory_breakdown,
    plot_performance_comparison,
    plot_roofline,
    plot_scaling,
    plot_shares,
)
from tinyprof.plots.describe import number
from tinyprof.roofline import MachinePeaks
from tinyprof.scaling import batch_scaling
from tinyprof.suite import SuiteResult, VariantResult
from tinyprof.timing import LatencyStats
from tinyprof.units import format_seconds

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def _ms(values, name=""):
    return LatencyStats.from_samples(np.asarray(values, dtype=float) / 1e3, name=name)


# -- the words: each plot function's description states its key numbers ---------------------


def test_breakdown_names_every_part_largest_first_with_its_share():
    fig = plot_breakdown(["LayerNorm", "MLP", "attention"], [1, 4, 3], quantity="parameters",
                         unit="millions")
    assert isinstance(fig, DescribedFigure)
    assert fig.description == (
        "Bar chart: Where the parameters go. 3 parts (parameters in millions), largest first: "
        "MLP 4 (50.0%), attention 3 (37.5%) and LayerNorm 1 (12.5%). Total 8 millions.")


def test_shares_give_each_part_at_both_ends_and_the_marks():
    fig = plot_shares([64, 4096], {"QKᵀ + AV": [1, 3], "MLP": [3, 1]}, xlabel="sequence length",
                      quantity="forward FLOPs", marks=[(4096, "S = 4,096: 75.0%")])
    assert fig.description == (
        "Stacked area chart: Where the forward FLOPs go. Each part's share of the forward FLOPs "
        "against sequence length, 64 to 4,096 (log scale); at 64: QKᵀ + AV 25.0%, MLP 75.0%; "
        "at 4,096: QKᵀ + AV 75.0%, MLP 25.0%. Marked: S = 4,096: 75.0%.")


def test_memory_breakdown_gives_each_bar_its_parts_total_peak_and_the_budget():
    fig = plot_memory_breakdown({"measured": {"parameters": 2.0, "activations": 5.5},
                                 "predicted": {"parameters": 2.0, "activations": 5.0}},
                                peaks={"measured": 9.25}, budget=8.0)
    assert fig.description == (
        "Stacked bar chart: Memory by component. Memory in MB by component (parameters and "
        "activations), bottom to top. measured: parameters 2, activations 5.5; total 7.5 MB, "
        "peak during the step 9.25; predicted: parameters 2, activations 5; total 7 MB. "
        "Budget line at 8 MB.")


def test_batch_scaling_gives_both_ends_the_growth_and_the_per_sample_cost():
    fig = plot_batch_scaling([1, 2, 4, 8], [10, 12, 16, 24], quantity="median latency",
                             unit="ms", proportional=True)
    assert fig.description == (
        "Line chart: median latency vs batch size, batch size on a log scale, a dashed line "
        "proportional to the batch through the first point. Median latency: "
        "10 ms at batch 1 to 24 ms at batch 8 (2.4× for 8× the batch). Per sample, right "
        "panel: 10 ms per sample at batch 1 to 3 ms per sample at batch 8.")
    measured, proportional = fig.axes[0].get_lines()[:2]
    assert list(proportional.get_ydata()) == [10, 20, 40, 80]   # 10 ms × the batch's ratio
    plain = plot_batch_scaling([1, 2, 4, 8], [10, 12, 16, 24], quantity="median latency")
    assert len(plain.axes[0].get_lines()) == 1 and "dashed" not in plain.description


def test_scaling_of_a_real_measurement_is_described_from_its_numbers():
    scaling = batch_scaling(models.mlp((16, 8, 4)), [1, 4], iterations=5, memory=False)
    fig = plot_scaling(scaling, "throughput")
    first, last = scaling.throughput
    assert (f"Throughput: {number(first)} samples/s at batch 1 to {number(last)} samples/s at "
            f"batch 4 ({number(last / first)}× for 4× the batch).") in fig.description
    assert "per sample" not in fig.description          # a throughput plot has one panel


def test_amdahl_gives_the_ceiling_and_the_marked_point():
    fig = plot_amdahl(0.75, 4, part="the MLP")
    # ceiling 1/(1 - 0.75) = 4; four times faster: 1/(0.25 + 0.75/4) = 2.2857
    assert fig.description == (
        "Amdahl's law: speeding up the MLP. Overall speedup against the speedup s of that part, "
        "1× to 64× (log scale), for p = 75% of the time: its ceiling 1/(1 − p) is 4.00×. Making "
        "it 4× faster gives 2.29× overall. Grey curves for p = 0.5, 0.9, 0.99.")
    memory = plot_amdahl(0.5, 2, part="the activations", quantity="memory")
    assert "2× smaller gives 1.33× overall" in memory.description


def test_roofline_gives_the_roofs_the_ridge_the_bounds_and_the_named_points():
    peaks = MachinePeaks(flops_per_second=100e9, bytes_per_second=20e9,
                         cache_roofs=(("L2", 80e9),))
    points = [
        {"name": "mm", "phase": "forward", "intensity": 50.0, "achieved": 80e9,
         "bound": "compute", "share": 0.6},
        {"name": "relu", "phase": "backward", "intensity": 0.125, "achieved": 2e9,
         "bound": "memory", "share": 0.3},
        {"name": "view", "intensity": 0.0, "achieved": 0.0, "bound": "overhead", "share": 0.1},
    ]
    fig = plot_roofline(peaks, points, label_top=1)
    assert fig.description == (
        "Roofline chart, log-log: Roofline of this machine (1 not shown: no FLOPs counted). "
        "FLOP/s against arithmetic intensity (FLOPs/byte). Compute roof 100 GFLOP/s, memory roof "
        "20 GB/s, ridge at 5 FLOPs/byte; cache roofs L2 80 GB/s. 2 points: 1 compute-bound, "
        "1 memory-bound. Named: mm forward at 50 FLOPs/byte and 80 GFLOP/s (compute-bound, 60% "
        "of the time).")


def test_latency_histograms_give_the_percentiles_and_the_interval():
    stats = _ms(np.arange(1, 101), name="mlp")
    for fig, log in ((plot_latency(stats), ""), (plot_latency_log(stats), ", log time axis")):
        assert fig.description == (
            f"Histogram of time per call: mlp, 100 samples{log}. p50 "
            f"{format_seconds(stats.p50)}, p95 {format_seconds(stats.p95)}, p99 "
            f"{format_seconds(stats.p99)}; 95% CI of the median {format_seconds(stats.ci[0])} to "
            f"{format_seconds(stats.ci[1])}; fastest 1 ms, slowest 100 ms.")
    assert format_seconds(stats.p50) == "50.5 ms"


def test_ab_figure_gives_both_medians_the_speedup_and_the_verdict():
    result = ABResult.from_samples(_ms(np.linspace(9, 11, 40), "float32"),
                                   _ms(np.linspace(4.5, 5.5, 40), "fused"))
    low, high = result.ci
    assert plot_ab(result).description == (
        "A/B test in two panels. Left: per-call time, one dot per round, log scale: float32 "
        "median 10 ms (40 rounds) and fused median 5 ms (40 rounds). Right: speedup "
        f"median(baseline) / median(candidate) = 2.00× with 95% interval {low:.2f}× to "
        f"{high:.2f}×, beside the no-change line at 1× and a noise band of ±5%. Verdict: faster "
        f"(p = {result.p_value:.2g}).")


def test_suite_figure_gives_every_variant_its_time_memory_and_accuracy():
    rows = (VariantResult("float32", _ms([2, 2, 2, 2]), 100, 3_000_000, 1_000_000, 0.95),
            VariantResult("int8", _ms([1, 1, 1, 1]), 100, 2_000_000, 250_000, None))
    fig = plot_performance_comparison(SuiteResult(rows, "float32", {"processor": "test"}))
    assert fig.description == (
        "Benchmark suite of 2 variants in three panels: time per call, peak memory of a forward "
        "pass, held-out accuracy. float32 (baseline): median time 2 ms (95% CI 2 ms to 2 ms), "
        "peak memory 3.0 MB (parameters 1.0 MB), accuracy 95.0%; int8: median time 1 ms "
        "(95% CI 1 ms to 1 ms), peak memory 2.0 MB (parameters 250.0 KB).")


def test_any_figure_is_described_from_its_title_axes_and_lines():
    fig, (left, right) = plt.subplots(1, 2)
    left.plot([1, 2, 3], [4.0, 2.0, 8.0], label="one call")
    left.axhline(3.0, label="median")
    left.set(title="The first calls", xlabel="call number", ylabel="time (ms)")
    right.plot([1, 10, 100], [1, 2, 3])
    right.set_xscale("log")
    assert figure_description(fig) == (
        "Figure with 2 panels. Panel 1: The first calls. x axis: call number from 1 to 3. "
        "y axis: time (ms) from 2 to 8. Lines: one call from 4 to 8 (3 points) and median at 3. "
        "Panel 2: x axis: unlabelled, log scale from 1 to 100. y axis: unlabelled from 1 to 3.")


# -- the display: the words travel with the picture ---------------------------------------------


def test_a_figure_displays_as_an_image_with_its_description_as_alt_text():
    fig = plot_amdahl(0.5, 2)
    data, metadata = fig._repr_mimebundle_()
    png = base64.b64decode(data["image/png"])
    assert png.startswith(PNG_MAGIC)
    assert metadata == {"image/png": {"alt": fig.description}}
    assert data["text/plain"] == fig.description
    assert data["text/html"] == (
        f'<img src="data:image/png;base64,{data["image/png"]}" '
        f'alt="{html.escape(fig.description, quote=True)}" style="max-width:100%">')
    assert "&#x27;" in data["text/html"]          # "Amdahl's" is escaped inside the attribute


def _explorers():
    samples = np.random.default_rng(0).lognormal(0, 0.2, 80) * 1e-3
    return [
        tw.amdahl_explorer(quantity="memory"),
        tw.transformer_explorer(),
        tw.attention_share_explorer(),
        tw.latency_ci_explorer(samples, name="mlp"),
        tw.batch_scaling_explorer(lambda b: 2.0 * b, [1, 2, 4, 8], quantity="FLOPs"),
        tw.ab_explorer(lambda: None, lambda: None, rounds=10),
        tw.roofline_explorer(models.gpt2(vocab_size=100, n_ctx=32, d_model=16, n_layer=1,
                                         n_head=2), batch=2, seq_len=8,
                             batch_options=(1, 2), seq_options=(8, 16)),
        tw.memory_breakdown_explorer(lambda dtype: models.mlp((64, 32, 10), dtype=dtype), (64,),
                                     batch_sizes=(1, 4), optimizers=("sgd", "adam"),
                                     dtypes=("float32",)),
        tw.fixes_explorer(("float32",), steps=1),
    ]


#: Core controls a keyboard operates: a slider's handle takes the arrow keys (its number readout
#: can be typed into), a dropdown is a native <select>, a checkbox a native <input> that the
#: space bar toggles.
KEYBOARD_CONTROLS = (widgets.IntSlider, widgets.FloatSlider, widgets.FloatLogSlider,
                     widgets.SelectionSlider, widgets.Dropdown, widgets.Checkbox)


@pytest.mark.slow
def test_every_explorer_describes_its_figures_and_labels_its_controls():
    for explorer in _explorers():
        name = type(explorer._draw).__qualname__
        assert explorer.images and len(explorer.descriptions) == len(explorer.images), name
        static = explorer.static_html()
        outputs = [o for o in explorer.out.outputs if o["output_type"] == "display_data"]
        for png, description, output in zip(explorer.images, explorer.descriptions, outputs):
            assert len(description) > 60 and any(c.isdigit() for c in description), description
            assert f'alt="{html.escape(description, quote=True)}"' in static, name
            assert output["metadata"] == {"image/png": {"alt": description}}
            assert output["data"]["text/plain"] == description
            assert base64.b64decode(output["data"]["image/png"]) == png
        labels = [control.description for control in explorer.controls.values()]
        assert all(labels) and len(set(labels)) == len(labels), labels
        for control in explorer.controls.values():
            assert isinstance(control, KEYBOARD_CONTROLS), (name, type(control).__name__)
            assert getattr(control, "readout", True), f"{name}: {control.description} hides " \
                                                      "its value"
            assert not control.disabled


def test_the_latency_explorer_describes_both_panels_from_the_chosen_samples():
    samples = np.arange(1, 41) * 1e-3
    explorer = tw.latency_ci_explorer(samples, name="mlp")
    explorer.controls["n"].value = 10
    here = explorer.result
    description = explorer.descriptions[0]
    assert description.startswith("Two panels. Left: Histogram of time per call: mlp, 10 "
                                  "samples, log time axis. p50 5.5 ms")
    assert ("Right: The median's 95% CI against the number of samples n (log scale, 5 to 40)"
            in description)
    assert f"n = 10: median {format_seconds(here.median)}" in description
    assert description.endswith("Highlighted: n = 10.")
