"""The test tiers: ``make test`` runs everything; ``make test-fast`` only what starts no kernel.

The markers (registered in pyproject.toml) say what a test needs beyond the library:
``kernel`` (a Jupyter kernel, or a notebook executed), ``sandbox`` (bubblewrap), ``cohort``
(several submissions graded), ``book`` (the book built), ``browser`` (headless Chromium), and
``slow`` (none of those, but too slow for the fast tier). Test files put them on as
``pytestmark``; the nbval items of solutions/ get ``kernel`` here.

Threat: a marker forgotten, and the fast tier quietly starts kernels again. Defence: under
``TINYPROF_TEST_TIER=fast`` (set by ``make test-fast``) the guard of fast_tier/tier_guard.py
refuses every such start, in this process and in each Python process started under it, and
each phase of a test (set-up, call, tear-down) during which a refusal was noted fails with the
refusal's message ("this test needs the `kernel` marker: ..."), even when the code under test
caught the exception.

conftest.py takes the hooks from here; ``pytest -p tiers`` loads them on their own
(tests/test_tiers.py does, to run the guard against tests written to break it).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from fast_tier import tier_guard

GUARD_FOLDER = Path(tier_guard.__file__).resolve().parent

#: The markers that keep a test out of ``make test-fast``.
HEAVY = ("kernel", "sandbox", "cohort", "book", "browser", "slow")
#: The tripwire folder of this test process (in the fast tier only).
TRIPWIRE = pytest.StashKey[str]()


def pytest_configure(config) -> None:
    """In the fast tier: a tripwire folder of this process's own, the guard's folder first on
    the PYTHONPATH of every process started from here, and the guard in this process."""
    if not tier_guard.fast_tier_on():
        return
    tripwire = tempfile.mkdtemp(prefix="tinyprof-tier-")
    config.stash[TRIPWIRE] = tripwire
    os.environ[tier_guard.TRIPWIRE_VARIABLE] = tripwire
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(GUARD_FOLDER) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(GUARD_FOLDER), *paths])
    tier_guard.install()


def pytest_unconfigure(config) -> None:
    tripwire = config.stash.get(TRIPWIRE, None)
    if tripwire:
        shutil.rmtree(tripwire, ignore_errors=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A phase during which the guard refused a start fails, with the refusal as its reason."""
    report = yield
    tripwire = item.config.stash.get(TRIPWIRE, None)
    notes = _take_notes(Path(tripwire)) if tripwire else []
    if notes:
        report.outcome = "failed"
        report.longrepr = "\n\n".join(notes) + (f"\n\n{report.longrepr}"
                                                if report.longrepr else "")
    return report


def _take_notes(folder: Path) -> list[str]:
    """The refusals noted since the last look, each read once."""
    notes = []
    for path in sorted(folder.glob("*.txt"), key=lambda p: p.stat().st_mtime_ns):
        notes.append(path.read_text(encoding="utf-8"))
        path.unlink()
    return notes

