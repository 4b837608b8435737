"""Interactive front-ends built from core ipywidgets only (works with ipywidgets 7.7 and 8).

Each function returns a widget whose output area already holds the figure for the initial
values, so the figure also appears in the static book, where no kernel runs the callbacks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import display

from .amdahl import amdahl_speedup
from .plots import plot_amdahl, plot_batch_scaling, plot_breakdown, plot_shares

_LAYOUT = {"width": "480px"}
_STYLE = {"description_width": "150px"}


def _show(fig) -> None:
    """Display a figure into the current output area, then free it."""
    display(fig)
    plt.close(fig)


def _explorer(draw: Callable[..., None], **controls) -> widgets.interactive:
    """An ``interactive`` over ``controls``; it draws its initial state when created."""
    for control in controls.values():
        if isinstance(control, widgets.Widget) and hasattr(control, "layout"):
            control.layout = widgets.Layout(**_LAYOUT)
            control.style = _STYLE
    return widgets.interactive(draw, **controls)


def amdahl_explorer(fraction: float = 0.7, factor: float = 2.0,
                    part: str = "the dominant part", quantity: str = "time"
                    ) -> widgets.interactive:
    """Sliders for p (share of the time improved) and s (how much faster) over Amdahl's curve;
    ``quantity="memory"`` words it as a share of the memory made s× smaller."""
    from .plots import amdahl_words

    _, adjective, noun = amdahl_words(quantity)

    def draw(fraction: float, factor: float) -> None:
        print(f"{part}: {fraction:.0%} of the {quantity} made {factor:g}× {adjective} "
              f"→ {amdahl_speedup(fraction, factor):.2f}× overall")
        _show(plot_amdahl(fraction, factor, part=part, quantity=quantity))

    return _explorer(
        draw,
        fraction=widgets.FloatSlider(value=fraction, min=0.0, max=0.99, step=0.01,
                                     description=f"share of {quantity} (p)",
                                     continuous_update=False),
        factor=widgets.FloatLogSlider(value=factor, base=2, min=0, max=6, step=0.25,
                                      description=f"{noun} of part (s)", continuous_update=False),
    )


def batch_scaling_explorer(measure: Callable[[int], float], batch_sizes: Sequence[int], *,
                           quantity: str, unit: str = "") -> widgets.interactive:
    """A slider over the largest batch size; ``measure(batch)`` gives the quantity at a batch."""
    batch_sizes = sorted(int(b) for b in batch_sizes)
    values = {b: measure(b) for b in batch_sizes}

    def draw(largest: int) -> None:
        shown = [b for b in batch_sizes if b <= largest]
        _show(plot_batch_scaling(shown, [values[b] for b in shown], quantity=quantity, unit=unit))

    return _explorer(draw, largest=widgets.SelectionSlider(
        options=batch_sizes, value=batch_sizes[-1], description="largest batch",
        continuous_update=False))


def transformer_explorer(d_model: int = 768, n_layer: int = 12, n_head: int = 12,
                         vocab_size: int = 50257, n_ctx: int = 1024) -> widgets.interactive:
    """Grow a GPT-style transformer: its parameter count, its memory per dtype, and where the
    parameters sit (embeddings, attention, MLP, LayerNorm). Counted shape-only, so instant."""
    from .models import gpt2, gpt_part
    from .params import count_parameters

    def draw(d_model: int, n_layer: int, n_head: int, vocab_size: int, n_ctx: int) -> None:
        if d_model % n_head:
            print(f"d_model ({d_model}) must be divisible by n_head ({n_head})")
            return
        model = gpt2(vocab_size=vocab_size, n_ctx=n_ctx, d_model=d_model, n_layer=n_layer,
                     n_head=n_head, shape_only=True)
        total = count_parameters(model)
        sizes = ", ".join(f"{name} {total * b / 1e9:.2f} GB" for name, b in
                          (("fp32", 4), ("fp16", 2), ("int8", 1)))
        print(f"{total:,} parameters: {sizes}")
        parts: dict[str, int] = {}
        for name, param in model.named_parameters():
            parts[gpt_part(name)] = parts.get(gpt_part(name), 0) + param.size
        _show(plot_breakdown(list(parts), [v / 1e6 for v in parts.values()],
                             quantity="parameters", unit="millions"))

    slider = dict(continuous_update=False)
    return _explorer(
        draw,
        d_model=widgets.IntSlider(value=d_model, min=64, max=4096, step=64,
                                  description="d_model", **slider),
        n_layer=widgets.IntSlider(value=n_layer, min=1, max=96, description="n_layer", **slider),
        n_head=widgets.Dropdown(options=[1, 2, 4, 8, 12, 16, 20, 25, 32, 64], value=n_head,
                                description="n_head"),
        vocab_size=widgets.IntSlider(value=vocab_size, min=1000, max=256000, step=1000,
                                     description="vocab_size", **slider),
        n_ctx=widgets.IntSlider(value=n_ctx, min=128, max=8192, step=128,
                                description="n_ctx", **slider),
    )


#: The parts of a GPT's forward matmul FLOPs that attention_share_explorer compares.
GPT_FLOP_PARTS = ("QKᵀ + AV", "attention projections", "MLP", "LM head")


@dataclass(frozen=True)
class AttentionShare:
    """Where a GPT's forward matmul FLOPs go at one sequence length (what the explorer shows).

    ``parts`` maps each of :data:`GPT_FLOP_PARTS` to its FLOPs; ``share`` is QKᵀ + AV's
    fraction of the total; ``break_even`` is the sequence length at which QKᵀ + AV (∝ S²)
    equal the projections + MLP (∝ S): S · (projections + MLP) / (QKᵀ + AV), 6·d for a GPT.
    """

    seq_len: int
    d_model: int
    n_layer: int
    parts: dict[str, int]

    @property
    def total(self) -> int:
        """All forward matmul FLOPs: Σ parts."""
        return sum(self.parts.values())

    @property
    def share(self) -> float:
        """QKᵀ + AV's fraction of the forward matmul FLOPs."""
        return self.parts["QKᵀ + AV"] / self.total

    @property
    def break_even(self) -> float:
        """S · (projections + MLP) / (QKᵀ + AV): where the S² part catches up."""
        linear = self.parts["attention projections"] + self.parts["MLP"]
        return self.seq_len * linear / self.parts["QKᵀ + AV"]


