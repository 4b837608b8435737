"""Chapter 03's figure and widget: the stacked memory breakdown, its explorer, and Amdahl's law
worded for memory."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest

import tinyprof.widgets as tw
from tinyprof import models, predict_training_memory
from tinyprof.memory import activation_bytes
from tinyprof.plots import MEMORY_COLORS, plot_amdahl, plot_memory_breakdown

COMPONENTS = ("parameters", "gradients", "optimizer state", "activations")


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def controls(widget) -> dict[str, object]:
    return {child.description: child for child in widget.children if hasattr(child, "value")}


def stacked_heights(ax) -> dict[tuple[float, str], float]:
    """(bar centre, component) → height, read back from the drawn rectangles."""
    heights = {}
    for container in ax.containers:
        for patch in container.patches:
            heights[(round(patch.get_x() + patch.get_width() / 2, 6),
                     container.get_label())] = patch.get_height()
    return heights


# -- plot_memory_breakdown -----------------------------------------------------------------------


def test_bars_stack_each_component_once_in_order_and_carry_their_totals():
    bars = {"sgd": {"parameters": 1.0, "gradients": 1.0, "optimizer state": 0.0,
                    "activations": 0.5},
            "adam": {"parameters": 1.0, "gradients": 1.0, "optimizer state": 2.0,
                     "activations": 0.5}}
    fig = plot_memory_breakdown(bars, unit="GB", peaks={"adam": 5.0}, budget=4.0)
    ax = fig.axes[0]
    heights = stacked_heights(ax)
    assert heights[(1.0, "optimizer state")] == 2.0 and heights[(0.0, "optimizer state")] == 0.0
    # the activations sit on top of the fixed part: their rectangle starts at Σ fixed
    top = {c.get_label(): c.patches[1].get_y() for c in ax.containers}
    assert top == {"parameters": 0.0, "gradients": 1.0, "optimizer state": 2.0,
                   "activations": 4.0}
    assert [t.get_text() for t in ax.texts] == ["2.50 GB", "4.50 GB"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["activations", "optimizer state", "gradients", "parameters",
                      "peak during the step", "budget 4 GB"]
    assert [c.patches[0].get_facecolor() for c in ax.containers] == [
        plt.matplotlib.colors.to_rgba(MEMORY_COLORS[name]) for name in COMPONENTS]
    assert ax.get_ylim() == (0.0, pytest.approx(1.15 * 5.0))   # the peak is the highest mark
    assert [t.get_text() for t in ax.get_xticklabels()] == ["sgd", "adam"]


def test_a_fixed_y_axis_and_unknown_component_names():
    fig = plot_memory_breakdown({"step": {"weights": 3.0, "kv cache": 1.0}}, ymax=10.0)
    ax = fig.axes[0]
    assert ax.get_ylim() == (0.0, 10.0)
    assert {c.get_label() for c in ax.containers} == {"weights", "kv cache"}
    colours = {c.patches[0].get_facecolor() for c in ax.containers}
    assert len(colours) == 2, "components without a fixed colour still get distinct colours"


def test_bad_bars_are_named():
    with pytest.raises(ValueError, match="at least one bar"):
        plot_memory_breakdown({})
    with pytest.raises(ValueError, match=r"bar 'a' has negative parts \{'activations': -1.0\}"):
        plot_memory_breakdown({"a": {"activations": -1.0}})
    with pytest.raises(ValueError, match=r"peaks for bars that do not exist: \['b'\]"):
        plot_memory_breakdown({"a": {"activations": 1.0}}, peaks={"b": 2.0})


# -- memory_breakdown_explorer -------------------------------------------------------------------


def tiny_mlp(dtype):
    return models.mlp((256, 128, 10), dtype=dtype)


def test_explorer_measures_the_initial_setting_and_draws_it():
    widget = tw.memory_breakdown_explorer(tiny_mlp, (256,), batch_sizes=(1, 8, 64))
    assert {name: c.value for name, c in controls(widget).items()} == {
        "batch size": 8, "optimizer": "adam", "dtype": "float32"}
    step = widget.result
    params = 4 * (256 * 128 + 128 + 128 * 10 + 10)                 # 136,744 bytes of float32
    assert step.parameters.measured_bytes == step.parameters.predicted_bytes == params
    assert step.optimizer_state.predicted_bytes == 2 * params
    assert step.activations.predicted_bytes == (
        activation_bytes(tiny_mlp("float32"), (8, 256)) + 8 * (10 * 4 + 8))   # + cross-entropy
    for component in step.components:   # the arrays, plus a few Python objects around them
        assert 0 <= component.measured_bytes - component.predicted_bytes < 5_000, component
    assert "batch 8, adam, float32: measured" in widget.text

    (fig,) = widget.figures
    ax = fig.axes[0]
    heights = stacked_heights(ax)
    unit_bytes = 1e6                                             # totals of about 1 MB
    for name in COMPONENTS:
        assert heights[(1.0, name)] * unit_bytes == pytest.approx(step[name].predicted_bytes)
        assert heights[(0.0, name)] * unit_bytes == pytest.approx(step[name].measured_bytes)
    peak_line = next(c for c in ax.collections if c.get_label() == "peak during the step")
    assert peak_line.get_segments()[0][0][1] * unit_bytes == pytest.approx(step.peak_bytes)
    highest = max(predict_training_memory(tiny_mlp("float32"), (b, 256), opt, dtype=dt)
                  .predicted_total_bytes for b in (1, 8, 64) for opt in ("sgd", "momentum", "adam")
                  for dt in ("float32", "float64"))
    assert ax.get_ylim()[1] * unit_bytes == pytest.approx(1.15 * max(highest, step.peak_bytes))


def test_moving_the_controls_measures_each_new_setting_once():
    built = []

    def build(dtype):
        built.append(np.dtype(dtype).name)
        return tiny_mlp(dtype)

    widget = tw.memory_breakdown_explorer(build, (256,), batch_sizes=(1, 8, 64))
    first = widget.result
    knobs = controls(widget)

    knobs["optimizer"].value = "sgd"
    assert widget.result.optimizer_state.predicted_bytes == 0
    assert widget.result.optimizer_state.measured_bytes < 1_000       # no state, a few objects

    knobs["dtype"].value = "float64"
    assert widget.result.parameters.measured_bytes == 2 * first.parameters.measured_bytes

    knobs["batch size"].value = 64
    assert widget.result.activations.predicted_bytes == (
        activation_bytes(tiny_mlp("float64"), (64, 256)) + 64 * (10 * 8 + 8))

    knobs["batch size"].value, knobs["dtype"].value, knobs["optimizer"].value = 8, "float32", "adam"
    assert widget.result is first, "a setting seen before is not measured again"
    assert built == ["float32", "float64"], "each dtype's model is built once"
    assert widget.draws == 7, "one draw per change of a control"


def test_explorer_rejects_a_start_outside_its_choices():
    with pytest.raises(ValueError, match=r"batch_size=3 is not one of the choices \[1, 8\]"):
        tw.memory_breakdown_explorer(tiny_mlp, (256,), batch_sizes=(1, 8), batch_size=3)
    with pytest.raises(ValueError, match=r"optimizer='adagrad'"):
        tw.memory_breakdown_explorer(tiny_mlp, (256,), optimizer="adagrad")


# -- Amdahl's law for memory ---------------------------------------------------------------------


def test_amdahl_figure_speaks_of_time_by_default_and_of_memory_when_asked():
    timed = plot_amdahl(0.5, 2, part="the MLP").axes[0]
    assert timed.get_title(loc="left") == "Amdahl's law: speeding up the MLP"
    assert timed.get_xlabel() == "speedup of that part (s)"
    memory = plot_amdahl(0.45, 2, part="the activations", quantity="memory").axes[0]
    assert memory.get_title(loc="left") == "Amdahl's law: shrinking the activations"
    assert (memory.get_xlabel(), memory.get_ylabel()) == ("reduction of that part (s)",
                                                          "overall reduction")
    legend = [t.get_text() for t in memory.get_legend().get_texts()]
    assert "the activations: p = 45% of the memory" in legend
    assert "2× smaller → 1.29× overall" in legend                  # 1 / (0.55 + 0.225)


def test_amdahl_explorer_for_memory():
    widget = tw.amdahl_explorer(fraction=0.45, factor=2, part="the activations",
                                quantity="memory")
    assert set(controls(widget)) == {"share of memory (p)", "reduction of part (s)"}
    assert "the activations: 45% of the memory made 2× smaller → 1.29× overall" in widget.text
    title = widget.figures[0].axes[0].get_title(loc="left")
    assert title == "Amdahl's law: shrinking the activations"
