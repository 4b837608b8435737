"""Chapter 10 says what its run shows: the instructor notebook executed once in a real kernel,
then what its prose says about the run checked against the values its cells computed.

- each leak measured alone keeps its planted bytes a step and at most 1 kB more (the sentence
  "Beyond the planted arrays ...");
- the same memo is a leak keyed by the step, a plateau when bounded, and the loop without
  leaks is within the tolerance (§10.3's three shapes); the residuals of the shapes that are not
  exact are positively autocorrelated, so the textbook interval the cell compares is too narrow
  (§10.3's "readings that remember");
- the snapshot comparison names the four lines the prose names: the reconstruction's, the
  activations', the error's, and normalise's (called from the memo's line);
- malloc_trim gives back what the freed history left resident;
- growth per step is proportional to the batch (the same per sample), and every leak has a
  share of it (so that fixing one alone still leaks);
- memray's unfreed allocations name the same four lines as the snapshots; objgraph's chains
  name the trainer's history and captured lists as the keepers, and find none through the
  memo's untracked dict;
- in PyTorch, a plain backward() leaves total_loss += loss keeping graph nodes and no saved
  tensors, while retain_graph=True and evaluation losses kept with gradients on keep the same
  bytes of saved tensors every step, and loss.item() keeps nothing.
"""

from __future__ import annotations

import pytest
from chapters import SOLUTIONS, probed_values

from tinyprof.leaks import loop

pytestmark = pytest.mark.kernel

NOTEBOOK = SOLUTIONS / "10_leaks" / "leaks.ipynb"

#: A cell appended to the executed chapter: the values its sentences are about, as JSON.
PROBE = """
import json as _json
print("PROBE" + _json.dumps({
    "alone": {name: slope for name, _, slope, _, _ in rows},
    "shapes": {name: tp.leaks.growth_per_step(m.live, WARMUP, TOLERANCE).verdict
               for name, m in shapes.items()},
    "runs": {name: [f.lag1, f.se / f.iid_se if f.iid_se else 1.0, f.exact] for name, f in (
        (name, tp.leaks.fit_line(range(WARMUP, len(m.live)), m.live[WARMUP:]))
        for name, m in shapes.items())},
    "lines": [grown.source() for grown in by_line[:4]],
    "stack": [line for _, line in by_stack.frames[:2]],
    "rss": [start, held, freed, returned],
    "batches": batches, "per_batch": per_batch, "shares": shares,
    "memray": sorted(unfreed, key=unfreed.get, reverse=True)[:4],
    "snapshot_lines": [f"loop.py:{grown.lineno}" for grown in by_line[:4]],
    "keepers": found_keepers, "torch": per_step,
}))
"""


@pytest.fixture(scope="module")
def values() -> dict:
    return probed_values(NOTEBOOK, PROBE)


def test_each_leak_alone_keeps_its_planted_bytes(values):
    for leak in loop.LEAKS:
        planted = loop.leak_bytes_per_step(leak)
        assert planted <= values["alone"][leak] <= planted + 1024, (leak, values["alone"])
    assert values["alone"]["none"] < 1024


def test_a_leak_a_plateau_and_no_leak(values):
    assert list(values["shapes"].values()) == ["leak", "plateau", "within tolerance"], (
        values["shapes"])


def test_the_readings_remember_and_the_textbook_interval_is_too_narrow(values):
    """§10.3: a reading above the line is followed by another; the cell prints how much too
    narrow the interval that takes the steps as independent is."""
    for name, (lag1, too_narrow, exact) in values["runs"].items():
        if not exact:
            assert lag1 > 0.3 and too_narrow > 1.5, (name, values["runs"])


def test_the_snapshots_name_the_lines_the_prose_names(values):
    assert sorted(line.split("#")[0].strip() for line in values["lines"]) == sorted([
        "recon = hidden @ self.w2", "hidden = np.tanh(x @ self.w1)", "error = recon - x",
        "return (raw - raw.mean(axis=0)) / (raw.std(axis=0) + 1e-3)"]), values["lines"]


def test_malloc_trim_gives_back_what_the_freed_history_left(values):
    start, held, freed, returned = values["rss"]
    assert held - start > 30e6 and returned < freed and returned - start < 10e6, values["rss"]


def test_growth_is_proportional_to_the_batch_and_every_leak_has_a_share(values):
    per_sample = [rate / size for rate, size in zip(values["per_batch"], values["batches"])]
    assert max(per_sample) / min(per_sample) < 1.05, per_sample
    assert all(share > 0.03 for share in values["shares"].values()), values["shares"]
    assert sum(values["shares"].values()) == pytest.approx(1.0)


def test_memray_and_objgraph_name_what_the_prose_says(values):
    assert sorted(values["memray"]) == sorted(values["snapshot_lines"]), values
    assert values["keepers"]["history"].endswith(".history[19]"), values["keepers"]
    assert values["keepers"]["hook"].endswith(".captured[19]"), values["keepers"]
    assert values["keepers"]["memo"] is None, values["keepers"]


def test_what_each_pytorch_habit_keeps(values):
    torch = values["torch"]
    assert torch["total_loss += loss.item()"] == [0, 0], torch
    assert torch["total_loss += loss"][0] == 0 and torch["total_loss += loss"][1] > 0, torch
    retained = torch["total_loss += loss, backward(retain_graph=True)"][0]
    assert retained > 50e3 and torch["eval losses kept, gradients on"][0] == retained, torch
