"""What the switch's profile hook costs a hidden test's call (issue 33).

While a hidden test checks the student's code, tinyprof.remote runs each "call" request under
the hook (``tinyprof.testing.switch.Watch``): a Python profile function that sees every Python call
and return. Speed measurements ("time" requests) never run under it. This script times one
"call" request, as the grader makes it (``remote._carry_out``, answer encoding included), with
the switch open, with the hook and without it, in interleaved rounds, on three answers:

- ``percentile``: chapter 04's solution on 40 samples (a sort and a few lines: typical);
- ``bootstrap_ci``: chapter 04's solution, 2,000 resamples (numpy does the work);
- ``python calls``: a loop of 5,000 calls to a small Python helper (the worst case: every call
  is two profile events).

Printed per answer: the median time of a call without the hook, under a profile function that
does nothing (the least any profile hook costs), and under the switch's hook; the ratio of
medians (hook / no hook), and the no-op's (no-op / no hook) beside it.

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


def _noop(frame, event, arg) -> None:
    return None


def _request(function, args, floor: bool = False) -> float:
    start = time.perf_counter()
    if floor:
        sys.setprofile(_noop)
    try:
        reply = remote._carry_out(("call", function, None, args, {}, ()), {})
    finally:
        sys.setprofile(None)
    elapsed = time.perf_counter() - start
    assert "value" in reply, reply
    return elapsed


#: How each answer is called: no hook; a profile function that does nothing (the least any
#: profile hook costs in this Python); the switch's hook, as the grader's "call" request runs it.
WAYS = ("no hook", "no-op hook", "the hook")


def measure(rounds: int, calls: int) -> dict[str, list[float]]:
    """answer → median seconds per call, one per way of WAYS."""
    remote._carry_out(("switch", ()), {})
    opened = list(remote._switch)
    times = {name: [[] for _ in WAYS] for name in ANSWERS}
    try:
        for _ in range(rounds):
            for name, (function, args) in ANSWERS.items():
                for way in range(len(WAYS)):
                    remote._switch[:] = opened if way == 2 else []
                    block = [_request(function, args, floor=way == 1) for _ in range(calls)]
                    times[name][way].append(statistics.median(block))
    finally:
        remote._switch[:] = opened
        remote._carry_out(("unswitch",), {})
    return {name: [statistics.median(samples) for samples in ways]
            for name, ways in times.items()}


def main() -> None:
    quick = "--quick" in sys.argv
    rounds, calls = (3, 5) if quick else (15, 20)
    print(f"one 'call' request with the switch open, {rounds} interleaved rounds of {calls} calls")
    print(f"{'answer':<14} {'no hook':>10} {'no-op hook':>11} {'hook':>10} {'ratio':>7} "
          f"{'no-op ratio':>11}")
    for name, (bare, floor, hooked) in measure(rounds, calls).items():
        print(f"{name:<14} {bare * 1e6:>8.1f} µs {floor * 1e6:>8.1f} µs {hooked * 1e6:>7.1f} µs "
              f"{hooked / bare:>6.2f}× {floor / bare:>10.2f}×")


if __name__ == "__main__":
    main()
