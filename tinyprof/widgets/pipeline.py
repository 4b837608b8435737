"""Chapter 09's explorer: load time, compute time, prefetch depth and workers, and the timeline
and device utilization they give (the model's, :func:`tinyprof.loading.model.schedule`)."""

from __future__ import annotations

import ipywidgets as widgets

from ..loading.model import predict, schedule
from ..plots.timeline import plot_timeline
from .explorer import Explorer, show


def pipeline_explorer(load_ms: float = 30.0, compute_ms: float = 20.0, depth: int = 0,
                      workers: int = 1, steps: int = 8) -> Explorer:
    """Sliders for the stage times (ms per batch) and the pipeline's knobs; each setting draws
    the model's timeline of ``steps`` steps (one lane per loader, the host and the device) and
    prints the predicted step time, device utilization and which stage bounds the pace."""

    def draw(load_ms: float, compute_ms: float, depth: int, workers: int) -> dict:
        workers = workers if depth else 1
        load, compute = load_ms / 1e3, compute_ms / 1e3
        prediction = predict(load, compute, depth=depth, workers=workers, steps=steps)
        per_batch = load / min(workers, depth) if depth else load + compute
        bound = ("nothing overlaps: load + compute" if not depth else
                 "loading" if per_batch > compute else "the device")
        print(f"{prediction}; {prediction.throughput(1) :.1f} batches/s; the pace is set by "
              f"{bound}" + ("" if depth or workers == 1 else
                            " (workers need a depth ≥ 1: set depth to use them)"))
        title = (f"load {load_ms:g} ms, compute {compute_ms:g} ms, depth {depth}, "
                 f"{workers} worker(s)")
        show(plot_timeline(schedule(load, compute, depth=depth, workers=workers, steps=steps),
                           title=title))
        return {"prediction": prediction}

    return Explorer(
        draw,
        load_ms=widgets.FloatSlider(value=load_ms, min=1, max=100, step=1,
                                    description="load (ms/batch)", continuous_update=False),
        compute_ms=widgets.FloatSlider(value=compute_ms, min=1, max=100, step=1,
                                       description="compute (ms/step)",
                                       continuous_update=False),
        depth=widgets.IntSlider(value=depth, min=0, max=8, description="prefetch depth",
                                continuous_update=False),
        workers=widgets.IntSlider(value=workers, min=1, max=8, description="workers",
                                  continuous_update=False))


__all__ = ["pipeline_explorer"]
