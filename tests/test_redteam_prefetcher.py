"""Red team of chapter 09's Prefetcher exercise, graded for real.

Each entry of tests/redteam_prefetcher.py is put in the ``Prefetcher`` answer cell of a notebook
made of the chapter's set-up cells, that answer and the chapter's own test cell
(``test_Prefetcher``, hidden tests included), and run by the grader (the kernel in the bubblewrap
sandbox, the test decided by the judge: test_redteam_busy_device.grade_answers). A cheat must
lose the cell's points; the chapter's solution and every honest alternative must keep them. Each
cheat runs in a kernel of its own (a loader it leaves behind would otherwise count against its
neighbour); the honest ones share one kernel.

Against s6-prefetch a802e3d: 12 of the 16 cheats lost the points at the first try. Two that kept
them reached the probe through inspect.getclosurevars or rebound drive_prefetcher with a match
pattern's capture: the static review now flags both (a flagged cheat counts as held: it is held
for the instructor). A queue unbounded above depth 4 kept them while the hidden test drew
depths 1 and 3 or 4; it also drives one of 5 to 8 now (a queue unbounded only above 8 would
still pass). One kept them unflagged: it told the probe's source apart (a class named
``batches`` with ``__slots__ = ()``, as tinyprof's public source showed); since then each
scenario hands a source of a shape drawn from ``prefetchcheck.SHAPES`` (a generator, an iterator
class with or without slots, a map, ``iter(function, end)``), named from a list and made in
``__main__``, and it loses the points. The solution and the 4 honest prefetchers keep theirs
(about 2 minutes).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import redteam_prefetcher as corpus
from test_redteam_busy_device import BROKEN, describe, flags, grade_answers, solution, with_gaps

pytestmark = pytest.mark.skipif(
    not Path("/usr/bin/bwrap").exists() and os.environ.get("CI") != "true",
    reason="bubblewrap is not installed (CI installs it; locally: apt-get install bubblewrap)")

#: Cheats the rebuilt probe does not stop yet: name → what it misses (from the runs against the
#: builder's branch).
GAPS: dict[str, str] = {
    # Against the drawn-shape probe, 8 of the 9 cheats added then kept the points unflagged; 7
    # lose them, or are flagged, since the probe also draws where its consumer runs (the
    # notebook's main thread or a thread whose target looks like a notebook's), what its items
    # are (integers, tuples, arrays, dicts) and its exception class's name and module, and the
    # review flags findCaller, catch_warnings(record=True) and names of code built in strings.
    "bound_lapses_after_the_longest_scenario":
        "no scenario pulls more than LONGEST (160) + depth + 1 items, and LONGEST is public: a "
        "bound kept for the first 200 items only is never seen lapsing",
}
#: Honest prefetchers that lose the points: name → why.
HONEST_LOSSES: dict[str, str] = {}


@pytest.mark.parametrize("cheat", with_gaps(corpus.CHEATS, GAPS))
@pytest.mark.kernel
@pytest.mark.sandbox
def test_a_cheat_loses_the_prefetcher_points(cheat, tmp_path):
    [record] = grade_answers("Prefetcher", "test_Prefetcher", [corpus.CHEATS[cheat]], tmp_path)
    verdict = record.get("verdict", {})
    print(f"\n[red team] {cheat}: {describe(record)}")
    assert verdict.get("ename") not in BROKEN, f"{cheat} itself is broken: {describe(record)}"
    # Tampering (reaching the probe's closures, rebinding a name the test uses) is the static
    # review's to catch: a flagged submission is held for the instructor, never exported.
    flagged = flags("Prefetcher", corpus.CHEATS[cheat])
    assert verdict.get("passed") is False or flagged, (
        f"{cheat} kept the points of test_Prefetcher unflagged: {describe(record)}")


@pytest.fixture(scope="module")
def honest_records(tmp_path_factory) -> dict[str, dict]:
    """The chapter's solution and every honest prefetcher, graded in one kernel."""
    answers = {"the chapter's solution": solution("Prefetcher"), **corpus.HONEST}
    records = grade_answers("Prefetcher", "test_Prefetcher", list(answers.values()),
                            tmp_path_factory.mktemp("prefetch_honest"), timeout=600)
    return dict(zip(answers, records))


@pytest.mark.parametrize("name", with_gaps({"the chapter's solution": "", **corpus.HONEST},
                                         HONEST_LOSSES))
@pytest.mark.kernel
@pytest.mark.sandbox
def test_an_honest_prefetcher_keeps_its_points(name, honest_records):
    record = honest_records[name]
    print(f"\n[red team] honest {name}: {describe(record)}")
    assert record.get("verdict", {}).get("passed") is True, (
        f"the honest {name} lost the points of test_Prefetcher: {describe(record)}")


@pytest.mark.parametrize("name", sorted(corpus.HONEST))
def test_an_honest_prefetcher_is_not_flagged(name):
    assert flags("Prefetcher", corpus.HONEST[name]) == [], name
