"""A/B comparison of two callables: interleaved timing, an effect size with its interval, a
significance test, a noise band, and a verdict that needs all three.

Timing the same function as "A" and then as "B" in two sequential blocks routinely gives
"significant" differences: the machine drifts (frequency, other processes, caches) between the
blocks. :func:`ab_test` therefore runs the two in *rounds*, each round timing one calibrated block
of A and one of B in a random order, so that drift hits both alike. From the per-call samples:

- **speedup** = median(baseline) / median(candidate): above 1 the candidate is faster;
- its 95 % **bootstrap interval**: the ratio of the medians of ``resamples`` independent
  resamples (with replacement) of each side, and the 2.5th and 97.5th percentiles of the ratios;
  each resample's median is drawn from its order statistics
  (:func:`tinyprof.timing.bootstrap_medians`, the same distribution as drawing n indices), so
  10⁵ samples a side cost milliseconds, not seconds;
- the **Mann–Whitney U** test (two-sided): U = number of pairs (a, b) with a > b, ties counting
  ½; its p-value by the normal approximation with tie and continuity corrections (what
  ``scipy.stats.mannwhitneyu(..., method="asymptotic")`` gives); asv and Google Benchmark's
  compare.py use this test too; it needs no normal samples;
- the **noise band** ±``noise_band``: ratios within [1/(1 + band), 1 + band] count as no change
  however significant (criterion.rs calls it the noise threshold);
- the **verdict**: "faster" when p < ``alpha`` *and* the whole interval lies above 1 + band,
  "slower" when p < ``alpha`` and the whole interval lies below 1/(1 + band), else
  "no change". Fewer than MIN_ROUNDS rounds give no verdict: the result prints "too few rounds
  for a verdict" (its ``verdict`` attribute stays "no change", the vocabulary of
  :mod:`.compare`, and ``judged`` is False), so that an interval far from 1 never sits beside
  "no change" unexplained.

Which **clock** times the blocks (``clock=``, :data:`tinyprof.timing.harness.CLOCKS`): "wall"
(``time.perf_counter``, the default) counts everything that happened while a block ran, other
programs' turns on the core included; "cpu" (``time.process_time``) counts only this process's
CPU time. On a loaded machine the wall clock charges a long call for more pre-emptions than a
short one, so a wall-clock ratio of a 100 ms function to a 3 ms one moves with the load; the
CPU-time ratio barely does (a neighbour that shares the caches and the memory bus still slows
memory-bound code in CPU time too). The result records and prints which clock it used.

How a **block** of calls is made (``blocks=``) moves a ratio too (issue 46). "calibrated" (the
default) gives each side its own calls, ≥ 200 µs a block, and drops each output before the next
call: the allocator hands the next call the same memory back. "speed test" makes blocks by the
speed tests' rule (:mod:`tinyprof.timing.blocks`, shared with ``expect_faster`` and the
grader): calls chosen from the baseline alone, the same for both sides, every output kept until
the block is timed, and with ``make_inputs`` fresh inputs every call. Kept outputs pile up, and
once they outgrow what the allocator keeps, each call's output lands on fresh pages, a page
fault per 4 KiB: a cost a call on both sides that weighs most on the faster one (chapter 08's
loader: 6.8× in calibrated blocks, 5.1× in the speed test's 28-call blocks, with about 120
faults a call against none). The result prints how its blocks were made and the minor page
faults a call of each side, so that two measurements that differ can say why.
"""

from __future__ import annotations

import gc
import math
import numbers
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..torchprobe import synchronized
from ..units import format_interval, format_seconds
from .blocks import faults_between, minor_faults, per_call, speed_test_rounds
from .compare import FASTER, NO_CHANGE, SLOWER
from .context import collect_context
from .harness import MIN_BLOCK_SECONDS, calibrate_loops, callable_name, clock_named, make_block
from .stats import LatencyStats, bootstrap_medians

