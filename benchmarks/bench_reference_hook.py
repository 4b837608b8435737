"""What the switch's profile hook costs a hidden test's call (issue 33).

While a hidden test checks the student's code, tinyprof.remote runs each "call" request under
the hook (``tinyprof.testing._Watch``): a Python profile function that sees every Python call
and return. Speed measurements ("time" requests) never run under it. This script times one
"call" request, as the grader makes it (``remote._carry_out``, answer encoding included), with
the switch open, with the hook and without it, in interleaved rounds, on three answers:

- ``percentile``: chapter 04's solution on 40 samples (a sort and a few lines: typical);
- ``bootstrap_ci``: chapter 04's solution, 2,000 resamples (numpy does the work);
- ``python calls``: a loop of 5,000 calls to a small Python helper (the worst case: every call
  is two profile events).

Printed per answer: the median time of a call without the hook, with it, and the ratio of
medians (with / without).

Run: ``python benchmarks/bench_reference_hook.py [--quick]``
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

from tinyprof import remote


def percentile(samples, q: float) -> float:
    x = sorted(float(v) for v in samples)
    h = (len(x) - 1) * q / 100
    low = int(h)
    if low + 1 >= len(x):
        return x[-1]
    return x[low] + (h - low) * (x[low + 1] - x[low])


def bootstrap_ci(samples, resamples: int = 2000, confidence: float = 0.95, seed: int = 0):
    x = np.asarray(samples, dtype=float)
    rng = np.random.default_rng(seed)
    medians = np.median(x[rng.integers(0, x.size, size=(resamples, x.size))], axis=1)
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(medians, [tail, 100 - tail])
    return float(low), float(high)


def _square(v: float) -> float:
    return v * v


def python_calls(n: int) -> float:
    return sum(_square(float(i)) for i in range(n))


SAMPLES = np.round(np.random.default_rng(0).lognormal(np.log(5.0), 0.6, 40), 4).tolist()
ANSWERS = {"percentile": (percentile, (SAMPLES, 95)),
           "bootstrap_ci": (bootstrap_ci, (SAMPLES,)),
           "python calls": (python_calls, (5000,))}


def _request(function, args) -> float:
    start = time.perf_counter()
    reply = remote._carry_out(("call", function, None, args, {}, ()), {})
    elapsed = time.perf_counter() - start
    assert "value" in reply, reply
    return elapsed


def measure(rounds: int, calls: int) -> dict[str, tuple[float, float]]:
    """answer → (median seconds per call without the hook, with it)."""
    remote._carry_out(("switch", ()), {})
    opened = list(remote._switch)
    times = {name: ([], []) for name in ANSWERS}
    try:
        for _ in range(rounds):
            for name, (function, args) in ANSWERS.items():
                for hooked in (False, True):
                    remote._switch[:] = opened if hooked else []
                    block = [_request(function, args) for _ in range(calls)]
                    times[name][hooked].append(statistics.median(block))
    finally:
        remote._switch[:] = opened
        remote._carry_out(("unswitch",), {})
    return {name: (statistics.median(bare), statistics.median(hooked))
            for name, (bare, hooked) in times.items()}


def main() -> None:
    quick = "--quick" in sys.argv
    rounds, calls = (3, 5) if quick else (15, 20)
    print(f"one 'call' request with the switch open, {rounds} interleaved rounds of {calls} calls")
    print(f"{'answer':<14} {'no hook':>10} {'hook':>10} {'ratio':>7}")
    for name, (bare, hooked) in measure(rounds, calls).items():
        print(f"{name:<14} {bare * 1e6:>8.1f} µs {hooked * 1e6:>7.1f} µs {hooked / bare:>6.2f}×")


if __name__ == "__main__":
    main()
