"""Chapter 08's explorer: predicted and measured step time for any set of the pipeline's fixes."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from tinyprof.faster import pipeline
from tinyprof.widgets import fixes_explorer
from tinyprof.widgets.faster import miss_reason

#: Stage times standing in for a slow step's profile (seconds), and each fix's effect alone: the
#: prediction is computed from these alone, so its value is known exactly.
BASELINE = {"statistics": 0.010, "load": 0.050, "hidden": 0.012, "loss": 0.005, "update": 0.003}
ALONE = {fix: dict(BASELINE) for fix in pipeline.FIXES}
ALONE["quiet_logging"]["load"] = 0.020
ALONE["cached_statistics"]["statistics"] = 0.0
ALONE["vectorised_loading"]["load"] = 0.001


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_fixes_explorer_starts_with_the_given_fixes_and_draws_the_figure():
    explorer = fixes_explorer(("cached_statistics", "vectorised_loading"), baseline=BASELINE,
                              alone=ALONE, steps=1)
    assert list(explorer.controls) == list(pipeline.FIXES)
    assert [c.value for c in explorer.controls.values()] == [
        fix in ("cached_statistics", "vectorised_loading") for fix in pipeline.FIXES]
    predicted, measured = explorer.result
    assert predicted == pytest.approx(0.010 * 0 + 0.001 + 0.012 + 0.005 + 0.003)
    assert measured > 0
    assert "predicted 21 ms a step (3.81× the baseline's 80 ms)" in explorer.text
    assert len(explorer.images) == 1
    assert "baseline 80 ms" in explorer.descriptions[0]
    assert "<img" in explorer.static_html()


def test_ticking_a_fix_redraws_with_its_prediction_and_a_new_measurement():
    explorer = fixes_explorer((), baseline=BASELINE, alone=ALONE, steps=1)
    assert explorer.result[0] == pytest.approx(sum(BASELINE.values()))
    assert explorer.result[1] == pytest.approx(sum(BASELINE.values()))   # no fix: the baseline
    explorer.controls["quiet_logging"].value = True
    explorer.controls["vectorised_loading"].value = True
    predicted, measured = explorer.result
    # Both fixes of the load stage multiply their factors: 0.05 × 0.4 × 0.02.
    assert predicted == pytest.approx(0.010 + 0.0004 + 0.012 + 0.005 + 0.003)
    assert 0 < measured < 1.0
    assert explorer.draws == 3
    # Each set is measured once: unticking and ticking again shows the same measurement.
    explorer.controls["quiet_logging"].value = False
    assert explorer.result[1] != measured
    explorer.controls["quiet_logging"].value = True
    assert explorer.result == (predicted, measured)
    assert "fixes: quiet_logging, vectorised_loading" in explorer.text
    assert "largest gap:" in explorer.text


def test_the_explorer_names_the_stage_furthest_off_and_the_fixes_that_change_it():
    predicted = {"load": 0.001, "hidden": 0.010}
    measured = {"load": 0.004, "hidden": 0.0101}
    both = miss_reason(predicted, measured, {"quiet_logging", "vectorised_loading"})
    assert both.startswith("largest gap: load")
    assert "quiet_logging, vectorised_loading all change it" in both
    one = miss_reason(predicted, measured, {"vectorised_loading"})
    assert "vectorised_loading does less to it" in one
    none = miss_reason(predicted, measured, {"float32"} - {"float32"})
    assert "no ticked fix changes it" in none


def test_fixes_explorer_refuses_unknown_fixes():
    with pytest.raises(ValueError, match="'faster'"):
        fixes_explorer(("faster",), baseline=BASELINE, alone=ALONE)
