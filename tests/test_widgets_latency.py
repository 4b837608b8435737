"""latency_ci_explorer (the CI-vs-sample-count widget of chapter 04) and plot_latency_log."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest

from tinyprof import LatencyStats
from tinyprof.plots import plot_latency_log
from tinyprof.timing import bootstrap_median_ci
from tinyprof.widgets import latency_ci_explorer
from tinyprof.widgets.latency import doubling_sizes


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture
def samples() -> np.ndarray:
    """300 seeded per-call times around 50 µs with a right tail, as a timer would measure."""
    return np.random.default_rng(4).lognormal(np.log(50e-6), 0.15, 300)


def slider(widget):
    (control,) = [c for c in widget.children if hasattr(c, "options")]
    return control


def test_slider_offers_doubling_sample_counts_ending_at_all_samples():
    assert doubling_sizes(300) == [5, 10, 20, 40, 80, 160, 300]
    assert doubling_sizes(320) == [5, 10, 20, 40, 80, 160, 320]
    assert doubling_sizes(12) == [5, 10, 12]
    assert doubling_sizes(3) == [3]
    assert slider(latency_ci_explorer([1e-3, 2e-3, 4e-3])).options == (3,)


def test_initial_state_uses_every_sample_and_draws(samples):
    widget = latency_ci_explorer(samples, name="mlp")
    control = slider(widget)
    assert list(control.options) == [5, 10, 20, 40, 80, 160, 300]
    assert control.value == 300
    here = widget.result
    assert isinstance(here, LatencyStats) and here.n == 300 and here.name == "mlp"
    assert here.samples == tuple(samples.tolist())
    assert here.ci == bootstrap_median_ci(samples)
    assert here.ci[0] < here.median < here.ci[1]
    printed = widget.text
    width = (here.ci[1] - here.ci[0]) / here.median
    assert "first 300 of 300 samples" in printed and f"width {width:.1%}" in printed
    (fig,) = widget.figures
    histogram, funnel = fig.axes
    legend = [t.get_text() for t in histogram.get_legend().get_texts()]
    assert [text.split()[0] for text in legend[1:]] == ["p50", "p95", "p99"]
    assert [t.get_text() for t in funnel.get_xticklabels()] == ["5", "10", "20", "40", "80",
                                                               "160", "300"]
    assert histogram.get_xscale() == "log"  # a long tail and the bulk both show


def test_fewer_samples_give_the_first_n_and_a_wider_interval(samples):
    widget = latency_ci_explorer(samples)
    everything = widget.result
    slider(widget).value = 20
    first_20 = widget.result
    assert first_20.samples == tuple(samples[:20].tolist())
    assert first_20.ci == bootstrap_median_ci(samples[:20])
    wide, narrow = (s.ci[1] - s.ci[0] for s in (first_20, everything))
    # For these seeded samples the CI of 300 is 4.6× narrower than that of 20 (√15 ≈ 3.9).
    assert wide / narrow == pytest.approx(4.57, abs=0.01)


def test_refuses_too_few_samples_and_bad_times():
    with pytest.raises(ValueError, match="at least 2 samples"):
        latency_ci_explorer([1e-3])
    with pytest.raises(ValueError, match="finite and ≥ 0"):
        latency_ci_explorer([1e-3, -1e-3, 2e-3])


def test_a_zero_sample_falls_back_to_a_linear_histogram():
    widget = latency_ci_explorer([0.0, 1e-3, 1e-3, 2e-3, 5e-3])
    assert widget.result.median == 1e-3
    assert widget.figures[0].axes[0].get_xscale() == "linear"


def test_plot_latency_log_spans_the_samples_with_geometric_bins_and_plain_labels():
    # 95 calls near 200 µs and 5 stalled ones up to 20 ms: 2 decades.
    samples = np.concatenate([np.linspace(200e-6, 260e-6, 95), np.geomspace(1e-3, 20e-3, 5)])
    fig = plot_latency_log(LatencyStats.from_samples(samples), bins=20)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    bars = ax.containers[0].patches                                     # the histogram's bars
    assert len(bars) == 20 and sum(b.get_height() for b in bars) == 100
    assert bars[0].get_x() == pytest.approx(200.0)                      # µs, from the fastest
    assert bars[-1].get_x() + bars[-1].get_width() == pytest.approx(20_000.0)  # to the slowest
    ratios = [b.get_width() / b.get_x() for b in bars]
    assert max(ratios) == pytest.approx(min(ratios))                    # geometric bins
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert "1000" in labels and not any("times" in t or "^" in t for t in labels)


def test_plot_latency_log_falls_back_to_linear_without_geometric_bins():
    for samples in ([0.0, 1e-3, 2e-3], [1e-3, 1e-3, 1e-3]):
        assert plot_latency_log(LatencyStats.from_samples(samples)).axes[0].get_xscale() == "linear"


def test_a_slow_call_among_the_first_few_does_not_flatten_the_funnel():
    samples = np.random.default_rng(0).lognormal(np.log(208e-6), 0.03, 300)
    samples[2] = 1.3e-3                                  # one stalled call among the first 5
    widget = latency_ci_explorer(samples)
    slider(widget).value = 5
    assert widget.result.ci[1] == pytest.approx(1.3e-3)  # 5 samples: the CI reaches the stall
    funnel = widget.figures[-1].axes[1]
    bottom, top = funnel.get_ylim()                      # µs
    for n in (20, 40, 80, 160, 300):
        low, high = bootstrap_median_ci(samples[:n])
        assert bottom < low * 1e6 and high * 1e6 < top   # every n ≥ 20 interval is in view
    assert top < 1300                                    # the n = 5 band runs off the top
