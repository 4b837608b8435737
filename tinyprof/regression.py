"""Regression check of a benchmark suite against a stored baseline, for an engineer's CI.

For every variant present in both, the current and the baseline latency samples are compared
as in :func:`tinyprof.ab_test` (Mann–Whitney p-value, bootstrap interval of
median(baseline) / median(current)), with the noise band set to ``tolerance``: a variant has
**regressed** when that comparison's verdict is "slower", **improved** when it is "faster".
A baseline stamped with another machine profile (CPU, BLAS and threads, versions) is compared
all the same, with a warning: such numbers are not comparable.

Command line: ``python -m tinyprof.regression CURRENT.json BASELINE.json [--tolerance 0.05]``
exits 1 when a variant regressed, 2 when a file cannot be read, 0 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

from .abtest import ALPHA, NOISE_BAND, ABResult
from .suite import SuiteResult
from .table import Table
from .units import format_seconds

#: Machine-profile keys that must match for timings to be comparable.
COMPARABLE_KEYS = ("processor", "machine", "python", "numpy", "blas", "blas_threads",
                   "usable_cpus")


@dataclass(frozen=True)
class VariantCheck:
    """One variant: its status ("regressed", "improved", "unchanged", "new", "missing"), and
    the comparison when it exists in both."""

    name: str
    status: str
    comparison: ABResult | None = None

    @property
    def change(self) -> float | None:
        """Relative change of the median time: current / baseline − 1 (+0.2 = 20 % slower)."""
        return None if self.comparison is None else 1 / self.comparison.speedup - 1


@dataclass(frozen=True)
class RegressionReport:
    """Every variant's :class:`VariantCheck` and warnings about the machines."""

    checks: tuple[VariantCheck, ...]
    tolerance: float
    warnings: tuple[str, ...] = ()

    @property
    def regressed(self) -> list[str]:
        return [c.name for c in self.checks if c.status == "regressed"]

    @property
    def ok(self) -> bool:
        """True when no variant regressed."""
        return not self.regressed

    def table(self) -> Table:
        rows = [[c.name, c.status,
                 c.comparison.baseline.median if c.comparison else None,
                 c.comparison.candidate.median if c.comparison else None, c.change,
                 c.comparison.p_value if c.comparison else None] for c in self.checks]
        return Table(["variant", "status", "baseline median", "current median", "change", "p"],
                     rows, title=f"Regression check (tolerance ±{self.tolerance:.0%})",
                     formats={"baseline median": format_seconds,
                              "current median": format_seconds,
                              "change": lambda v: f"{v:+.1%}", "p": lambda v: f"{v:.2g}"})

    def __str__(self) -> str:
        lines = [str(self.table())] + [f"warning: {w}" for w in self.warnings]
        lines.append("OK: no variant regressed" if self.ok
                     else f"REGRESSION: {', '.join(self.regressed)} slower beyond the tolerance")
        return "\n".join(lines)


def machine_differences(current: dict, baseline: dict) -> list[str]:
    """The comparable keys whose values differ, as 'key: baseline → current'."""
    return [f"{key}: {baseline.get(key)!r} → {current.get(key)!r}" for key in COMPARABLE_KEYS
            if current.get(key) != baseline.get(key)]


def check_regression(current: SuiteResult | str | os.PathLike,
                     baseline_path: str | os.PathLike, tolerance: float = NOISE_BAND,
                     alpha: float = ALPHA) -> RegressionReport:
    """Compare ``current`` (a suite or a saved one) with the baseline saved at
    ``baseline_path``; see the module docstring."""
    if not 0 <= tolerance < 1:
        raise ValueError(f"tolerance is a relative change in [0, 1), got {tolerance}")
    now = current if isinstance(current, SuiteResult) else SuiteResult.load(current)
    before = SuiteResult.load(baseline_path)
    checks = []
    for variant in before.variants:
        if variant.name not in {v.name for v in now.variants}:
            checks.append(VariantCheck(variant.name, "missing"))
            continue
        result = ABResult.from_samples(variant.latency, now[variant.name].latency,
                                       noise_band=tolerance, alpha=alpha)
        status = {"slower": "regressed", "faster": "improved"}.get(result.verdict, "unchanged")
        checks.append(VariantCheck(variant.name, status, result))
    known = {v.name for v in before.variants}
    checks += [VariantCheck(v.name, "new") for v in now.variants if v.name not in known]
    warnings = [f"the baseline was measured on another machine or setup ({d}): timings are "
                "not comparable" for d in machine_differences(now.machine, before.machine)]
    return RegressionReport(tuple(checks), tolerance, tuple(warnings))


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring); returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m tinyprof.regression",
                                     description="compare a saved benchmark suite with a "
                                                 "baseline; exit 1 on a regression")
    parser.add_argument("current", help="suite JSON written by SuiteResult.save")
    parser.add_argument("baseline", help="baseline suite JSON")
    parser.add_argument("--tolerance", type=float, default=NOISE_BAND,
                        help=f"relative change treated as noise (default {NOISE_BAND})")
    args = parser.parse_args(argv)
    try:
        report = check_regression(args.current, args.baseline, args.tolerance)
    except (ValueError, KeyError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(report)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
