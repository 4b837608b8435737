"""Regression check of a benchmark suite against a stored baseline, for an engineer's CI.

A stored baseline was measured minutes or months ago, so comparing its samples with today's as
if they came from one interleaved A/B test mistakes a busier machine for slower code. The check
is built the way pyperf, asv and criterion.rs build theirs:

1. **Refuse what cannot be judged.** A baseline whose digest no longer matches (edited by
   hand), that lacks a field, or that holds fewer than ``MIN_SAMPLES`` (9) samples of a variant
   is a ValueError naming the file, never "OK"; so is a current suite with too few samples.
2. **Correct for the machine.** Every round of :func:`tinyprof.benchmark_suite` also times a
   fixed reference workload (:class:`tinyprof.suite.Probe`) next to each variant. The
   **change** of a variant is the change of the median of its per-round ratios
   variant / probe: median(now) / median(then) − 1. A machine that is 20 % busier slows
   variant and probe alike and leaves the ratio alone. The raw change of the medians is
   reported beside it (and is all there is when a side has no probe samples).
3. **A noise band from the data.** A change is **called** when its whole (1 − alpha)
   bootstrap interval (95 % by default, as in criterion.rs; each side resampled from its own
   samples, so a noisy baseline widens it) lies beyond ±band (criterion.rs's rule), with
   band = ``max(tolerance, |A/A|)``, where ``|A/A|`` is how far apart the medians of the
   baseline's two interleaved copies of itself landed (the suite's A/A row), in the baseline
   file and in the current run: no run is trusted to resolve less than its own A/A difference.
   A variant is
   **unchanged** only when its change lies within ±tolerance. The Mann–Whitney p-value is
   shown beside it.
4. **Re-measure before calling it** (asv ``continuous``). A variant that is called, or whose
   change lies beyond the tolerance, is timed again in max(60, 2 × baseline samples) rounds
   interleaved with the probe, when the current suite still holds its models (a suite returned
   by ``benchmark_suite``, not one loaded from a file). The re-measurement decides: it is
   called the same way, and its direction must agree with the first measurement's. A change
   that was called at first and not when re-measured, or the other way round in direction, is
   **unstable**: the machine drifted between the measurements, and no verdict is given. So is
   a change beyond the tolerance that is not called (its interval reaches into the band: the
   samples, often the baseline's, spread too widely): never "unchanged".
5. **Never call a slowdown an improvement.** A verdict also needs the raw times to agree: the
   raw change of the medians, in the first run and in the re-measurement, must lie beyond the
   band on the same side ("regressed": all above +band; "improved": all below). A variant whose
   probe-corrected change is called but whose raw change is not is "unstable": the machine's
   speed moved as well as the code's, and a slowdown is never reported as an improvement.

Statuses: "regressed", "improved", "unchanged", "unstable", "new" (only in the current suite),
"missing" (only in the baseline). A baseline from another machine profile (CPU, BLAS and its
threads, versions) is compared all the same, with a warning: its numbers are not comparable.

Command line: ``python -m tinyprof.regression CURRENT.json BASELINE.json [--tolerance 0.05]``
prints the report and exits 1 when a variant regressed, 2 when a file cannot be read or
judged, 0 otherwise (unstable variants are listed, and do not fail the job).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from ..table import Table
from ..timing.abtest import (
    MIN_ROUNDS,
    NOISE_BAND,
    ABResult,
    bootstrap_ratio_ci,
    check_settings,
    mann_whitney_u,
    measure_interleaved,
)
from ..timing.compare import FASTER, NO_CHANGE, SLOWER
from ..timing.context import COMPARABLE_KEYS, context_differences  # noqa: F401 - public here
from ..units import format_interval, format_percent, format_seconds
from .suite import SuiteResult, VariantResult

#: Fewest samples per variant, in the baseline and in the current suite, that a check accepts.
MIN_SAMPLES = MIN_ROUNDS
#: Rounds of a re-measurement (at least; twice the baseline's samples if that is more).
REMEASURE_ROUNDS = 60
STATUS = {SLOWER: "regressed", FASTER: "improved"}
#: Bootstrap resamples of each side for a change's interval (order statistics: cheap).
RESAMPLES = 10_000
#: Default significance: a change is called when its 95 % interval clears the band
#: (criterion.rs's default confidence level).
REGRESSION_ALPHA = 0.05
#: The probe moving more than this between the runs is reported as a warning.
DRIFT_WARNING = 0.10


@dataclass(frozen=True)
class Change:
    """A relative change ``then`` → ``now`` of a median: ``change`` = median(now) /
    median(then) − 1 (+0.2 = 20 % slower); ``ci``, its (1 − alpha) percentile-bootstrap
    interval (``RESAMPLES`` resamples of each side, medians drawn from their order statistics);
    ``direction``: "slower" when the whole interval lies above +band, "faster" when it lies
    below 1/(1 + band) − 1, else "no change" (criterion.rs's rule); the Mann–Whitney p-value,
    for the reader; and ``rounds``, the number of current samples."""

    change: float
    ci: tuple[float, float]
    p_value: float
    direction: str
    rounds: int
    confidence: float

    @classmethod
    def of(cls, then: np.ndarray, now: np.ndarray, band: float, alpha: float) -> "Change":
        """Compare two samples (seconds, or per-round ratios)."""
        confidence = 1 - alpha
        low, high = bootstrap_ratio_ci(now, then, confidence=confidence, resamples=RESAMPLES)
        _, p = mann_whitney_u(then, now)
        if low > 1 + band:
            direction = SLOWER
        elif high < 1 / (1 + band):
            direction = FASTER
        else:
            direction = NO_CHANGE
        return cls(float(np.median(now) / np.median(then) - 1), (low - 1, high - 1), p,
                   direction, now.size, confidence)

    def __str__(self) -> str:
        return (f"{self.change:+.1%} ({self.confidence:.0%} CI "
                f"{format_interval(self.ci, 'change')}, {self.rounds} rounds)")


@dataclass(frozen=True)
class VariantCheck:
    """One variant: its status ("regressed", "improved", "unchanged", "unstable", "new",
    "missing"); ``comparison``, the raw A/B comparison of the stored and current samples;
    ``corrected``, the probe-corrected change the status rests on (None without probe
    samples); ``remeasured``, the corrected change of the re-measurement (None when none was
    made); and ``note``, why the status is what it is."""

    name: str
    status: str
    comparison: ABResult | None = None
    corrected: Change | None = None
    remeasured: Change | None = None
    note: str = ""

    @property
    def raw_change(self) -> float | None:
        """current median / baseline median − 1, uncorrected."""
        return None if self.comparison is None else 1 / self.comparison.speedup - 1

    @property
    def change(self) -> float | None:
        """The best estimate of the relative change of the median time (+0.2 = 20 % slower):
        the re-measured corrected change, else the corrected change, else the raw one."""
        for estimate in (self.remeasured, self.corrected):
            if estimate is not None:
                return estimate.change
        return self.raw_change


@dataclass(frozen=True)
class RegressionReport:
    """Every variant's :class:`VariantCheck`, the tolerance asked for, the noise band used
    (see the module docstring) and warnings about the machines and the samples."""

    checks: tuple[VariantCheck, ...]
    tolerance: float
    warnings: tuple[str, ...] = ()
    band: float | None = None

    def _named(self, status: str) -> list[str]:
        return [c.name for c in self.checks if c.status == status]

    @property
    def regressed(self) -> list[str]:
        return self._named("regressed")

    @property
    def improved(self) -> list[str]:
        return self._named("improved")

    @property
    def unstable(self) -> list[str]:
        return self._named("unstable")

    @property
    def ok(self) -> bool:
        """True when no variant regressed."""
        return not self.regressed

    def table(self) -> Table:
        def cell(c: VariantCheck) -> list:
            a = c.comparison
            return [c.name, c.status, a.baseline.median if a else None,
                    a.candidate.median if a else None, c.raw_change,
                    c.corrected.change if c.corrected else None,
                    c.remeasured.change if c.remeasured else None,
                    c.corrected.p_value if c.corrected else a.p_value if a else None]
        band = self.band if self.band is not None else self.tolerance
        return Table(["variant", "status", "baseline median", "current median", "raw change",
                      "change vs probe", "re-measured", "p"], [cell(c) for c in self.checks],
                     title=f"Regression check (tolerance ±{self.tolerance:.0%}, noise band "
                           f"±{band:.1%})",
                     formats={"baseline median": format_seconds,
                              "current median": format_seconds,
                              "raw change": partial(format_percent, signed=True),
                              "change vs probe": partial(format_percent, signed=True),
                              "re-measured": partial(format_percent, signed=True),
                              "p": lambda v: f"{v:.2g}"})

    def __str__(self) -> str:
        lines = [str(self.table())]
        lines += [f"{c.name}: {c.note}" for c in self.checks if c.note]
        lines += [f"warning: {w}" for w in self.warnings]
        if self.regressed:
            lines.append(f"REGRESSION: {', '.join(self.regressed)} slower beyond the noise band")
        else:
            lines.append("OK: no variant regressed")
        if self.unstable:
            lines.append(f"NO VERDICT for {', '.join(self.unstable)}: the timings varied too "
                         "much to tell (see the notes above); run the check again on a quieter "
                         "machine")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)


def machine_differences(current: dict, baseline: dict) -> list[str]:
    """The comparable keys whose values differ, as 'key: baseline → current' (the machine
    profiles' view of :meth:`TimingContext.differences`)."""
    return context_differences(current, baseline)


def _ratios(variant: VariantResult) -> np.ndarray | None:
    """Per-round variant / probe times, or None without probe samples."""
    if variant.probe is None:
        return None
    return np.asarray(variant.latency.samples) / np.asarray(variant.probe.samples)


def _aa_difference(suite: SuiteResult) -> float | None:
    """``|median(B) / median(A) − 1|`` of the suite's A/A row (its baseline timed against
    itself)."""
    try:
        row = suite[suite.baseline]
    except KeyError:
        return None
    if row.comparison is None:
        return None
    return abs(row.latency.median / row.comparison.baseline.median - 1)


def _check_samples(suite: SuiteResult, where: str) -> None:
    for variant in suite.variants:
        for label, stats in (("", variant.latency), (" probe", variant.probe)):
            if stats is not None and stats.n < MIN_SAMPLES:
                raise ValueError(
                    f"{where}: variant {variant.name!r} has {stats.n}{label} samples; a "
                    f"regression check needs at least {MIN_SAMPLES} per variant (measure with "
                    f"rounds ≥ {MIN_SAMPLES}): with fewer, no difference can be told from noise")


def _signs_agree(direction: str, *changes: float | None) -> bool:
    sign = 1 if direction == SLOWER else -1
    return all(c is None or sign * c > 0 for c in changes)


def _beyond(direction: str, band: float, *changes: float) -> bool:
    """Every change lies beyond the noise band on the side of ``direction``."""
    if direction == SLOWER:
        return all(c > band for c in changes)
    return all(c < 1 / (1 + band) - 1 for c in changes)


def _remeasure(suite: SuiteResult, name: str, rounds: int) -> tuple[np.ndarray, float] | None:
    """Per-round variant / probe ratios of a fresh interleaved run and its raw median, or None
    if the suite does not hold the variant's model."""
    sources = suite.sources
    if sources is None or name not in sources.models:
        return None
    own, probed = measure_interleaved([(f"variant {name!r}", sources.models[name]),
                                       ("probe", sources.probe)], (sources.x,),
                                      rounds=rounds, seed=sources.seed + 1,
                                      caller="check_regression")
    return np.asarray(own.samples) / np.asarray(probed.samples), own.median


def _judge(then: VariantResult, now: VariantResult, suite: SuiteResult, tolerance: float,
           band: float, alpha: float, remeasure: bool) -> VariantCheck:
    """One variant's status by the rules of the module docstring."""
    raw = ABResult.from_samples(then.latency, now.latency, noise_band=band, alpha=alpha)
    raw_change = 1 / raw.speedup - 1
    before, after = _ratios(then), _ratios(now)
    if before is None or after is None:   # no probe: the raw comparison is all there is
        alone = Change.of(np.asarray(then.latency.samples), np.asarray(now.latency.samples),
                          band, alpha)
        if alone.direction == NO_CHANGE:
            if abs(alone.change) > tolerance:
                return VariantCheck(now.name, "unstable", raw,
                                    note=_too_spread(alone, tolerance, band))
            return VariantCheck(now.name, "unchanged", raw)
        return VariantCheck(now.name, STATUS[alone.direction], raw, note=(
            "not re-measured: without probe samples on both sides a re-measurement could not "
            "be corrected for the machine's drift"))
    first = Change.of(before, after, band, alpha)
    if first.direction == NO_CHANGE and abs(first.change) <= tolerance:
        return VariantCheck(now.name, "unchanged", raw, first)
    again = _remeasure(suite, now.name, max(REMEASURE_ROUNDS, 2 * before.size)) if remeasure \
        else None
    if again is None:   # the first measurement is all there is
        if first.direction == NO_CHANGE:
            return VariantCheck(now.name, "unstable", raw, first,
                                note=_too_spread(first, tolerance, band))
        if not _beyond(first.direction, band, raw_change):
            return VariantCheck(now.name, "unstable", raw, first,
                                note=_disagree(first, raw_change, band))
        why = ("remeasure=False" if not remeasure else "the current suite does not hold this "
               "variant's model (a suite loaded from a file holds none)")
        return VariantCheck(now.name, STATUS[first.direction], raw, first,
                            note=f"not re-measured: {why}")
    ratios, median = again
    second = Change.of(before, ratios, band, alpha)
    raw_second = median / then.latency.median - 1
    if second.direction == NO_CHANGE:
        if first.direction != NO_CHANGE:   # a change that did not hold: the machine moved
            return VariantCheck(now.name, "unstable", raw, first, second, note=(
                f"{first.change:+.1%} at first, {second.change:+.1%} when re-measured (no "
                f"change beyond the ±{band:.1%} noise band): the machine drifted between the "
                "measurements, so neither is called"))
        if abs(second.change) > tolerance:
            return VariantCheck(now.name, "unstable", raw, first, second,
                                note="re-measured, " + _too_spread(second, tolerance, band))
        return VariantCheck(now.name, "unchanged", raw, first, second,
                            f"{first.change:+.1%} at first, within the ±{tolerance:.0%} "
                            f"tolerance when re-measured: {second}")
    if not _signs_agree(second.direction, first.change):
        return VariantCheck(now.name, "unstable", raw, first, second, note=(
            f"{first.change:+.1%} at first, {second.change:+.1%} when re-measured: opposite "
            "directions, so neither is called"))
    if not _beyond(second.direction, band, raw_change, raw_second):
        return VariantCheck(now.name, "unstable", raw, first, second,
                            note=_disagree(second, min(raw_change, raw_second, key=abs), band))
    return VariantCheck(now.name, STATUS[second.direction], raw, first, second,
                        f"re-measured in {second.rounds} rounds: {second}")


def _too_spread(change: Change, tolerance: float, band: float) -> str:
    return (f"{change} lies beyond the ±{tolerance:.0%} tolerance, but its interval reaches "
            f"into the ±{band:.1%} noise band: the samples spread too widely to call it either "
            "way (see the warnings)")


def _disagree(change: Change, raw_change: float, band: float) -> str:
    return (f"{change.change:+.1%} against the probe but {raw_change:+.1%} in raw time, which "
            f"is not beyond the ±{band:.1%} noise band: the machine's speed changed as well as "
            "the code's, so neither is called")


def check_regression(current: SuiteResult | str | os.PathLike,
                     baseline_path: str | os.PathLike, tolerance: float = NOISE_BAND,
                     alpha: float = REGRESSION_ALPHA, *, remeasure: bool = True
                     ) -> RegressionReport:
    """Compare ``current`` (a suite, or the path of a saved one) with the baseline saved at
    ``baseline_path``, as the module docstring describes: probe-corrected changes judged
    against a noise band of max(``tolerance``, the A/A rows' difference), a flagged variant
    re-measured before it is called (``remeasure``; only possible for a suite that
    :func:`tinyprof.benchmark_suite` returned in this process).

    Raises ValueError for a tolerance outside [0, 1), an alpha outside (0, 1), and a baseline or
    current suite that cannot be judged (unreadable, edited, too few samples), naming the file.
    """
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not (
            0 <= tolerance < 1):
        raise ValueError(f"check_regression: tolerance is a relative change in [0, 1), got "
                         f"{tolerance!r}")
    check_settings(tolerance, alpha, "check_regression")
    if isinstance(current, SuiteResult):
        now, current_where = current, "the current suite"
    elif isinstance(current, (str, os.PathLike)):
        now, current_where = SuiteResult.load(current), str(current)
    else:
        raise TypeError(f"check_regression: current is a SuiteResult or the path of a saved "
                        f"one, got {type(current).__name__}")
    before = SuiteResult.load(baseline_path)
    _check_samples(before, str(baseline_path))
    _check_samples(now, current_where)
    differences = [abs(d) for d in (_aa_difference(before), _aa_difference(now))
                   if d is not None]
    band = max([tolerance] + differences)
    warnings = [f"the baseline was measured on another machine or setup ({d}): timings are "
                "not comparable" for d in context_differences(now.machine, before.machine)]
    if band > tolerance:
        warnings.append(f"the A/A rows (the baseline against itself) differ by up to "
                        f"{band:.1%}: changes within ±{band:.1%} are not called")
    if now.probe_name != before.probe_name:
        warnings.append(f"the baseline's probe ({before.probe_name!r}) is not this version's "
                        f"({now.probe_name!r}): raw medians are compared, uncorrected")
    checks, busy = [], set()
    current_names = {v.name for v in now.variants}
    for then in before.variants:
        if then.name not in current_names:
            checks.append(VariantCheck(then.name, "missing"))
            continue
        found = now[then.name]
        if now.probe_name != before.probe_name:
            then = replace(then, probe=None)
        elif then.probe is None or found.probe is None:
            warnings.append(f"{then.name}: no probe samples on one side: raw medians are "
                            "compared, uncorrected for the machine's drift")
        checks.append(_judge(then, found, now, tolerance, band, alpha, remeasure))
        if then.probe is not None and found.probe is not None:
            drift = found.probe.median / then.probe.median - 1
            if abs(drift) > DRIFT_WARNING:
                warnings.append(f"{then.name}: the probe ran {drift:+.0%} against the baseline "
                                "(the machine is busier or faster than then); the changes "
                                "are corrected for it")
        for side, stats in (("in the baseline", then.latency), ("now", found.latency)):
            for w in stats.warnings:
                first_sentence = str(w).split(". ")[0]
                if w.kind == "unstable":
                    warnings.append(f"{then.name} {side}: {first_sentence}")
                elif w.kind == "busy machine" and side not in busy:   # once per run
                    busy.add(side)
                    run = "the baseline's run" if side == "in the baseline" else "this run"
                    warnings.append(f"{run}: {first_sentence}")
    known = {v.name for v in before.variants}
    checks += [VariantCheck(v.name, "new") for v in now.variants if v.name not in known]
    return RegressionReport(tuple(checks), tolerance, tuple(warnings), band)


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring); returns the exit status."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tinyprof.regression",
                                     description="compare a saved benchmark suite with a "
                                                 "baseline; exit 1 on a regression, 2 when a "
                                                 "file cannot be read or judged")
    parser.add_argument("current", help="suite JSON written by SuiteResult.save")
    parser.add_argument("baseline", help="baseline suite JSON")
    parser.add_argument("--tolerance", type=float, default=NOISE_BAND,
                        help=f"relative change treated as noise (default {NOISE_BAND})")
    args = parser.parse_args(argv)
    try:
        report = check_regression(args.current, args.baseline, args.tolerance)
    except (ValueError, TypeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(report)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
