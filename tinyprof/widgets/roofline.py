"""Every layer of a model on this machine's roofline, as batch and sequence grow."""

from __future__ import annotations

from typing import Sequence

import ipywidgets as widgets

from ..bottlenecks.placement import place_layers, profile_step
from ..bottlenecks.roofline import machine_peaks
from ..models.builders import random_input
from ..plots import plot_roofline
from .explorer import Explorer, show


def roofline_explorer(model, batch: int = 8, seq_len: int = 64,
                      batch_options: Sequence[int] = (1, 2, 4, 8, 16, 32),
                      seq_options: Sequence[int] = (16, 32, 64, 128, 256)
                      ) -> Explorer:
    """Sliders over batch size and sequence length for a GPT-style ``model``: each setting
    profiles a few real training steps and places every layer on the machine's measured
    roofline (forward circles, backward squares). The explorer's ``result`` is the placement
    Table of the chosen setting."""

    peaks = machine_peaks()

    def draw(batch: int, seq_len: int):
        x = random_input(model, (batch, seq_len))
        table = place_layers(profile_step(model, x), model, x.shape, peaks)
        rows = table.to_records()
        counts = {b: sum(r["share"] for r in rows if r["bound"] == b)
                  for b in ("compute", "memory", "overhead")}
        print(f"batch {batch}, {seq_len} tokens: share of the step's time that is "
              + ", ".join(f"{b}-bound {v:.0%}" for b, v in counts.items()))
        show(plot_roofline(peaks, rows, title=f"batch {batch} × {seq_len} tokens"))
        return table

    return Explorer(
        draw,
        batch=widgets.SelectionSlider(options=list(batch_options), value=batch,
                                      description="batch size", continuous_update=False),
        seq_len=widgets.SelectionSlider(options=list(seq_options), value=seq_len,
                                        description="sequence length", continuous_update=False))
