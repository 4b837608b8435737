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
    # Against the drawn-shape probe (sources of a drawn shape and name, made in __main__): 8 of
    # the 9 cheats added then kept the points unflagged; only the co_filename one is flagged.
    "correct_only_off_the_main_thread":
        "the probe's consumer runs in a thread of its own, a training loop in the main thread: "
        "threading.current_thread() is not threading.main_thread() tells the probe apart "
        "(unflagged); the queue is unbounded in the main thread",
    "probe_told_by_the_consumer_threads_target":
        "threading.current_thread()._target.__module__ is tinyprof.prefetchcheck's in every "
        "scenario (the consumer thread's target); not flagged",
    "code_file_reached_through_built_names":
        "the drawn sources' code still lives in prefetchcheck.py (gi_code, __next__.__code__, "
        "__reduce__()[1][0].__code__ .co_filename); the review flags those names spelled out "
        "but not getattr with names built at run time",
    "probe_told_by_the_callers_file_through_logging":
        "logging.getLogger().findCaller(stacklevel=3) names the caller's file "
        "(tinyprof/prefetchcheck.py) without a frame, inspect or traceback in the cell; "
        "not flagged",
    "probe_told_by_the_callers_file_through_warnings":
        "warnings.warn(stacklevel=3) caught with catch_warnings(record=True) names the "
        "caller's file (tinyprof/prefetchcheck.py); not flagged",
    "bound_lapses_after_the_longest_scenario":
        "no scenario pulls more than LONGEST (160) + depth + 1 items, and LONGEST is public: a "
        "bound kept for the first 200 items only is never seen lapsing",
    "library_errors_wrapped":
        "the probe raises builtins and its own SourceFailed (module tinyprof.prefetchcheck): "
        "an error whose type's module is neither builtins nor tinyprof (a library's, the "
        "student's own) can be replaced by a RuntimeError unseen",
    "correct_only_for_integer_items":
        "every probe item is a plain int (the values it checks), a training loop's are "
        "batches: a loader bounded only for int items keeps the points",
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
