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
- **accuracy** = mean(argmax(model(x)) == y), when labels are given; outputs that are not one
  row of finite scores per input, and labels that are not class indices of those scores, are
  refused with the variant named.

Each variant's rounds also time :class:`Probe`, a fixed numpy workload, in the same random order:
its per-round times let :func:`tinyprof.check_regression` tell a slower variant from a slower
machine. :meth:`SuiteResult.save` keeps every variant's raw samples (its own, the baseline's
interleaved with it, which for the baseline itself is the A/A row, and the probe's), their
spread and timing context, under a SHA-256 digest, so an edited baseline is refused.
"""

from __future__ import annotations

import math
import numbers
import os
import platform
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from ..memory import measure_memory
from ..nn.module import Module
from ..params import parameter_bytes
from ..table import Table
from ..timing import LatencyStats, callable_name, collect_context
from ..timing.abtest import ABResult, measure_interleaved
from ..units import format_bytes, format_interval, format_percent, format_ratio, format_seconds

FORMAT = "tinyprof-suite/2"


class Probe:
    """The reference workload timed next to every variant: four seeded 64×64 by 64×64 float32
    matmuls, each followed by a ReLU in place (about 20 µs in all). A busier or slower machine
    slows it as it slows a numpy model, so the per-round ratio variant / probe changes only
    when the variant does. Each matmul is small enough (M·N·K = 262,144) that OpenBLAS runs it
    on one thread whatever its thread setting, so the probe never waits for a BLAS thread that
    another program holds. Arguments are accepted and ignored, so it runs in the same rounds as
    the models."""

    #: Saved with a baseline; a probe of another name or version is not comparable.
    NAME = "4 x (matmul 64x64x64 float32 + relu), v1"

    def __init__(self) -> None:
        rng = np.random.default_rng(20240521)
        self.a = rng.standard_normal((64, 64)).astype(np.float32)
        self.weights = [rng.standard_normal((64, 64)).astype(np.float32) / 8 for _ in range(4)]

    def __call__(self, *_args: Any, **_kwargs: Any) -> float:
        h = self.a
        for weight in self.weights:
            h = h @ weight
            np.maximum(h, 0, out=h)
        return float(h[0, 0])

    def __repr__(self) -> str:
        return f"Probe({self.NAME!r})"


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
    #: The :class:`Probe`'s per-call times, round i next to ``latency.samples[i]``.
    probe: LatencyStats | None = None

    @property
    def throughput(self) -> float:
        """Rows per second: rows / median latency."""
        return self.rows / self.latency.median


@dataclass(frozen=True)
class SuiteSources:
    """What a suite was measured with (kept in memory, never saved): the callables, the test
    inputs, the rounds and the seed, so a regression check can re-measure a variant."""

    models: Mapping[str, Callable]
    x: np.ndarray
    rounds: int
    seed: int
    probe: Callable = field(default_factory=Probe)


def machine_profile() -> dict[str, Any]:
    """What a stored baseline must match to be comparable (:meth:`TimingContext.comparable`:
    CPU, BLAS and its thread settings, Python and numpy versions, usable CPUs), with the
    operating system and the host's name for the reader."""
    context = collect_context()
    return {**context.comparable(), "system": context.system, "node": platform.node()}