#: Relative change treated as noise, either way.
NOISE_BAND = 0.05
#: Significance level of the Mann–Whitney test.
ALPHA = 0.01
#: Below this many rounds the test has too little power (Google Benchmark warns below 9).
MIN_ROUNDS = 9
CONFIDENCE = 0.95
RESAMPLES = 2000
#: How a block of calls is made (``ab_test(blocks=...)``): each side's own calls calibrated to
#: ≥ 200 µs, each output dropped before the next call; or the speed tests' rule
#: (:mod:`tinyprof.timing.blocks`): calls chosen from the baseline alone, the same for both
#: sides, every output kept until the block is timed.
CALIBRATED, SPEED_TEST = "calibrated", "speed test"
BLOCK_RULES = (CALIBRATED, SPEED_TEST)


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1…n of ``values``, ties sharing the mean of the ranks they span."""
    order = np.argsort(values, kind="mergesort")
    _, first, counts = np.unique(values[order], return_index=True, return_counts=True)
    mean_rank = first + (counts + 1) / 2.0
    ranks = np.empty(values.size)
    ranks[order] = np.repeat(mean_rank, counts)
    return ranks


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """(U, p): U = #{(x, y): x in a, y in b, x > y} + ½·#{x = y}, and the two-sided p-value
    p = erfc(z / √2) with z = (abs(U − n₁n₂/2) − ½) / σ and
    σ² = n₁n₂/12 · ((n + 1) − Σ(t³ − t) / (n(n − 1))) over the groups of t tied values."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.size == 0 or y.size == 0:
        raise ValueError(f"mann_whitney_u needs samples on both sides, got {x.size} and {y.size}")
    n1, n2 = x.size, y.size
    n = n1 + n2
    combined = np.concatenate([x, y])
    u = float(_average_ranks(combined)[:n1].sum() - n1 * (n1 + 1) / 2)
    _, ties = np.unique(combined, return_counts=True)
    variance = n1 * n2 / 12 * ((n + 1) - float((ties**3 - ties).sum()) / (n * (n - 1)))
    if variance <= 0:
        return u, 1.0
    z = max(abs(u - n1 * n2 / 2) - 0.5, 0.0) / math.sqrt(variance)
    return u, min(1.0, math.erfc(z / math.sqrt(2)))


def bootstrap_ratio_ci(baseline: Sequence[float], candidate: Sequence[float],
                       confidence: float = CONFIDENCE, resamples: int = RESAMPLES,
                       seed: int = 0) -> tuple[float, float]:
    """Percentile-bootstrap interval of median(baseline) / median(candidate): each side
    resampled with replacement ``resamples`` times (one ``np.random.default_rng(seed)`` for
    both, baseline first), the ratio of the medians taken per resample, and its (1 − c)/2 and
    (1 + c)/2 percentiles. The resamples' medians come from
    :func:`tinyprof.timing.bootstrap_medians` (O(n log n + resamples))."""
    a, b = np.asarray(baseline, dtype=float).ravel(), np.asarray(candidate, dtype=float).ravel()
    if a.size == 0 or b.size == 0:
        raise ValueError(f"bootstrap_ratio_ci needs samples on both sides, got {a.size} and "
                         f"{b.size}")
    rng = np.random.default_rng(seed)
    ratios = bootstrap_medians(a, resamples, rng) / bootstrap_medians(b, resamples, rng)
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(ratios, [tail, 100 - tail])
    return float(low), float(high)


def check_settings(noise_band: float, alpha: float, caller: str = "ab_test") -> None:
    """Refuse a noise band that is not a finite number ≥ 0 and an ``alpha`` outside (0, 1): a
    negative band or alpha = 1 would call any A/A difference "faster" or "slower"."""
    for name, value in (("noise_band", noise_band), ("alpha", alpha)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"{caller}: {name} must be a number, got {value!r}")
    if not (math.isfinite(noise_band) and noise_band >= 0):
        raise ValueError(f"{caller}: noise_band is the relative change treated as noise, a "
                         f"number ≥ 0 (0.05 = ±5 %), got {noise_band!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"{caller}: alpha is a significance level strictly between 0 and 1 "
                         f"(0.01 is usual), got {alpha!r}")


def verdict(speedup_ci: tuple[float, float], p_value: float, rounds: int,
            noise_band: float = NOISE_BAND, alpha: float = ALPHA) -> str:
    """FASTER, SLOWER or NO_CHANGE (the comparison vocabulary of :mod:`.compare`) by the rule in
    the module docstring."""
    if rounds < MIN_ROUNDS or p_value >= alpha:
        return NO_CHANGE
    low, high = speedup_ci
    if low > 1 + noise_band:
        return FASTER
    if high < 1 / (1 + noise_band):
        return SLOWER
    return NO_CHANGE


