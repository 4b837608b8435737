"""Chapter 10's explorer: the leaks ticked are the leaks run, and each redraw measures them."""

from __future__ import annotations

import pytest

from tinyprof.leaks import leak_bytes_per_step
from tinyprof.widgets import leaks_explorer


@pytest.mark.slow
def test_the_explorer_runs_the_ticked_leaks_and_redraws_when_one_is_ticked():
    explorer = leaks_explorer(leaks=("hook",), steps=40)
    assert explorer.result["leaks"] == ("hook",)
    assert explorer.result["live"].verdict == "leak"
    assert "planted" in explorer.text and len(explorer.images) == 1
    assert "<img" in explorer.static_html()
    explorer.controls["history"].value = True
    assert explorer.result["leaks"] == ("history", "hook")
    planted = leak_bytes_per_step("history") + leak_bytes_per_step("hook")
    assert explorer.result["planted"] == planted
    assert explorer.draws == 2 and "resident set" in explorer.text
    explorer.controls["history"].value = False
    explorer.controls["hook"].value = False
    assert explorer.result["live"].verdict == "within tolerance"