def _gpt_flop_parts(model, seq_len: int, batch: int = 1) -> dict[str, int]:
    """Sum the counted forward FLOPs of a GPT's report rows into :data:`GPT_FLOP_PARTS`."""
    from .flops import flops_by_layer

    parts = dict.fromkeys(GPT_FLOP_PARTS, 0)
    for row in flops_by_layer(model, (batch, seq_len)):
        if row.type == "MultiHeadAttention":
            parts["QKᵀ + AV"] += row.matmul
        elif row.type == "Linear":
            parts["attention projections" if ".attn." in row.name else "MLP"] += row.matmul
        elif row.type == "TiedLMHead":
            parts["LM head"] += row.matmul
        elif row.matmul:
            raise ValueError(f"{row.type} '{row.name}' does matmul work outside "
                             f"{GPT_FLOP_PARTS}")
    return parts


def attention_share_explorer(seq_len: int = 1024, d_model: int = 768, n_layer: int = 12,
                             vocab_size: int = 50257) -> widgets.interactive:
    """Attention's share of a GPT's forward FLOPs as the sequence grows (sliders: sequence
    length, width, depth).

    Counts a shape-only GPT layer by layer at every sequence length on the curve (FLOPs do not
    depend on the number of heads, so one head is used), prints QKᵀ + AV's share at
    ``seq_len`` and where they break even with the projections + MLP, and draws the shares.
    The widget's ``result`` is the :class:`AttentionShare` at the chosen setting.
    """
    from .models import gpt2

    grid = [int(round(s)) for s in np.geomspace(64, 32768, 19)]

    def draw(seq_len: int, d_model: int, n_layer: int) -> AttentionShare:
        model = gpt2(vocab_size=vocab_size, n_ctx=max(grid[-1], seq_len), d_model=d_model,
                     n_layer=n_layer, n_head=1, shape_only=True)
        here = AttentionShare(seq_len, d_model, n_layer, _gpt_flop_parts(model, seq_len))
        curve = [_gpt_flop_parts(model, s) for s in grid]
        print(f"S = {seq_len:,}, d = {d_model}, {n_layer} layers: QKᵀ + AV = "
              f"{here.parts['QKᵀ + AV']:,} of {here.total:,} forward FLOPs ({here.share:.1%}); "
              f"they break even with projections + MLP at S = {here.break_even:,.0f}")
        _show(plot_shares(grid, {part: [c[part] for c in curve] for part in GPT_FLOP_PARTS},
                          xlabel="sequence length S", quantity="forward FLOPs",
                          marks=[(seq_len, f"S = {seq_len:,}: {here.share:.1%}"),
                                 (here.break_even, f"break-even S = {here.break_even:,.0f}")],
                          title=f"Where a GPT's forward FLOPs go (d = {d_model}, "
                                f"{n_layer} layers)"))
        return here

    slider = dict(continuous_update=False)
    return _explorer(
        draw,
        seq_len=widgets.IntSlider(value=seq_len, min=64, max=32768, step=64,
                                  description="sequence length", **slider),
        d_model=widgets.IntSlider(value=d_model, min=64, max=4096, step=64,
                                  description="d_model", **slider),
        n_layer=widgets.IntSlider(value=n_layer, min=1, max=96, description="n_layer", **slider),
    )