@dataclass(frozen=True)
class ABResult:
    """The outcome of :func:`ab_test` (see the module docstring for every field's meaning)."""

    baseline: LatencyStats
    candidate: LatencyStats
    speedup: float
    ci: tuple[float, float]
    p_value: float
    u_statistic: float
    rounds: int
    noise_band: float = NOISE_BAND
    alpha: float = ALPHA
    interleaved: bool = True
    verdict: str = NO_CHANGE
    warnings: tuple[str, ...] = ()
    clock: str = "wall"
    #: How the blocks were made (:data:`BLOCK_RULES`), whether every call had fresh inputs, and
    #: the minor page faults a call of the baseline and the candidate (None: not counted).
    blocks: str = CALIBRATED
    fresh_inputs: bool = False
    faults: tuple[float | None, float | None] = (None, None)

    @property
    def judged(self) -> bool:
        """True when there were enough rounds (≥ MIN_ROUNDS) for ``verdict`` to be a verdict."""
        return self.rounds >= MIN_ROUNDS

    @property
    def conclusion(self) -> str:
        """The verdict, or "too few rounds for a verdict (n < MIN_ROUNDS)" when there is none."""
        if self.judged:
            return self.verdict
        return f"too few rounds for a verdict ({self.rounds} < {MIN_ROUNDS})"

    @classmethod
    def from_samples(cls, baseline: LatencyStats, candidate: LatencyStats, *,
                     noise_band: float = NOISE_BAND, alpha: float = ALPHA,
                     interleaved: bool = True, seed: int = 0,
                     clock: str = "wall", blocks: str = CALIBRATED, fresh_inputs: bool = False,
                     faults: tuple[float | None, float | None] = (None, None)) -> "ABResult":
        """Compare two sets of samples already taken (one per round on each side) on ``clock``
        ("wall" or "cpu", recorded and printed, never re-read), their blocks made by the rule
        ``blocks`` (recorded and printed with ``fresh_inputs`` and the ``faults`` a call)."""
        check_settings(noise_band, alpha, "ABResult.from_samples")
        clock_named(clock, "ABResult.from_samples")
        for side, stats in (("baseline", baseline), ("candidate", candidate)):
            if not isinstance(stats, LatencyStats):
                raise TypeError(f"ABResult.from_samples: {side} must be a LatencyStats, got "
                                f"{type(stats).__name__}")
        a, b = np.asarray(baseline.samples), np.asarray(candidate.samples)
        rounds = min(a.size, b.size)
        u, p = mann_whitney_u(a, b)
        ci = bootstrap_ratio_ci(a, b, seed=seed)
        notes = []
        if rounds < MIN_ROUNDS:
            notes.append(f"only {rounds} rounds: at least {MIN_ROUNDS} are needed before a "
                         "difference is called, so the interval is shown without a verdict")
        if not interleaved:
            notes.append("sequential blocks (all A, then all B): drift between the blocks looks "
                         "like a difference; interleave for a fair comparison")
        for side, stats in (("baseline", baseline), ("candidate", candidate)):
            notes += [f"{side}: {str(w).split('. ')[0]}" for w in stats.warnings
                      if w.kind in ("unstable", "busy machine")]
        if blocks not in BLOCK_RULES:
            raise ValueError(f"ABResult.from_samples: blocks must be one of {BLOCK_RULES}, got "
                             f"{blocks!r}")
        return cls(baseline, candidate, baseline.median / candidate.median, ci, p, u, rounds,
                   noise_band, alpha, interleaved,
                   verdict(ci, p, rounds, noise_band, alpha), tuple(notes), clock, blocks,
                   fresh_inputs, faults)

    def describe_blocks(self) -> str:
        """How the blocks were made and the page faults a call each side's calls took."""
        a, b = self.baseline.loops, self.candidate.loops
        inputs = "fresh inputs every call" if self.fresh_inputs else "one input reused"
        if self.blocks == SPEED_TEST:
            made = (f"the speed test's: {a} calls a side, chosen from the baseline; every output "
                    f"kept until its block was timed; {inputs}")
        else:
            made = (f"{a} and {b} calls, each side's own (≥ 200 µs); each output dropped before "
                    f"the next call; {inputs}")
        if None in self.faults:
            return made
        return f"{made}; page faults a call {self.faults[0]:,.1f} and {self.faults[1]:,.1f}"

    def __str__(self) -> str:
        name_a, name_b = self.baseline.name or "baseline", self.candidate.name or "candidate"
        lines = [f"{name_b} vs {name_a}: {self.speedup:.3f}× as fast "
                 f"(95% CI {format_interval(self.ci, 'ratio', 3)}, "
                 f"Mann–Whitney p = {self.p_value:.2g}, noise band ±{self.noise_band:.0%}, "
                 f"{self.rounds} {'interleaved ' if self.interleaved else ''}rounds, "
                 f"{self.clock} clock) → {self.conclusion}",
                 f"  medians: {name_a} {format_seconds(self.baseline.median)}, "
                 f"{name_b} {format_seconds(self.candidate.median)}",
                 f"  blocks: {self.describe_blocks()}"]
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)


