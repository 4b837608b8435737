"""Interactive front-ends built from core ipywidgets only (works with ipywidgets 7.7 and 8).

Each function returns a widget whose output area already holds the figure for the initial
values, so the figure also appears in the static book, where no kernel runs the callbacks.
"""

from __future__ import annotations

from typing import Callable, Sequence

import ipywidgets as widgets
import matplotlib.pyplot as plt
from IPython.display import display

from .amdahl import amdahl_speedup
from .plots import plot_amdahl, plot_batch_scaling, plot_breakdown

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
                    part: str = "the dominant part") -> widgets.interactive:
    """Sliders for p (share of the time improved) and s (how much faster) over Amdahl's curve."""
    def draw(fraction: float, factor: float) -> None:
        print(f"{part}: {fraction:.0%} of the time made {factor:g}× faster "
              f"→ {amdahl_speedup(fraction, factor):.2f}× overall")
        _show(plot_amdahl(fraction, factor, part=part))

    return _explorer(
        draw,
        fraction=widgets.FloatSlider(value=fraction, min=0.0, max=0.99, step=0.01,
                                     description="share of time (p)", continuous_update=False),
        factor=widgets.FloatLogSlider(value=factor, base=2, min=0, max=6, step=0.25,
                                      description="speedup of part (s)", continuous_update=False),
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