def _doubling_sizes(total: int, start: int = 5) -> list[int]:
    """start, 2·start, 4·start, … below ``total``, then ``total`` itself (at least 2 each)."""
    sizes, n = [], max(2, min(start, total))
    while n < total:
        sizes.append(n)
        n *= 2
    return sizes + [total]


def _draw_ci_funnel(ax, sizes: Sequence[int], stats: Sequence, current: int, scale: float,
                    unit: str) -> None:
    """The median and its 95% CI for the first n samples, per n; ``current`` highlighted."""
    from .plots import ACCENT, HIGHLIGHT, MUTED

    n = np.asarray(sizes, dtype=float)
    medians = np.array([s.median for s in stats]) / scale
    lows, highs = (np.array([s.ci[i] for s in stats]) / scale for i in (0, 1))
    ax.fill_between(n, lows, highs, color=ACCENT, alpha=0.25, label="95% CI of the median")
    ax.plot(n, medians, "o-", color=ACCENT, ms=4, label="median of the first n")
    final, half = medians[-1], (highs[-1] - lows[-1]) / 2
    ax.plot(n, final + half * np.sqrt(n[-1] / n), ls="--", color=MUTED, lw=1,
            label="±1/√n from the last CI")
    ax.plot(n, final - half * np.sqrt(n[-1] / n), ls="--", color=MUTED, lw=1)
    i = list(sizes).index(current)
    ax.errorbar([current], [medians[i]], yerr=[[medians[i] - lows[i]], [highs[i] - medians[i]]],
                fmt="o", color=HIGHLIGHT, capsize=4, zorder=3, label=f"n = {current}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(n, [str(size) for size in sizes])
    ax.minorticks_off()
    # Frame the intervals of n ≥ 20: a handful of samples with one slow call can give a CI many
    # times wider than the rest, which would flatten them all; such a band runs off the top.
    framed = n >= 20 if np.count_nonzero(n >= 20) >= 2 else np.ones(n.size, dtype=bool)
    low, high = lows[framed].min(), highs[framed].max()
    pad = max(high - low, 0.01 * final)
    ax.set_ylim(max(0.0, low - 0.5 * pad), high + 1.5 * pad)
    ax.set_title("The median's 95% CI vs number of samples", fontsize=11, loc="left")
    ax.set_xlabel("samples n")
    ax.set_ylabel(f"time per call ({unit})")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, frameon=False)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def latency_ci_explorer(samples: Sequence[float], *, name: str = "") -> widgets.interactive:
    """How sure is a median? A slider over n, the number of timing samples used.

    ``samples`` are per-call times in seconds, in the order they were measured (collect them
    once, e.g. ``measure_latency(...).samples``). For each n on the slider (5, 10, 20, … and
    all of them) the :class:`~tinyprof.LatencyStats` of the *first* n samples is computed when
    the widget is built, so moving the slider only redraws. Left: their histogram with p50,
    p95, p99 and the median's bootstrap 95% CI on a log time axis
    (:func:`tinyprof.plots.plot_latency_log`), so that a long tail and the bulk both show.
    Right: the median and its CI for every n, beside the ∝ 1/√n narrowing that a CI follows.
    The widget's ``result`` is the LatencyStats of the first n samples.
    """
    from .plots import plot_latency_log
    from .timing import LatencyStats, time_unit
    from .units import format_seconds

    values = np.asarray(samples, dtype=float).ravel()
    if values.size < 2:
        raise ValueError(f"latency_ci_explorer needs at least 2 samples to bootstrap a "
                         f"confidence interval, got {values.size}")
    sizes = _doubling_sizes(values.size)
    stats = [LatencyStats.from_samples(values[:n], name=name) for n in sizes]
    unit, scale = time_unit(stats[-1].median)

    def draw(n: int) -> LatencyStats:
        here = stats[sizes.index(n)]
        low, high = here.ci
        width = f"{(high - low) / here.median:.1%}" if here.median > 0 else "n/a"
        print(f"first {n} of {values.size} samples: median {format_seconds(here.median)}, "
              f"95% CI [{format_seconds(low)}, {format_seconds(high)}], width {width} of "
              "the median")
        fig, (left, right) = plt.subplots(1, 2, figsize=(11.0, 3.8))
        plot_latency_log(here, ax=left)
        _draw_ci_funnel(right, sizes, stats, n, scale, unit)
        fig.tight_layout()
        _show(fig)
        return here

    return _explorer(draw, n=widgets.SelectionSlider(
        options=sizes, value=sizes[-1], description="samples used (n)",
        continuous_update=False))