@dataclass(frozen=True)
class SuiteResult:
    """Every variant's :class:`VariantResult`, the baseline's name and the machine profile."""

    variants: tuple[VariantResult, ...]
    baseline: str
    machine: dict[str, Any] = field(default_factory=machine_profile)
    #: Set by :func:`benchmark_suite`; None for a loaded or hand-built suite.
    sources: SuiteSources | None = field(default=None, repr=False, compare=False)
    #: The :class:`Probe` name its probe samples belong to.
    probe_name: str = Probe.NAME

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
                              "95% CI": format_interval,
                              "rows/s": lambda v: f"{v:,.0f}", "peak memory": format_bytes,
                              "parameters": format_bytes, "accuracy": format_percent,
                              "Δ accuracy": partial(format_percent, signed=True),
                              "speedup": format_ratio,
                              "speedup CI": lambda ci: format_interval(ci, "ratio")})

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
    def to_dict(self) -> dict[str, Any]:
        """The suite as plain JSON-ready data: for every variant its measurements and the raw
        samples with settings and context (``latency``, ``reference``: the baseline's samples
        interleaved with it, ``probe``), and their ``spread``; no derived comparison."""
        variants = []
        for v in self.variants:
            reference = v.comparison.baseline if v.comparison is not None else None
            variants.append({
                "name": v.name, "rows": v.rows, "peak_bytes": v.peak_bytes,
                "parameter_bytes": v.parameter_bytes, "accuracy": v.accuracy,
                "spread": {"median_s": v.latency.median, "iqr_s": v.latency.iqr,
                           "cv": v.latency.cv, "samples": v.latency.n},
                "latency": v.latency.to_dict(),
                "reference": None if reference is None else reference.to_dict(),
                "probe": None if v.probe is None else v.probe.to_dict()})
        return {"format": FORMAT, "baseline": self.baseline, "machine": self.machine,
                "probe": self.probe_name, "variants": variants}

    def save(self, path: str | os.PathLike) -> Path:
        """Write :meth:`to_dict` as a baseline JSON file, with the SHA-256 digest of its
        content (``sha256``) so that :meth:`load` refuses a file edited afterwards."""
        import json

        data = self.to_dict()
        data["sha256"] = _digest(data)
        path = Path(path)
        path.write_text(json.dumps(data, indent=1), encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> "SuiteResult":
        """Read a file written by :meth:`save`. Each variant's comparison with the baseline is
        recomputed from the stored samples. Every problem (unreadable, another format, a
        missing or malformed field, a digest that no longer matches) is a ValueError that
        names the file."""
        import json

        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise ValueError(f"{path}: not a readable benchmark baseline ({error})") from error
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            found = data.get("format") if isinstance(data, dict) else type(data).__name__
            hint = (": it was saved by an older tinyprof; run the suite again and save it"
                    if found == "tinyprof-suite/1" else "")
            raise ValueError(f"{path}: not a tinyprof benchmark baseline (expected format "
                             f"{FORMAT!r}, found {found!r}){hint}")
        try:
            return cls._from_dict(data)
        except (ValueError, TypeError, KeyError) as error:
            message = error.args[0] if isinstance(error, KeyError) else error
            raise ValueError(f"{path}: {message}") from error

    @classmethod
    def _from_dict(cls, data: dict[str, Any]) -> "SuiteResult":
        stored = _field(data, "sha256", str, "the file")
        if stored != _digest({k: v for k, v in data.items() if k != "sha256"}):
            raise ValueError("the content does not match its sha256 digest: the file was "
                             "edited after SuiteResult.save wrote it; measure and save the "
                             "baseline again")
        machine = _field(data, "machine", dict, "the file")
        baseline = _field(data, "baseline", str, "the file")
        probe_name = _field(data, "probe", str, "the file")
        rows = _field(data, "variants", list, "the file")
        if not rows:
            raise ValueError("'variants' is empty: a baseline needs at least one variant")
        variants, names = [], set()
        for i, row in enumerate(rows):
            where = f"variant #{i}"
            if not isinstance(row, dict):
                raise TypeError(f"{where} must be an object, got {type(row).__name__}")
            name = _field(row, "name", str, where)
            where = f"variant {name!r}"
            if name in names:
                raise ValueError(f"{where} appears twice")
            names.add(name)
            latency = _stats(row, "latency", where, required=True)
            reference = _stats(row, "reference", where)
            probe = _stats(row, "probe", where)
            for label, other in (("reference", reference), ("probe", probe)):
                if other is not None and other.n != latency.n:
                    raise ValueError(f"{where}: {other.n} {label} samples for {latency.n} "
                                     "rounds: each round times every function once")
            spread = _field(row, "spread", dict, where)
            if (spread.get("samples") != latency.n
                    or not _close(spread.get("median_s"), latency.median)
                    or not _close(spread.get("iqr_s"), latency.iqr)):
                raise ValueError(f"{where}: the stored spread {spread} does not match its "
                                 "samples")
            count = _field(row, "rows", numbers.Integral, where)
            peak = _field(row, "peak_bytes", numbers.Integral, where)
            params = _field(row, "parameter_bytes", (numbers.Integral, type(None)), where)
            score = _field(row, "accuracy", (numbers.Real, type(None)), where)
            if count < 1 or peak < 0 or (params is not None and params < 0) or (
                    score is not None and not 0 <= score <= 1):
                raise ValueError(f"{where}: rows must be ≥ 1, bytes ≥ 0 and accuracy in "
                                 f"[0, 1], got rows={count}, peak_bytes={peak}, "
                                 f"parameter_bytes={params}, accuracy={score}")
            comparison = (None if reference is None
                          else ABResult.from_samples(reference, latency))
            variants.append(VariantResult(name, latency, int(count), int(peak),
                                          None if params is None else int(params),
                                          None if score is None else float(score),
                                          comparison, probe))
        if baseline not in names:
            raise ValueError(f"the baseline {baseline!r} is not one of the variants "
                             f"{sorted(names)}")
        return cls(tuple(variants), baseline, machine, probe_name=probe_name)


def _digest(data: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON text of ``data`` (sorted keys, no spaces)."""
    import hashlib
    import json

    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _field(data: dict[str, Any], key: str, kind: Any, where: str) -> Any:
    if key not in data:
        raise ValueError(f"{where} has no {key!r} field")
    value = data[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        names = kind.__name__ if isinstance(kind, type) else " or ".join(
            k.__name__ for k in kind)
        raise ValueError(f"{where}: {key!r} must be {names}, got {value!r}"[:300])
    return value


def _stats(row: dict[str, Any], key: str, where: str, required: bool = False
           ) -> LatencyStats | None:
    if key not in row:
        raise ValueError(f"{where} has no {key!r} field")
    value = row[key]
    if value is None and not required:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"{where}: {key!r} must be a saved LatencyStats (an object), got "
                         f"{value!r}"[:300])
    try:
        return LatencyStats.from_dict(value)
    except (ValueError, TypeError) as error:
        raise ValueError(f"{where}, {key!r}: {error}") from error


def _close(stored: Any, value: float) -> bool:
    return (isinstance(stored, numbers.Real) and not isinstance(stored, bool)
            and math.isclose(stored, value, rel_tol=1e-9, abs_tol=1e-15))


def _split(test_data: Any) -> tuple[np.ndarray, np.ndarray | None]:
    if isinstance(test_data, tuple) and len(test_data) == 2:
        x, y = np.asarray(test_data[0]), np.asarray(test_data[1])
        if x.ndim == 0 or y.ndim != 1 or len(y) != len(x):
            raise ValueError(f"benchmark_suite: test_data (x, y) needs one label per row of x, "
                             f"got x of shape {x.shape} and y of shape {y.shape}")
        if not np.issubdtype(y.dtype, np.integer):
            raise TypeError(f"benchmark_suite: labels y are class indices (integers), got "
                            f"dtype {y.dtype}")
        return x, y
    x = np.asarray(test_data)
    if x.ndim == 0:
        raise ValueError(f"benchmark_suite: test_data is x or (x, y) with rows of inputs, got "
                         f"{type(test_data).__name__} {test_data!r}"[:200])
    return x, None


def top1_accuracy(name: str, model: Callable, x: np.ndarray, y: np.ndarray) -> float:
    """mean(argmax(model(x), axis=-1) == y), after checking that the output holds one row of
    finite class scores per input and that every label is one of those classes."""
    scores = np.asarray(model(x))
    if scores.ndim != 2 or scores.shape[0] != len(y):
        raise ValueError(f"benchmark_suite: variant {name!r} returned an output of shape "
                         f"{scores.shape}; top-1 accuracy needs one row of class scores per "
                         f"input, shape ({len(y)}, classes)")
    if not np.issubdtype(scores.dtype, np.number) or not np.all(np.isfinite(scores)):
        raise ValueError(f"benchmark_suite: variant {name!r} returned non-finite scores "
                         f"(NaN or inf): its accuracy would be meaningless")
    if len(y) and (y.min() < 0 or y.max() >= scores.shape[1]):
        raise ValueError(f"benchmark_suite: labels must be class indices 0…"
                         f"{scores.shape[1] - 1} for variant {name!r}'s {scores.shape[1]} "
                         f"classes, got labels from {y.min()} to {y.max()}")
    return float(np.mean(np.argmax(scores, axis=1) == y))


def benchmark_suite(models: Mapping[str, Callable], test_data: Any, *,
                    baseline: str | None = None, rounds: int = 20, seed: int = 0,
                    accuracy: Callable[[Any, np.ndarray, np.ndarray], float] | None = None
                    ) -> SuiteResult:
    """Measure every model of ``models`` (name → model or callable) on ``test_data`` (held-out
    ``(x, y)``, or ``x`` alone for no accuracy) and compare each with ``baseline`` (default: the
    first), see the module docstring. ``accuracy(model, x, y)`` defaults to top-1 accuracy.

    Each variant is timed in ``rounds`` rounds, each round one calibrated block of the
    baseline, the variant and the :class:`Probe` in a random order (``seed``)."""
    if not isinstance(models, Mapping) or not models:
        raise ValueError("benchmark_suite needs a mapping of at least one name → model, got "
                         f"{type(models).__name__}")
    names = list(models)
    for name, model in models.items():
        if not isinstance(name, str) or not callable(model):
            raise TypeError(f"benchmark_suite: models maps names (str) to callables, got "
                            f"{name!r} → {type(model).__name__}")
    baseline = baseline or names[0]
    if baseline not in models:
        raise KeyError(f"baseline {baseline!r} is not one of the models {names}")
    x, y = _split(test_data)
    probe = Probe()
    results = []
    for name in [baseline] + [n for n in names if n != baseline]:
        model = models[name]
        base, own, probed = measure_interleaved(
            [("baseline", models[baseline]), (f"variant {name!r}", model), ("probe", probe)],
            (x,), rounds=rounds, seed=seed, caller="benchmark_suite")
        latency = LatencyStats.from_samples(own.samples, loops=own.loops, name=name,
                                            warmup=own.warmup, context=own.context)
        reference = LatencyStats.from_samples(base.samples, loops=base.loops, name=baseline,
                                              warmup=base.warmup, context=base.context)
        if y is None:
            score = None
        elif accuracy is None:
            score = top1_accuracy(name, model, x, y)
        else:
            score = accuracy(model, x, y)
            if isinstance(score, bool) or not isinstance(score, numbers.Real) or not (
                    0 <= score <= 1):
                raise ValueError(f"benchmark_suite: accuracy({callable_name(model)}, x, y) "
                                 f"for variant {name!r} must be a number in [0, 1], got "
                                 f"{score!r}")
            score = float(score)
        results.append(VariantResult(
            name, latency, len(x), measure_memory(model, x).peak_bytes,
            parameter_bytes(model) if isinstance(model, Module) else None,
            score, ABResult.from_samples(reference, latency, seed=seed), probed))
    order = {name: i for i, name in enumerate(names)}
    return SuiteResult(tuple(sorted(results, key=lambda r: order[r.name])), baseline,
                       sources=SuiteSources(dict(models), x, rounds, seed, probe))


__all__ = ["FORMAT", "Probe", "SuiteResult", "SuiteSources", "VariantResult", "benchmark_suite",
           "machine_profile", "top1_accuracy"]
