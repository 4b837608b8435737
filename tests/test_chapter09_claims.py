"""Chapter 09 says what its run shows: the instructor notebook executed once in a real kernel,
then what its prose says about the run checked against the values its cells computed.

- §9.2: load and compute run in turn, so a step of the loop as given costs their sum;
- §9.4: each prediction is printed with its error, and the runs it predicts are the runs made;
- §9.5: prefetching makes the step shorter and the device busier, and the explorer starts from
  the stage times measured;
- §9.6: waiting releases the GIL (two threads read the network file system faster);
- §9.8: with DataLoader's two workers the host waits for the first batch, far less for the others;
- Scale it up: a batched read's cost per sample falls with the batch; the warm cache's
  measured bytes exceed its pixels' (the header and dict entry of each small array).
"""

from __future__ import annotations

import pytest
from chapters import SOLUTIONS, probed_values

NOTEBOOK = SOLUTIONS / "09_pipeline" / "pipeline.ipynb"

#: A cell appended to the executed chapter: the values its sentences are about, as JSON.
PROBE = """
import json as _json
print("PROBE" + _json.dumps({
    "L": L, "C": C, "slow": [slow.step_seconds, slow.utilization],
    "prefetched": [prefetched.step_seconds, prefetched.utilization],
    "checks": {name: [c.prediction.step_seconds, c.measured_seconds / STEPS, c.error]
               for name, c in checks.items()},
    "decode": decode_s, "waiting": waiting,
    "loaders": {str(w): [e.seconds for e in events.select("load")]
                for w, (_, events) in loaders.items()} if "loaders" in globals() else None,
    "sizes": sizes, "per_batch": per_batch,
    "cache": [cache_cost.retained_bytes, len(cached.cache) * 64],
}))
"""


@pytest.fixture(scope="module")
def values() -> dict:
    return probed_values(NOTEBOOK, PROBE)


def test_the_loop_as_given_costs_load_plus_compute(values):
    step, _ = values["slow"]
    assert step == pytest.approx(values["L"] + values["C"], rel=0.2), values


def test_each_prediction_is_printed_with_the_error_of_its_run(values):
    for name, (predicted, measured, error) in values["checks"].items():
        assert error == pytest.approx(measured / predicted - 1, abs=1e-9), name
        assert abs(error) < 0.3, (name, values["checks"])


def test_prefetching_shortens_the_step_and_busies_the_device(values):
    (slow, slow_busy), (fast, fast_busy) = values["slow"], values["prefetched"]
    assert fast < 0.8 * slow and fast_busy > slow_busy + 0.15, values


def test_waiting_releases_the_gil(values):
    """Two threads read the network file system faster than one (whether they also load from
    the local disk faster depends on the machine's load: reading a file and Pillow's inflating
    release the GIL, and a fresh-clone run beside other tests measured 1.42x; the chapter prints
    whichever it measured)."""
    waiting = values["waiting"]
    assert waiting["serial"] / waiting["thread"] > 1.4, waiting


def test_dataloader_workers_make_the_host_wait_for_the_first_batch_only(values):
    if values["loaders"] is None:
        pytest.skip("torch is not installed")
    first, *rest = values["loaders"]["2"]
    assert first > 3 * sorted(rest)[len(rest) // 2], values["loaders"]


def test_a_batched_reads_cost_per_sample_falls_with_the_batch(values):
    per_sample = [t / s for s, t in zip(values["sizes"], values["per_batch"])]
    assert per_sample[-1] < 0.75 * per_sample[0], per_sample


def test_the_cache_costs_more_than_its_pixels(values):
    measured, pixels = values["cache"]
    assert measured > 2 * pixels, values["cache"]
