"""Run by every Python process started under ``make test-fast`` (tests/tiers.py puts this
folder first on their PYTHONPATH): the fast tier's guard (tier_guard.py) in that process too, so
that a kernel started two processes down (``python -m autograder grade``, a benchmark's quick
run) is refused as one started by the test itself."""

import tier_guard

if tier_guard.fast_tier_on():
    tier_guard.install()
