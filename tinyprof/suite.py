"""A benchmark suite: named variants of a model measured side by side, compared with a baseline,
reported (:mod:`tinyprof.reports`), and saved as a baseline for later regression checks.

For every variant, on the same held-out data:

- **latency**: per-call statistics of ``model(x)`` from :func:`tinyprof.ab_test` against the
  baseline (interleaved rounds), so each variant's speedup comes with an interval, a p-value and
  a verdict; the baseline's own row is an A/A test (baseline against itself), whose verdict
  should read "no change";
- **throughput** = rows of x / median latency;
- **peak memory** of one forward pass, traced (tinyprof.measure_memory), and the **parameter
  bytes** the variant stores;
- **accuracy** = mean(argmax(model(x)) == y), when labels are given.
"""

from __future__ import annotations

import json
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from .abtest import ABResult, ab_test
from .memory import measure_memory
from .nn.module import Module
from .params import parameter_bytes
from .table import Table
from .timing import LatencyStats, collect_context
from .timing.context import cpu_name
from .training import accuracy as classification_accuracy
from .units import format_bytes, format_seconds

FORMAT = "tinyprof-suite/1"


@dataclass(frozen=True)
class VariantResult:
    """One variant's measurements (see the module docstring)."""

    name: str
    latency: LatencyStats
    rows: int
    peak_bytes: int
    parameter_bytes: int | None
    accuracy: float | None
    comparison: ABResult | None = None

    @property
    def throughput(self) -> float:
        """Rows per second: rows / median latency."""
        return self.rows / self.latency.median


def machine_profile() -> dict[str, Any]:
    """What a stored baseline must match to be comparable: CPU, BLAS and its thread settings,
    Python and numpy versions, usable CPUs."""
    context = collect_context()
    return {"processor": cpu_name() or context.processor or context.machine,
            "system": context.system, "machine": context.machine, "python": context.python,
            "numpy": context.numpy, "blas": context.blas,
            "blas_threads": {k: v for k, v in context.blas_threads},
            "usable_cpus": context.usable_cpus, "node": platform.node()}


