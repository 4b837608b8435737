"""tinyprof.leaks.growth on series whose truth is known: the interval covers the true growth
about 95 % of the time on autocorrelated readings (where the textbook interval does not), a
series without noise is reported as exact, and the verdict is decided against the tolerance."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tinyprof.leaks.growth import fit_line, growth_over_run, growth_per_step, t_quantile

#: AR(1) readings: each reading's error is φ times the previous one's plus fresh noise, as a
#: memory level that the allocator refills and drains keeps part of its deviation a step later.
PHI, SERIES, STEPS, RATE = 0.8, 400, 80, 5_000.0


def ar1(rng: np.random.Generator, n: int, phi: float, sigma: float) -> np.ndarray:
    """n readings of a stationary AR(1) error with innovations of spread ``sigma``."""
    noise = rng.normal(0.0, sigma, n)
    out = np.empty(n)
    out[0] = noise[0] / math.sqrt(1.0 - phi * phi)
    for i in range(1, n):
        out[i] = phi * out[i - 1] + noise[i]
    return out


def textbook_covers(memory: np.ndarray, rate: float) -> bool:
    """Whether the i.i.d. Student-t interval (the old one) covers ``rate``."""
    fit = fit_line(range(len(memory)), memory)
    return abs(fit.slope - rate) <= t_quantile(0.975, fit.n - 2) * fit.iid_se


def coverage(seed: int, steps: int, other_covers) -> tuple[float, float]:
    """The share of SERIES seeded AR(1) series of ``steps`` readings whose true growth RATE is
    covered by growth_per_step's interval, and by ``other_covers(memory, RATE)``'s."""
    rng = np.random.default_rng(seed)
    ours = other = 0
    for _ in range(SERIES):
        memory = 1e8 + RATE * np.arange(steps) + ar1(rng, steps, PHI, 20_000.0)
        found = growth_per_step(memory, warmup=0)
        ours += found.low <= RATE <= found.high
        other += other_covers(memory, RATE)
    return ours / SERIES, other / SERIES


def test_the_interval_covers_near_95_percent_on_ar1_readings_and_the_textbook_one_does_not():
    ours, textbook = coverage(46, STEPS, textbook_covers)
    print(f"coverage of a nominal 95 % interval, {SERIES} AR(1) series (phi = {PHI}, n = {STEPS}):"
          f" effective-sample-size interval {ours:.1%}, i.i.d. t interval {textbook:.1%}")
    assert 0.90 <= ours <= 0.99, (
        f"the interval should cover the true growth near 95 % of the time: {ours:.1%}")
    assert textbook < 0.65, (
        f"the i.i.d. interval should cover far less than 95 % here: {textbook:.1%}")


def test_on_independent_readings_the_interval_keeps_its_95_percent():
    rng = np.random.default_rng(7)
    covered = 0
    for _ in range(SERIES):
        found = growth_per_step(RATE * np.arange(STEPS) + rng.normal(0, 20_000.0, STEPS), 0)
        covered += found.low <= RATE <= found.high
    print(f"coverage on i.i.d. readings: {covered / SERIES:.1%}")
    assert 0.92 <= covered / SERIES <= 0.995, covered / SERIES


def test_a_series_without_noise_is_exact_not_a_zero_width_interval():
    found = growth_per_step(5e6 + 201_000 * np.arange(60), warmup=20, tolerance=1024)
    assert found.exact and found.low == found.high == pytest.approx(201_000), found
    assert found.verdict == "leak", found
    text = str(found)
    assert text.startswith("exactly 201.0 KB/step"), text
    assert "no noise to put an interval on" in text, text
    assert "±" not in text.split(";")[0], text


def test_a_real_leak_under_autocorrelated_noise_is_a_leak():
    rng = np.random.default_rng(1)
    memory = 5e6 + 65_536 * np.arange(100) + ar1(rng, 100, PHI, 30_000.0)
    found = growth_per_step(memory, warmup=20, tolerance=1024)
    print(found)
    assert found.verdict == "leak" and found.low < 65_536 < found.high, found


def test_a_plateau_is_a_plateau_even_when_the_line_through_its_bend_is_wide():
    rng = np.random.default_rng(2)
    steps = np.arange(100)
    memory = 5e6 + 200_000 * np.minimum(steps, 55) + ar1(rng, 100, PHI, 200.0)
    found = growth_per_step(memory, warmup=20, tolerance=1024)
    print(found)
    assert found.verdict == "plateau", found
    assert found.late_high <= 1024 < found.slope, found


def test_a_tiny_real_growth_under_the_tolerance_is_within_tolerance_and_says_it_grows():
    rng = np.random.default_rng(3)
    memory = 5e6 + 146 * np.arange(100) + ar1(rng, 100, PHI, 20.0)
    found = growth_per_step(memory, warmup=20, tolerance=1024)
    print(found)
    assert found.low > 0 and found.high <= 1024, found
    assert found.verdict == "within tolerance", found
    assert "it grows, but under the 1.0 KB/step tolerance: not a leak" in str(found), found


def test_a_level_that_wanders_is_undecided_rather_than_a_leak():
    rng = np.random.default_rng(4)
    memory = 5e6 + ar1(rng, 100, 0.95, 20_000.0)
    found = growth_per_step(memory, warmup=20, tolerance=1024)
    print(found)
    assert found.verdict in ("undecided", "within tolerance"), found
    assert found.low <= 0 <= found.high, found


def newey_west_covers(memory: np.ndarray, rate: float) -> bool:
    """Whether the Newey–West interval (Bartlett kernel, bandwidth ⌊4 (n/100)^{2/9}⌋, t with
    n − 2 degrees of freedom) covers ``rate``: the alternative the module's docstring rejects."""
    n = len(memory)
    dx = np.arange(n) - (n - 1) / 2
    sxx = float(dx @ dx)
    slope = float(dx @ (memory - memory.mean())) / sxx
    score = dx * (memory - memory.mean() - slope * dx)
    lags = int(4 * (n / 100) ** (2 / 9))
    long_run = float(score @ score) + sum(2 * (1 - k / (lags + 1)) * float(score[k:] @ score[:-k])
                                          for k in range(1, lags + 1))
    return abs(slope - rate) <= t_quantile(0.975, n - 2) * math.sqrt(long_run) / sxx


