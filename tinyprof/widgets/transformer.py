"""A GPT-style transformer as it grows: its parameters, and attention's share of its FLOPs."""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np

from ..flops import GPT_FLOP_PARTS, AttentionShare, attention_share
from ..models.builders import gpt2, gpt_part
from ..params import count_parameters
from ..plots import plot_breakdown, plot_shares
from .explorer import Explorer, show

#: The head counts the transformer explorer offers (those that divide d_model).
HEAD_COUNTS = (1, 2, 4, 8, 12, 16, 20, 25, 32, 64)


def head_counts(d_model: int) -> list[int]:
    """The entries of :data:`HEAD_COUNTS` that divide ``d_model`` (1 always does)."""
    return [h for h in HEAD_COUNTS if d_model % h == 0]


def transformer_explorer(d_model: int = 768, n_layer: int = 12, n_head: int = 12,
                         vocab_size: int = 50257, n_ctx: int = 1024) -> Explorer:
    """Grow a GPT-style transformer: its parameter count, its memory per dtype, and where the
    parameters sit (embeddings, attention, MLP, LayerNorm). Counted shape-only, so instant.

    The n_head menu offers only head counts that divide d_model (each head gets d_model/n_head
    dimensions), so every setting the controls allow is a valid model."""
    if n_head not in head_counts(d_model):
        raise ValueError(f"transformer_explorer: n_head={n_head} must divide d_model={d_model} "
                         f"and be one of {head_counts(d_model)}")

    def draw(d_model: int, n_layer: int, n_head: int, vocab_size: int, n_ctx: int) -> None:
        model = gpt2(vocab_size=vocab_size, n_ctx=n_ctx, d_model=d_model, n_layer=n_layer,
                     n_head=n_head, shape_only=True)
        total = count_parameters(model)
        sizes = ", ".join(f"{name} {total * b / 1e9:.2f} GB" for name, b in
                          (("fp32", 4), ("fp16", 2), ("int8", 1)))
        print(f"{total:,} parameters: {sizes}")
        parts: dict[str, int] = {}
        for name, param in model.named_parameters():
            parts[gpt_part(name)] = parts.get(gpt_part(name), 0) + param.size
        show(plot_breakdown(list(parts), [v / 1e6 for v in parts.values()],
                             quantity="parameters", unit="millions"))

    slider = dict(continuous_update=False)
    width = widgets.IntSlider(value=d_model, min=64, max=4096, step=64, description="d_model",
                              **slider)
    heads = widgets.Dropdown(options=head_counts(d_model), value=n_head, description="n_head")

    def keep_heads_valid(change: dict) -> None:
        """Offer only head counts that divide the new width; keep the nearest one below."""
        valid = head_counts(change["new"])
        current = heads.value
        heads.options = valid
        heads.value = current if current in valid else max(h for h in valid if h <= current)

    width.observe(keep_heads_valid, names="value")  # before the explorer's redraw
    return Explorer(
        draw,
        d_model=width,
        n_layer=widgets.IntSlider(value=n_layer, min=1, max=96, description="n_layer", **slider),
        n_head=heads,
        vocab_size=widgets.IntSlider(value=vocab_size, min=1000, max=256000, step=1000,
                                     description="vocab_size", **slider),
        n_ctx=widgets.IntSlider(value=n_ctx, min=128, max=8192, step=128,
                                description="n_ctx", **slider),
    )


def attention_share_explorer(seq_len: int = 1024, d_model: int = 768, n_layer: int = 12,
                             vocab_size: int = 50257) -> Explorer:
    """Attention's share of a GPT's forward FLOPs as the sequence grows (sliders: sequence
    length, width, depth).

    Counts a shape-only GPT layer by layer at every sequence length on the curve (FLOPs do not
    depend on the number of heads, so one head is used), prints QKᵀ + AV's share at
    ``seq_len`` and where they break even with the projections + MLP, and draws the shares.
    The explorer's ``result`` is the :class:`AttentionShare` at the chosen setting.
    """

    grid = [int(round(s)) for s in np.geomspace(64, 32768, 19)]

    def draw(seq_len: int, d_model: int, n_layer: int) -> AttentionShare:
        model = gpt2(vocab_size=vocab_size, n_ctx=max(grid[-1], seq_len), d_model=d_model,
                     n_layer=n_layer, n_head=1, shape_only=True)
        here = attention_share(model, seq_len)
        curve = [attention_share(model, s).parts for s in grid]
        print(f"S = {seq_len:,}, d = {d_model}, {n_layer} layers: QKᵀ + AV = "
              f"{here.parts['QKᵀ + AV']:,} of {here.total:,} forward FLOPs ({here.share:.1%}); "
              f"they break even with projections + MLP at S = {here.break_even:,.0f}")
        show(plot_shares(grid, {part: [c[part] for c in curve] for part in GPT_FLOP_PARTS},
                          xlabel="sequence length S", quantity="forward FLOPs",
                          marks=[(seq_len, f"S = {seq_len:,}: {here.share:.1%}"),
                                 (here.break_even, f"break-even S = {here.break_even:,.0f}")],
                          title=f"Where a GPT's forward FLOPs go (d = {d_model}, "
                                f"{n_layer} layers)"))
        return here

    slider = dict(continuous_update=False)
    return Explorer(
        draw,
        seq_len=widgets.IntSlider(value=seq_len, min=64, max=32768, step=64,
                                  description="sequence length", **slider),
        d_model=widgets.IntSlider(value=d_model, min=64, max=4096, step=64,
                                  description="d_model", **slider),
        n_layer=widgets.IntSlider(value=n_layer, min=1, max=96, description="n_layer", **slider),
    )
