"""Scale it up: Amdahl's law and a quantity against batch size."""

from __future__ import annotations

from typing import Callable, Sequence

import ipywidgets as widgets

from ..amdahl import amdahl_speedup
from ..plots import amdahl_words, plot_amdahl, plot_batch_scaling
from .explorer import Explorer, show


def amdahl_explorer(fraction: float = 0.7, factor: float = 2.0,
                    part: str = "the dominant part", quantity: str = "time"
                    ) -> Explorer:
    """Sliders for p (share of the time improved) and s (how much faster) over Amdahl's curve;
    ``quantity="memory"`` words it as a share of the memory made s× smaller."""

    _, adjective, noun = amdahl_words(quantity)

    def draw(fraction: float, factor: float) -> None:
        print(f"{part}: {fraction:.0%} of the {quantity} made {factor:g}× {adjective} "
              f"→ {amdahl_speedup(fraction, factor):.2f}× overall")
        show(plot_amdahl(fraction, factor, part=part, quantity=quantity))

    return Explorer(
        draw,
        fraction=widgets.FloatSlider(value=fraction, min=0.0, max=0.99, step=0.01,
                                     description=f"share of {quantity} (p)",
                                     continuous_update=False),
        factor=widgets.FloatLogSlider(value=factor, base=2, min=0, max=6, step=0.25,
                                      description=f"{noun} of part (s)", continuous_update=False),
    )


def batch_scaling_explorer(measure: Callable[[int], float], batch_sizes: Sequence[int], *,
                           quantity: str, unit: str = "") -> Explorer:
    """A slider over the largest batch size; ``measure(batch)`` gives the quantity at a batch."""
    batch_sizes = sorted(int(b) for b in batch_sizes)
    values = {b: measure(b) for b in batch_sizes}

    def draw(largest: int) -> None:
        shown = [b for b in batch_sizes if b <= largest]
        show(plot_batch_scaling(shown, [values[b] for b in shown], quantity=quantity, unit=unit))

    return Explorer(draw, largest=widgets.SelectionSlider(
        options=batch_sizes, value=batch_sizes[-1], description="largest batch",
        continuous_update=False))