@pytest.mark.parametrize("steps", [20, 40, 100])
def test_the_coverage_holds_from_20_to_100_steps_where_newey_west_does_not(steps):
    ours, newey_west = coverage(steps, steps, newey_west_covers)
    print(f"n = {steps}: effective-sample-size interval {ours:.1%}, Newey–West {newey_west:.1%}")
    assert 0.90 <= ours <= 0.99, ours
    assert newey_west < 0.80, newey_west


def test_growth_over_run_reads_a_leak_and_a_flat_loop_from_readings_at_random_times():
    rng = np.random.default_rng(5)
    times = np.sort(rng.uniform(0.0, 2.0, 300))          # 2 s, 400 steps: 5 ms a step
    leak = 5e7 + 50_000 * (times / 0.005) + ar1(rng, 300, PHI, 20_000.0)
    found = growth_over_run(times, leak, 0.0, 2.0, 400, tolerance=1024)
    print(found)
    assert found.verdict == "leak" and found.low < 50_000 < found.high, found
    flat = 5e7 + ar1(rng, 300, PHI, 2_000.0)
    quiet = growth_over_run(times, flat, 0.0, 2.0, 400, tolerance=1024)
    print(quiet)
    assert quiet.verdict == "within tolerance" and quiet.low <= 0 <= quiet.high, quiet
    assert quiet.tolerance == 1024 and "1.0 KB/step tolerance" in str(quiet), quiet