@dataclass(frozen=True)
class SuiteResult:
    """Every variant's :class:`VariantResult`, the baseline's name and the machine profile."""

    variants: tuple[VariantResult, ...]
    baseline: str
    machine: dict[str, Any] = field(default_factory=machine_profile)

    def __getitem__(self, name: str) -> VariantResult:
        for variant in self.variants:
            if variant.name == name:
                return variant
        raise KeyError(f"no variant {name!r}; the suite has {[v.name for v in self.variants]}")

    def table(self) -> Table:
        """One row per variant: latency (median and 95 % CI), throughput, memory, accuracy,
        speedup against the baseline with its interval, and the verdict."""
        base = self[self.baseline]
        rows = []
        for v in self.variants:
            c = v.comparison
            rows.append([v.name, v.latency.median, v.latency.ci, v.throughput, v.peak_bytes,
                         v.parameter_bytes, v.accuracy,
                         None if v.accuracy is None or base.accuracy is None
                         else v.accuracy - base.accuracy,
                         c.speedup if c else None, c.ci if c else None,
                         c.verdict if c else ""])
        columns = ["variant", "median", "95% CI", "rows/s", "peak memory", "parameters",
                   "accuracy", "Δ accuracy", "speedup", "speedup CI", "verdict"]
        return Table(columns, rows, title=f"Benchmark suite (baseline: {self.baseline})",
                     formats={"median": format_seconds,
                              "95% CI": lambda ci: f"{format_seconds(ci[0])} – "
                                                   f"{format_seconds(ci[1])}",
                              "rows/s": lambda v: f"{v:,.0f}", "peak memory": format_bytes,
                              "parameters": format_bytes, "accuracy": lambda v: f"{v:.1%}",
                              "Δ accuracy": lambda v: f"{v:+.1%}",
                              "speedup": lambda v: f"{v:.2f}×",
                              "speedup CI": lambda ci: f"{ci[0]:.2f}–{ci[1]:.2f}×"})

    def best(self, max_accuracy_drop: float = 0.01) -> str:
        """The variant to ship: the highest speedup among variants whose verdict against the
        baseline is "faster" and whose accuracy fell by at most ``max_accuracy_drop`` (0.01 =
        one percentage point); the baseline when none qualifies."""
        base = self[self.baseline]
        eligible = [v for v in self.variants
                    if v.name != self.baseline and v.comparison is not None
                    and v.comparison.verdict == "faster"
                    and (v.accuracy is None or base.accuracy is None
                         or v.accuracy - base.accuracy >= -max_accuracy_drop)]
        if not eligible:
            return self.baseline
        return max(eligible, key=lambda v: v.comparison.speedup).name

    def to_records(self) -> list[dict[str, Any]]:
        """The table as plain dictionaries (no formatting)."""
        return self.table().to_records()

    def __str__(self) -> str:
        return str(self.table())

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()

    # -- baselines -------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> Path:
        """Write the suite as a baseline JSON file: every variant's raw latency samples and
        measurements, and the machine profile."""
        data = {"format": FORMAT, "baseline": self.baseline, "machine": self.machine,
                "variants": [{"name": v.name, "samples": list(v.latency.samples),
                              "loops": v.latency.loops, "rows": v.rows,
                              "peak_bytes": v.peak_bytes, "parameter_bytes": v.parameter_bytes,
                              "accuracy": v.accuracy} for v in self.variants]}
        path = Path(path)
        path.write_text(json.dumps(data, indent=1))
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> "SuiteResult":
        """Read a file written by :meth:`save` (comparisons are not stored: re-run them)."""
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            raise ValueError(f"{path}: not a readable benchmark baseline ({error})") from error
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"{path}: not a tinyprof benchmark baseline (expected format "
                             f"{FORMAT!r})")
        variants = tuple(VariantResult(
            v["name"], LatencyStats.from_samples(v["samples"], loops=v["loops"], name=v["name"]),
            v["rows"], v["peak_bytes"], v["parameter_bytes"], v["accuracy"])
            for v in data["variants"])
        return cls(variants, data["baseline"], data["machine"])


def _split(test_data: Any) -> tuple[np.ndarray, np.ndarray | None]:
    if isinstance(test_data, tuple) and len(test_data) == 2:
        return np.asarray(test_data[0]), np.asarray(test_data[1])
    return np.asarray(test_data), None


def benchmark_suite(models: Mapping[str, Callable], test_data: Any, *,
                    baseline: str | None = None, rounds: int = 20, seed: int = 0,
                    accuracy: Callable[[Any, np.ndarray, np.ndarray], float] | None = None
                    ) -> SuiteResult:
    """Measure every model of ``models`` (name → model or callable) on ``test_data`` (held-out
    ``(x, y)``, or ``x`` alone for no accuracy) and compare each with ``baseline`` (default: the
    first), see the module docstring. ``accuracy(model, x, y)`` defaults to top-1 accuracy."""
    if not models:
        raise ValueError("benchmark_suite needs at least one model")
    names = list(models)
    baseline = baseline or names[0]
    if baseline not in models:
        raise KeyError(f"baseline {baseline!r} is not one of the models {names}")
    x, y = _split(test_data)
    score = accuracy or classification_accuracy
    results = []
    for name in [baseline] + [n for n in names if n != baseline]:
        model = models[name]
        comparison = ab_test(models[baseline], model, x, rounds=rounds, seed=seed)
        latency = LatencyStats.from_samples(comparison.candidate.samples,
                                            loops=comparison.candidate.loops, name=name,
                                            context=comparison.candidate.context)
        results.append(VariantResult(
            name, latency, len(x), measure_memory(model, x).peak_bytes,
            parameter_bytes(model) if isinstance(model, Module) else None,
            None if y is None else score(model, x, y), comparison))
    order = {name: i for i, name in enumerate(names)}
    return SuiteResult(tuple(sorted(results, key=lambda r: order[r.name])), baseline)


__all__ = ["FORMAT", "SuiteResult", "VariantResult", "benchmark_suite", "machine_profile"]