#: How memory_breakdown_explorer stacks a step: the fixed costs first, the activations on top.
_STACK_ORDER = ("parameters", "gradients", "optimizer state", "activations")


def _byte_unit(n: float) -> tuple[str, float]:
    """The decimal unit that keeps ``n`` bytes ≥ 1 (B, KB, MB or GB) and its size in bytes."""
    from .units import BYTE_UNITS

    return next(((unit, scale) for unit, scale in BYTE_UNITS if n >= scale), ("B", 1.0))


def memory_breakdown_explorer(build: Callable, sample_shape: Sequence[int], *,
                              batch_sizes: Sequence[int] = (1, 16, 64, 256, 1024),
                              optimizers: Sequence[str] = ("sgd", "momentum", "adam"),
                              dtypes: Sequence[str] = ("float32", "float64"),
                              batch_size: int | None = None, optimizer: str = "adam",
                              dtype: str = "float32") -> widgets.interactive:
    """One real training step, measured by component, beside its prediction (controls: batch
    size, optimizer, dtype).

    ``build(dtype)`` returns the model in that dtype (built once per dtype, on first use);
    ``sample_shape`` is one sample's shape, e.g. ``(784,)``. Each setting is measured once with
    :func:`~tinyprof.memory.training_memory` and cached, so keep the model small: one step per
    new setting. The figure stacks parameters, gradients, optimizer state and activations for
    the measured and the predicted step, marks the measured peak (temporaries included), and
    keeps one y scale: the largest predicted total over every setting (or the peak, if higher).
    The widget's ``result`` is the :class:`~tinyprof.memory.TrainingMemory` on show.
    """
    from .memory import predict_training_memory, training_memory
    from .models import random_input
    from .plots import plot_memory_breakdown
    from .units import format_bytes

    sizes = sorted({int(b) for b in batch_sizes})
    batch_size = sizes[len(sizes) // 2] if batch_size is None else int(batch_size)
    for name, value, options in (("batch_size", batch_size, sizes),
                                 ("optimizer", optimizer, list(optimizers)),
                                 ("dtype", dtype, list(dtypes))):
        if value not in options:
            raise ValueError(f"memory_breakdown_explorer: {name}={value!r} is not one of the "
                             f"choices {options}")
    built: dict[str, object] = {}
    measured: dict[tuple[int, str, str], object] = {}

    def model_in(dt: str):
        if dt not in built:
            built[dt] = build(np.dtype(dt))
        return built[dt]

    reference = model_in(dtype)
    highest = max(predict_training_memory(reference, (b, *sample_shape), opt,
                                          dtype=dt).predicted_total_bytes
                  for b in sizes for opt in optimizers for dt in dtypes)

    def draw(batch_size: int, optimizer: str, dtype: str):
        key = (batch_size, optimizer, dtype)
        if key not in measured:
            model = model_in(dtype)
            with np.errstate(all="ignore"):  # a float16 Adam step may divide 0 by 0: bytes are fine
                measured[key] = training_memory(model, random_input(model, (batch_size,
                                                                            *sample_shape)),
                                                optimizer=optimizer)
        step = measured[key]
        unit, scale = _byte_unit(max(highest, step.peak_bytes))
        print(f"batch {batch_size}, {optimizer}, {dtype}: measured "
              f"{format_bytes(step.measured_total_bytes)}, predicted "
              f"{format_bytes(step.predicted_total_bytes)}; peak during the step "
              f"{format_bytes(step.peak_bytes)}")
        bars = {kind: {name: (getattr(step[name], f"{kind}_bytes") or 0) / scale
                       for name in _STACK_ORDER} for kind in ("measured", "predicted")}
        _show(plot_memory_breakdown(
            bars, unit=unit, peaks={"measured": step.peak_bytes / scale},
            ymax=1.15 * max(highest, step.peak_bytes) / scale,
            title=f"One training step: batch {batch_size}, {optimizer}, {dtype}"))
        return step

    return _explorer(
        draw,
        batch_size=widgets.SelectionSlider(options=sizes, value=batch_size,
                                           description="batch size", continuous_update=False),
        optimizer=widgets.Dropdown(options=list(optimizers), value=optimizer,
                                   description="optimizer"),
        dtype=widgets.Dropdown(options=list(dtypes), value=dtype, description="dtype"),
    )


def roofline_explorer(model, batch: int = 8, seq_len: int = 64,
                      batch_options: Sequence[int] = (1, 2, 4, 8, 16, 32),
                      seq_options: Sequence[int] = (16, 32, 64, 128, 256)
                      ) -> widgets.interactive:
    """Sliders over batch size and sequence length for a GPT-style ``model``: each setting
    profiles a few real training steps and places every layer on the machine's measured
    roofline (forward circles, backward squares). The widget's ``result`` is the placement
    Table of the chosen setting."""
    from .bottlenecks import place_layers, profile_step
    from .models import random_input
    from .plots import plot_roofline
    from .roofline import machine_peaks

    peaks = machine_peaks()

    def draw(batch: int, seq_len: int):
        x = random_input(model, (batch, seq_len))
        table = place_layers(profile_step(model, x), model, x.shape, peaks)
        rows = table.to_records()
        counts = {b: sum(r["share"] for r in rows if r["bound"] == b)
                  for b in ("compute", "memory", "overhead")}
        print(f"batch {batch}, {seq_len} tokens: share of the step's time that is "
              + ", ".join(f"{b}-bound {v:.0%}" for b, v in counts.items()))
        _show(plot_roofline(peaks, rows, title=f"batch {batch} × {seq_len} tokens"))
        return table

    return _explorer(
        draw,
        batch=widgets.SelectionSlider(options=list(batch_options), value=batch,
                                      description="batch size", continuous_update=False),
        seq_len=widgets.SelectionSlider(options=list(seq_options), value=seq_len,
                                        description="sequence length", continuous_update=False))


def ab_explorer(baseline: Callable, candidate: Callable, *args, rounds: int = 60,
                noise_band: float = 0.05, seed: int = 0) -> widgets.interactive:
    """One interleaved :func:`tinyprof.ab_test` of ``rounds`` rounds, re-judged by two sliders:
    as if it had stopped after fewer rounds, and with another noise band. Nothing is re-timed
    when a slider moves. The widget's ``result`` is the :class:`~tinyprof.abtest.ABResult` of
    the chosen setting."""
    from .abtest import ABResult, ab_test
    from .plots import plot_ab
    from .timing import LatencyStats

    full = ab_test(baseline, candidate, *args, rounds=rounds, seed=seed)

    def first(stats, n):
        return LatencyStats.from_samples(stats.samples[:n], loops=stats.loops, name=stats.name)

    def draw(used: int, band: float):
        result = ABResult.from_samples(first(full.baseline, used), first(full.candidate, used),
                                       noise_band=band, seed=seed)
        print(result)
        _show(plot_ab(result))
        return result

    return _explorer(
        draw,
        used=widgets.IntSlider(value=rounds, min=5, max=rounds, step=5,
                               description="rounds used", continuous_update=False),
        band=widgets.FloatSlider(value=noise_band, min=0.0, max=0.3, step=0.01,
                                 description="noise band (±)", continuous_update=False,
                                 readout_format=".0%"))