def _timed_rounds(blocks: Sequence[Callable[[int], float]], loops: Sequence[int], rounds: int,
                  interleave: bool, rng: np.random.Generator,
                  faults: list[list[int | None]] | None = None) -> list[list[float]]:
    """Per-call seconds of each block: one block of each per round in a random order, or (not
    interleaved) all rounds of the first, then all of the second. Each block's minor page
    faults are appended to ``faults[i]`` when given (counted outside the block's time)."""
    times: list[list[float]] = [[] for _ in blocks]
    counts = faults if faults is not None else [[] for _ in blocks]

    def timed(i: int) -> float:
        before = minor_faults()
        seconds = blocks[i](loops[i]) / loops[i]
        counts[i].append(faults_between(before, minor_faults()))
        return seconds

    order = ([i for _ in range(rounds) for i in rng.permutation(len(blocks))] if interleave
             else [i for i in range(len(blocks)) for _ in range(rounds)])
    for i in order:
        times[i].append(timed(i))
    return times


def _count(caller: str, name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{caller}: {name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{caller}: {name} must be ≥ {minimum}, got {value}")
    return int(value)


class _Guarded:
    """A block that names its function and the phase when the function raises."""

    def __init__(self, caller: str, role: str, fn: Callable, block: Callable[[int], float]):
        self.caller, self.role, self.fn, self.block = caller, role, fn, block
        self.phase = "warm-up"

    def __call__(self, loops: int) -> float:
        try:
            return self.block(loops)
        except Exception as error:
            raise RuntimeError(f"{self.caller}: the {self.role} ({callable_name(self.fn)}) "
                               f"raised {type(error).__name__} during {self.phase}: "
                               f"{error}") from error


def measure_interleaved(functions: Sequence[tuple[str, Callable]], args: tuple = (),
                        kwargs: dict | None = None, *, rounds: int = 30, warmup: int = 3,
                        loops: int | None = None, interleave: bool = True, seed: int = 0,
                        caller: str = "ab_test", block_seconds: float = MIN_BLOCK_SECONDS,
                        clock: str = "wall",
                        faults: list[list[int | None]] | None = None) -> list[LatencyStats]:
    """Per-call LatencyStats of each ``(role, fn)`` of ``functions``, timed as :func:`ab_test`
    does: ``warmup`` calls each, loops calibrated per function to ≥ ``block_seconds`` a block
    (200 µs; or ``loops``), then ``rounds`` rounds of one block of each in a random order, the
    garbage collector off, each block timed on ``clock`` ("wall" or "cpu", see
    :data:`tinyprof.timing.harness.CLOCKS`). Sample i of every function comes from round i, so
    per-round ratios pair up. An exception names the role, the function and the phase (warm-up,
    calibration, timing). ``faults``, when given, receives a list per function of each timed
    block's minor page faults."""
    rounds = _count(caller, "rounds", rounds, 1)
    warmup = _count(caller, "warmup", warmup, 0)
    if loops is not None:
        loops = _count(caller, "loops", loops, 1)
    clock_named(clock, caller)
    blocks = [_Guarded(caller, role, fn, make_block(fn, args, kwargs or {}, clock))
              for role, fn in functions]
    for block in blocks:
        block(warmup)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        counts = []
        for block in blocks:
            block.phase = "calibration"
            counts.append(loops or calibrate_loops(block, block_seconds))
            block.phase = "timing"
        if faults is not None:
            faults[:] = [[] for _ in blocks]
        times = _timed_rounds(blocks, counts, rounds, interleave, np.random.default_rng(seed),
                              faults)
    finally:
        if gc_was_enabled:
            gc.enable()
    context = collect_context()
    return [LatencyStats.from_samples(t, loops=n, name=callable_name(fn), warmup=warmup,
                                      context=context)
            for t, n, (_, fn) in zip(times, counts, functions)]


def ab_test(baseline: Callable, candidate: Callable, *args: Any, rounds: int = 30,
            warmup: int = 3, loops: int | None = None, noise_band: float = NOISE_BAND,
            alpha: float = ALPHA, interleave: bool = True, seed: int = 0,
            clock: str = "wall", blocks: str = CALIBRATED,
            make_inputs: Callable[[int], Any] | None = None, **kwargs: Any) -> ABResult:
    """Time ``baseline(*args, **kwargs)`` and ``candidate(*args, **kwargs)`` in ``rounds``
    interleaved rounds (random order in each, ``seed``) after ``warmup`` calls each, and compare
    them (:class:`ABResult`). ``interleave=False`` times all rounds of the baseline first: only
    for showing why not to. Torch callables on a GPU wait for the device at the end of each
    call (:func:`tinyprof.pytorch.synchronized`).

    ``blocks`` says how a block of calls is made (the result prints it, with the minor page
    faults a call of each side):

    - ``"calibrated"`` (the default): each side's calls calibrated to ≥ 200 µs a block
      (``loops=None``) or fixed at ``loops``; each output dropped before the next call, so the
      memory allocator hands the next call the same memory back; the garbage collector off.
    - ``"speed test"``: the speed tests' rule (:mod:`tinyprof.timing.blocks`, what
      ``expect_faster`` and the grader do): calls chosen from the baseline alone so that its
      block lasts 0.1 s (or ``loops``), the same for both sides, every output kept until the
      block is timed (kept outputs that pile up can land on fresh pages: a page fault each);
      with ``make_inputs`` instead of ``args``, fresh inputs ``make_inputs(seed)`` for every
      call, made before the block. Its numbers agree with the speed test's on the same
      functions (with fresh inputs it is that measurement, without the output check).

    ``clock`` says what a block's time is:

    - ``"wall"`` (the default): elapsed time, ``time.perf_counter``. Use it for anything that
      waits, sleeps, reads files or runs threads, and for what a user waits for. On a busy
      machine it also counts the turns other programs took on the core, more of them the longer
      a call lasts.
    - ``"cpu"``: this process's CPU time, ``time.process_time``. Use it for single-threaded,
      CPU-bound code on a shared machine (what the speed tests, ``tp.testing.expect_faster``,
      use): other programs barely move it. It counts every thread of the process, so a
      multi-threaded BLAS call costs its total work, more than the wall time it takes, and a
      wait costs nothing. (``time.thread_time`` would count only the calling thread and miss
      the work of BLAS's own threads, so it is not offered.)

    Raises TypeError for non-callables, non-integer counts, a clock that is not a string or
    ``make_inputs`` beside ``args``, ValueError for ``rounds`` < 1, ``warmup`` < 0, ``loops``
    < 1, a negative ``noise_band``, ``alpha`` outside (0, 1), a clock other than "wall" and
    "cpu", a ``blocks`` rule other than "calibrated" and "speed test", or ``make_inputs`` or
    ``interleave=False`` with calibrated blocks and speed-test blocks respectively, and
    RuntimeError naming the function and the phase when one of them raises."""
    if not (callable(baseline) and callable(candidate)):
        raise TypeError("ab_test compares two callables: ab_test(baseline, candidate, *args), "
                        f"got {type(baseline).__name__} and {type(candidate).__name__}")
    check_settings(noise_band, alpha)
    clock_named(clock, "ab_test")
    _check_blocks(blocks, make_inputs, args, interleave)
    if blocks == SPEED_TEST:
        stats, faults = _speed_test_blocks(baseline, candidate, args, kwargs, make_inputs,
                                           rounds=rounds, warmup=warmup, loops=loops, seed=seed,
                                           clock=clock)
    else:
        baseline, candidate = synchronized(baseline, *args), synchronized(candidate, *args)
        counted: list[list[int | None]] = []
        stats = measure_interleaved([("baseline", baseline), ("candidate", candidate)], args,
                                    kwargs, rounds=rounds, warmup=warmup, loops=loops,
                                    interleave=interleave, seed=seed, clock=clock,
                                    faults=counted)
        faults = tuple(per_call(c, s.loops) for c, s in zip(counted, stats))
    if stats[0].name == stats[1].name:
        stats = [LatencyStats.from_samples(s.samples, loops=s.loops, name=label, warmup=warmup,
                                           context=s.context)
                 for s, label in zip(stats, ("A", "B"))]
    return ABResult.from_samples(*stats, noise_band=noise_band, alpha=alpha,
                                 interleaved=interleave, seed=seed, clock=clock, blocks=blocks,
                                 fresh_inputs=make_inputs is not None, faults=faults)


def _check_blocks(blocks: Any, make_inputs: Any, args: tuple, interleave: bool) -> None:
    if blocks not in BLOCK_RULES:
        raise ValueError(f"ab_test: blocks must be one of {', '.join(map(repr, BLOCK_RULES))} "
                         "(\"calibrated\": each side's own ≥ 200 µs blocks, outputs dropped; "
                         "\"speed test\": the speed tests' blocks, calls chosen from the "
                         f"baseline, outputs kept); got {blocks!r}")
    if make_inputs is not None:
        if not callable(make_inputs):
            raise TypeError(f"ab_test: make_inputs must be a function of a seed, got "
                            f"{type(make_inputs).__name__}")
        if args:
            raise TypeError("ab_test: pass either arguments (one input, reused) or make_inputs "
                            "(fresh inputs every call), not both")
        if blocks != SPEED_TEST:
            raise ValueError("ab_test: fresh inputs (make_inputs) are the speed tests' way: "
                             "pass blocks=\"speed test\" with them")
    if blocks == SPEED_TEST and not interleave:
        raise ValueError("ab_test: speed-test blocks are always interleaved, as the speed "
                         "tests' are")


def _speed_test_blocks(baseline: Callable, candidate: Callable, args: tuple, kwargs: dict,
                       make_inputs: Callable[[int], Any] | None, *, rounds: int, warmup: int,
                       loops: int | None, seed: int, clock: str
                       ) -> tuple[list[LatencyStats], tuple[float | None, float | None]]:
    """Both sides' LatencyStats and faults a call, timed by the speed tests' rule."""
    rounds = _count("ab_test", "rounds", rounds, 1)
    warmup = _count("ab_test", "warmup", warmup, 0)
    if loops is not None:
        loops = _count("ab_test", "loops", loops, 1)
    make = make_inputs if make_inputs is not None else (lambda _seed: args)
    first = make(seed * 1_000_003) if make_inputs is not None else args   # (a seed not used)
    first = first if isinstance(first, tuple) else (first,)
    baseline, candidate = synchronized(baseline, *first), synchronized(candidate, *first)
    timed = speed_test_rounds(baseline, candidate, make, rounds=rounds, calls=loops, seed=seed,
                              clock=clock_named(clock, "ab_test"), kwargs=kwargs,
                              warmup=warmup)
    context = collect_context()
    stats = [LatencyStats.from_samples(samples, loops=timed.calls, name=callable_name(fn),
                                       warmup=warmup, context=context)
             for samples, fn in ((timed.baseline_seconds, baseline),
                                 (timed.candidate_seconds, candidate))]
    return stats, (timed.baseline_faults, timed.candidate_faults)


__all__ = ["ABResult", "ALPHA", "BLOCK_RULES", "CALIBRATED", "MIN_ROUNDS", "NOISE_BAND",
           "SPEED_TEST", "ab_test", "bootstrap_ratio_ci", "check_settings", "mann_whitney_u",
           "measure_interleaved", "verdict"]
