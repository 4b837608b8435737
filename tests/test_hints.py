"""The visible tests name the classic mistakes: each wrong answer below runs against the real
visible part of its test cell (the cell as in solutions/, up to the hidden tests) and must fail
with the hint that explains it (issue 14).

For chapters 04–07 the check also runs the other way (issue 20): every hint of their visible
tests, each entry of an ``expect(..., hints={value: text})`` dictionary and each message a test
cell raises itself, must be the failure of at least one mistake below. ``expect`` picks a hint by
the value the answer produced, so a hint that no mistake reaches is keyed to a value no mistake
produces, and a student who makes the mistake it names would read something else.
"""

from __future__ import annotations

import ast
import itertools
import json
import math
import textwrap
import time
import tracemalloc
from functools import lru_cache

import numpy as np
import pytest
from chapters import SOLUTIONS
from corpus.pytorch import MISTAKES as CORPUS

import tinyprof as tp
from tinyprof.testing import expect

#: Chapters whose every visible hint must be reached by a mistake below.
COVERED = ("04_latency", "05_bottlenecks", "06_benchmarking", "07_pytorch", "08_faster",
           "09_pipeline", "10_leaks")
#: Code cells (by id) that define the fakes a chapter's visible tests use (chapter 07: the GPT
#: and its `model`, the toy models, the fake GPU; torch and nn as its set-up cell imports them;
#: chapter 08: the pipeline, its constants and the output comparisons; chapter 09: the pipeline's
#: parts, Event and drive_prefetcher).
FIXTURES = {"03_memory": ("cell-06",), "04_latency": ("cell-18",), "06_benchmarking": ("cell-08",),
            "07_pytorch": ("cell-04", "cell-10", "cell-44"), "08_faster": ("cell-03",),
            "09_pipeline": ("31120452",), "10_leaks": ("cell-03", "cell-05")}
IMPORTS = {"07_pytorch": "import torch\nfrom torch import nn\n",
           "09_pipeline": ("import os\nimport queue\nimport threading\n"
                           "from tinyprof import pipecheck\n"
                           "from tinyprof.testing import reference_unavailable\n"),
           "10_leaks": "from tinyprof.testing import reference_unavailable\n"}


def _cells(chapter: str) -> list[dict]:
    (path,) = (SOLUTIONS / chapter).glob("*.ipynb")
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def visible_tests(chapter: str, grade_id: str) -> str:
    for cell in _cells(chapter):
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == grade_id:
            return _source(cell).split("### BEGIN HIDDEN TESTS")[0]
    raise LookupError(f"{chapter} has no cell {grade_id}")


def fixtures(chapter: str) -> str:
    by_id = {cell.get("id"): cell for cell in _cells(chapter)}
    return IMPORTS.get(chapter, "") + "\n".join(_source(by_id[cell_id])
                                                 for cell_id in FIXTURES.get(chapter, ()))


def graded_cells(chapter: str) -> list[str]:
    return [cell["metadata"]["nbgrader"]["grade_id"] for cell in _cells(chapter)
            if cell["metadata"].get("nbgrader", {}).get("grade") and cell["cell_type"] == "code"]


def hints_of(source: str) -> list[str]:
    """Every hint text of a visible test: the values of each ``hints={...}`` dictionary passed
    to ``expect``, of each dictionary assigned to a name ending in ``_HINTS`` (a cell's hints
    shared by several ``expect`` calls) and the message of each ``raise AssertionError(...)``."""
    texts = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
                and any(getattr(t, "id", "").endswith("_HINTS") for t in node.targets)):
            texts += [_text(value) for value in node.value.values]
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "expect":
            for keyword in node.keywords:
                if keyword.arg == "hints" and isinstance(keyword.value, ast.Dict):
                    texts += [_text(value) for value in keyword.value.values]
        if (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
                and getattr(node.exc.func, "id", None) == "AssertionError" and node.exc.args):
            texts.append(_text(node.exc.args[0]))
    return texts


def _text(node: ast.expr) -> str:
    assert isinstance(node, ast.Constant) and isinstance(node.value, str), (
        f"a hint must be a plain string for this test to find it: {ast.unparse(node)}")
    return node.value

#: Chapter 10's fit mistakes share a right fit (the slope, its interval from the effective
#: number of steps, the verdict against the tolerance), with the mistakes as switches.
FIT = """
        def fit(memory, warmup, t_table, tolerance, iid=False, raw_r1=False, dof_n=False):
            y = np.asarray(memory, dtype=float)[warmup:]
            x = np.arange(warmup, warmup + len(y), dtype=float)

            def line(x, y):
                n, dx = len(x), x - x.mean()
                b = (dx @ (y - y.mean())) / (dx @ dx)
                r = y - y.mean() - b * dx
                if np.max(np.abs(r)) < 0.5:
                    return b, b, b
                r1 = (r[1:] @ r[:-1]) / (r @ r)
                rho = 0.0 if iid else min(max(r1 if raw_r1 else (n * r1 + 2) / (n - 4), 0.0), 1.0)
                n_e = max(n * (1 - rho) / (1 + rho), 3.0)
                se = np.sqrt((r @ r) / (n_e - 2) / (dx @ dx))
                t = t_table[n - 2 if dof_n else int(n_e - 2)]
                return b, b - t * se, b + t * se

            slope, low, high = line(x, y)
            late, _, late_high = line(x[len(y) // 2:], y[len(y) // 2:])
            return float(slope), float(low), float(high), late, late_high

        def right_verdict(slope, low, high, late, late_high, tolerance):
            if low > tolerance:
                return "leak" if late >= slope / 2 else "plateau"
            if high <= tolerance:
                return "within tolerance"
            return "plateau" if late_high <= tolerance < slope else "undecided"
"""

#: Chapter 08's loader mistakes share the right gather: each sample's 16×16 window of the
#: padded upscaled image, moved down ``dy`` and right ``dx``.
WINDOWS = """
        def windows(images, indices, dy, dx):
            n = len(indices)
            up = images[indices].reshape(n, 8, 8).repeat(2, axis=1).repeat(2, axis=2)
            padded = np.pad(up, ((0, 0), (2, 2), (2, 2)))
            r = np.arange(16)
            rows = (r[None, :] - dy[:, None] + 2)[:, :, None]
            cols = (r[None, :] - dx[:, None] + 2)[:, None, :]
            return padded[np.arange(n)[:, None, None], rows, cols].reshape(n, 256)
"""
#: ... and the loss mistakes a right log-softmax.
LOG_SOFTMAX = """
        def log_softmax(z):
            s = z - z.max(axis=1, keepdims=True)
            return s - np.log(np.exp(s).sum(axis=1, keepdims=True))
"""

#: ... and the fast-step mistakes a right step in plain numpy (the visible tests switch tinyprof
#: off, so a mistake may not call pipeline.step).
NUMPY_STEP = """
        def numpy_step(weights, batch):
            up = images.reshape(-1, 8, 8).repeat(2, axis=1).repeat(2, axis=2).reshape(-1, 256)
            low, centre, high = np.percentile(up.astype(np.float32), [5, 50, 95], axis=0)
            centre, scale = centre.astype(np.float32), (high - low + 1).astype(np.float32)
            w = {k: np.asarray(v, dtype=np.float32) for k, v in weights.items()}
            idx, shifts = batch["indices"], batch["shifts"]
            n = len(idx)
            padded = np.pad(up.reshape(-1, 16, 16)[idx], ((0, 0), (2, 2), (2, 2)))
            r = np.arange(16)
            rows = (r[None, :] - shifts[:, :1] + 2)[:, :, None]
            cols = (r[None, :] - shifts[:, 1:] + 2)[:, None, :]
            x = (padded[np.arange(n)[:, None, None], rows, cols].reshape(n, 256) - centre) / scale
            h = x @ w["W1"] + w["b1"]
            t = np.tanh(GELU_C * (h + 0.044715 * h * h * h))
            a = 0.5 * h * (1 + t)
            da = 0.5 * (1 + t) + 0.5 * h * (1 - t * t) * GELU_C * (1 + 0.134145 * h * h)
            z = a @ w["W2"] + w["b2"]
            s = z - z.max(axis=1, keepdims=True)
            log_p = s - np.log(np.exp(s).sum(axis=1, keepdims=True))
            target = np.full(z.shape, SMOOTHING / CLASSES, dtype=np.float32)
            target[np.arange(n), labels[idx]] += 1 - SMOOTHING
            dz = (np.exp(log_p) - target) / n
            dh = (dz @ w["W2"].T) * da
            grads = {"W1": x.T @ dh, "b1": dh.sum(0), "W2": a.T @ dz, "b2": dz.sum(0)}
            new = {k: w[k] - LEARNING_RATE * (g + WEIGHT_DECAY * w[k]) for k, g in grads.items()}
            return float(-(target * log_p).sum() / n), new
"""

MISTAKES = {
    "percentile, n-based position": ("04_latency", "test_percentile", """
        def percentile(samples, q):
            x = sorted(samples)
            h = len(x) * q / 100
            low = int(h)
            if low + 1 >= len(x):
                return x[-1]
            return x[low] + (h - low) * (x[low + 1] - x[low])
        """, "h = n·q/100 = 2.5"),
    "percentile, rounded up": ("04_latency", "test_percentile", """
        import math
        def percentile(samples, q):
            x = sorted(samples)
            h = (len(x) - 1) * q / 100
            low = math.ceil(h)
            if low + 1 >= len(x):
                return x[-1]
            return x[low] + (h - low) * (x[low + 1] - x[low])
        """, "round h up"),
    "median_latency, the mean": ("04_latency", "test_median_latency", """
        def median_latency(fn, warmup=5, iterations=20, clock=time.perf_counter):
            for _ in range(warmup):
                fn()
            times = []
            for _ in range(iterations):
                start = clock()
                fn()
                times.append(clock() - start)
            return float(np.mean(times))
        """, "That is the mean (14.12 ms)"),
    "median_latency, no warm-up": ("04_latency", "test_median_latency", """
        def median_latency(fn, warmup=5, iterations=20, clock=time.perf_counter):
            times = []
            for _ in range(iterations):
                start = clock()
                fn()
                times.append(clock() - start)
            return float(np.median(times))
        """, "No warm-up: the three cold 40 ms calls were timed"),
    "median_latency, the mean without warm-up": ("04_latency", "test_median_latency", """
        def median_latency(fn, warmup=5, iterations=20, clock=time.perf_counter):
            times = []
            for _ in range(iterations):
                start = clock()
                fn()
                times.append(clock() - start)
            return float(np.mean(times))
        """, "That is the mean, and the cold calls were timed"),
    "median_latency, warm-up calls timed": ("04_latency", "test_median_latency", """
        def median_latency(fn, warmup=5, iterations=20, clock=time.perf_counter):
            times = []
            for _ in range(warmup + iterations):
                start = clock()
                fn()
                times.append(clock() - start)
            return float(np.median(times))
        """, "You timed the warm-up calls too"),
    "median_latency, total of the timed calls": ("04_latency", "test_median_latency", """
        def median_latency(fn, warmup=5, iterations=20, clock=time.perf_counter):
            for _ in range(warmup):
                fn()
            start = clock()
            for _ in range(iterations):
                fn()
            return clock() - start
        """, "That is the total of the five timed calls"),
    "median_latency, one start for every call": ("04_latency", "test_median_latency", """
        def median_latency(fn, warmup=5, iterations=20, clock=time.perf_counter):
            for _ in range(warmup):
                fn()
            times, start = [], clock()
            for _ in range(iterations):
                fn()
                times.append(clock() - start)
            return float(np.median(times))
        """, "read clock() again right before each call"),
    "median_latency, the wall clock": ("04_latency", "test_median_latency", """
        def median_latency(fn, warmup=5, iterations=20, clock=time.perf_counter):
            for _ in range(warmup):
                fn()
            times = []
            for _ in range(iterations):
                start = time.time()
                fn()
                times.append(time.time() - start)
            return float(np.median(times))
        """, "you read time.time(), the wall clock"),
    "median_latency, perf_counter instead of the clock given": (
        "04_latency", "test_median_latency", """
        def median_latency(fn, warmup=5, iterations=20, clock=time.perf_counter):
            for _ in range(warmup):
                fn()
            times = []
            for _ in range(iterations):
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
            return float(np.median(times))
        """, "with the clock you are given (not time.time() or time.perf_counter() directly)"),
    "percentile, unsorted": ("04_latency", "test_percentile", """
        def percentile(samples, q):
            x = list(samples)
            h = (len(x) - 1) * q / 100
            low = int(h)
            if low + 1 >= len(x):
                return x[-1]
            return x[low] + (h - low) * (x[low + 1] - x[low])
        """, "sort them first"),
    "percentile, no interpolation": ("04_latency", "test_percentile", """
        def percentile(samples, q):
            x = sorted(samples)
            return x[int((len(x) - 1) * q / 100)]
        """, "1 is x[⌊h⌋] without interpolating"),
    "percentile, nearest sample": ("04_latency", "test_percentile", """
        def percentile(samples, q):
            x = sorted(samples)
            return x[round((len(x) - 1) * q / 100)]
        """, "2 is x[round(h)], the nearest sample"),
    "percentile, interpolating from the sample above": ("04_latency", "test_percentile", """
        import math
        def percentile(samples, q):
            x = sorted(samples)
            h = (len(x) - 1) * q / 100
            low = math.ceil(h)
            if low + 1 >= len(x):
                return x[-1]
            return x[low] + (h - int(h)) * (x[low + 1] - x[low])
        """, "2.75 starts from x[⌈h⌉] = 2"),
    "percentile, no guard at q = 100": ("04_latency", "test_percentile", """
        def percentile(samples, q):
            x = sorted(samples)
            h = (len(x) - 1) * q / 100
            low = int(h)
            return x[low] + (h - low) * (x[low + 1] - x[low])
        """, "raised IndexError: at q = 100"),
    "percentile, sorted in place": ("04_latency", "test_percentile", """
        def percentile(samples, q):
            samples.sort()
            h = (len(samples) - 1) * q / 100
            low = int(h)
            if low + 1 >= len(samples):
                return samples[-1]
            return samples[low] + (h - low) * (samples[low + 1] - samples[low])
        """, "percentile sorted the caller's list in place"),
    "bootstrap_ci, without replacement": ("04_latency", "test_bootstrap_ci", """
        def bootstrap_ci(samples, resamples=2000, confidence=0.95, seed=0):
            x = np.asarray(samples, dtype=float)
            rng = np.random.default_rng(seed)
            medians = [np.median(rng.permutation(x)) for _ in range(resamples)]
            tail = 100 * (1 - confidence) / 2
            return tuple(np.percentile(medians, [tail, 100 - tail]))
        """, "resampling without replacement only reshuffles"),
    "bootstrap_ci, the mean": ("04_latency", "test_bootstrap_ci", """
        def bootstrap_ci(samples, resamples=2000, confidence=0.95, seed=0):
            x = np.asarray(samples, dtype=float)
            rng = np.random.default_rng(seed)
            means = x[rng.integers(0, x.size, size=(resamples, x.size))].mean(axis=1)
            tail = 100 * (1 - confidence) / 2
            return tuple(np.percentile(means, [tail, 100 - tail]))
        """, "You bootstrapped the mean, not the median"),
    "bootstrap_ci, percentiles of the samples": ("04_latency", "test_bootstrap_ci", """
        def bootstrap_ci(samples, resamples=2000, confidence=0.95, seed=0):
            tail = 100 * (1 - confidence) / 2
            return tuple(np.percentile(samples, [tail, 100 - tail]))
        """, "That is the 2.5th percentile of the samples themselves"),
    "bootstrap_ci, a 90% interval": ("04_latency", "test_bootstrap_ci", """
        def bootstrap_ci(samples, resamples=2000, confidence=0.95, seed=0):
            x = np.asarray(samples, dtype=float)
            rng = np.random.default_rng(seed)
            medians = np.median(x[rng.integers(0, x.size, size=(resamples, x.size))], axis=1)
            return tuple(np.percentile(medians, [100 * (1 - confidence), 100 * confidence]))
        """, "That is the 95th percentile"),
    "bootstrap_ci, unseeded": ("04_latency", "test_bootstrap_ci", """
        def bootstrap_ci(samples, resamples=2000, confidence=0.95, seed=0):
            x = np.asarray(samples, dtype=float)
            rng = np.random.default_rng()
            medians = np.median(x[rng.integers(0, x.size, size=(resamples, x.size))], axis=1)
            tail = 100 * (1 - confidence) / 2
            return tuple(np.percentile(medians, [tail, 100 - tail]))
        """, "The same seed gave two different intervals"),
    "linear_intensity, output not counted": ("05_bottlenecks", "test_linear_intensity", """
        def linear_intensity(batch, in_features, out_features, bias=True, bytes_per_element=4):
            flops = 2 * batch * in_features * out_features + (batch * out_features if bias else 0)
            read = batch * in_features + in_features * out_features + (out_features if bias else 0)
            return flops / (read * bytes_per_element)
        """, "You left the output out of the bytes"),
    "linear_intensity, MACs": ("05_bottlenecks", "test_linear_intensity", """
        def linear_intensity(batch, in_features, out_features, bias=True, bytes_per_element=4):
            macs = batch * in_features * out_features + (batch * out_features if bias else 0)
            elements = (batch * in_features + in_features * out_features
                        + (out_features if bias else 0) + batch * out_features)
            return macs / (elements * bytes_per_element)
        """, "That is MACs per byte"),
    "linear_intensity, numbers not bytes": ("05_bottlenecks", "test_linear_intensity", """
        def linear_intensity(batch, in_features, out_features, bias=True, bytes_per_element=4):
            flops = 2 * batch * in_features * out_features + (batch * out_features if bias else 0)
            return flops / (batch * in_features + in_features * out_features
                            + (out_features if bias else 0) + batch * out_features)
        """, "That is FLOPs per *number* moved"),
    "linear_intensity, no bias FLOPs": ("05_bottlenecks", "test_linear_intensity", """
        def linear_intensity(batch, in_features, out_features, bias=True, bytes_per_element=4):
            elements = (batch * in_features + in_features * out_features
                        + (out_features if bias else 0) + batch * out_features)
            return 2 * batch * in_features * out_features / (elements * bytes_per_element)
        """, "Missing the bias FLOPs"),
    "linear_intensity, bias always counted": ("05_bottlenecks", "test_linear_intensity", """
        def linear_intensity(batch, in_features, out_features, bias=True, bytes_per_element=4):
            flops = 2 * batch * in_features * out_features + batch * out_features
            elements = (batch * in_features + in_features * out_features + out_features
                        + batch * out_features)
            return flops / (elements * bytes_per_element)
        """, "With bias=False there is no bias to read and no bias add"),
    "elementwise_intensity, bytes read only": ("05_bottlenecks", "test_elementwise_intensity", """
        def elementwise_intensity(flops_per_element, inputs=1, bytes_per_element=4):
            return flops_per_element / (inputs * bytes_per_element)
        """, "You counted only the bytes read"),
    "elementwise_intensity, numbers not bytes": ("05_bottlenecks", "test_elementwise_intensity", """
        def elementwise_intensity(flops_per_element, inputs=1, bytes_per_element=4):
            return flops_per_element / (inputs + 1)
        """, "Count bytes, not numbers"),
    "elementwise_intensity, one input always": ("05_bottlenecks", "test_elementwise_intensity", """
        def elementwise_intensity(flops_per_element, inputs=1, bytes_per_element=4):
            return flops_per_element / (2 * bytes_per_element)
        """, "x + y reads TWO inputs"),
    "elementwise_intensity, every input read and written": (
        "05_bottlenecks", "test_elementwise_intensity", """
        def elementwise_intensity(flops_per_element, inputs=1, bytes_per_element=4):
            return flops_per_element / (2 * inputs * bytes_per_element)
        """, "3 arrays, not 4"),
    "attainable_flops, the max": ("05_bottlenecks", "test_attainable_flops", """
        def attainable_flops(intensity, peak_flops, bandwidth):
            return max(peak_flops, intensity * bandwidth)
        """, "Take the min, not the max"),
    "attainable_flops, intensity × peak under the peak": (
        "05_bottlenecks", "test_attainable_flops", """
        def attainable_flops(intensity, peak_flops, bandwidth):
            return min(peak_flops, intensity * peak_flops)
        """, "multiply the intensity by the bandwidth, not by the peak"),
    "attainable_flops, intensity × peak": ("05_bottlenecks", "test_attainable_flops", """
        def attainable_flops(intensity, peak_flops, bandwidth):
            return intensity * peak_flops
        """, "Intensity times PEAK FLOP/s has no meaning"),
    "attainable_flops, intensity / bandwidth": ("05_bottlenecks", "test_attainable_flops", """
        def attainable_flops(intensity, peak_flops, bandwidth):
            return min(peak_flops, intensity / bandwidth)
        """, "Intensity / bandwidth: multiply them instead"),
    "attainable_flops, no cap at the peak": ("05_bottlenecks", "test_attainable_flops", """
        def attainable_flops(intensity, peak_flops, bandwidth):
            return intensity * bandwidth
        """, "Right of the ridge no layer beats the peak"),
    "bound, ridge inverted": ("05_bottlenecks", "test_bound", """
        def bound(flops, nbytes, seconds, peak_flops, bandwidth, call_overhead):
            roof = max(flops / peak_flops, nbytes / bandwidth)
            if seconds < 50 * call_overhead and roof < 0.1 * seconds:
                return "overhead"
            return "compute" if flops / nbytes >= bandwidth / peak_flops else "memory"
        """, "Did you invert the ridge"),
    "bound, no overhead check": ("05_bottlenecks", "test_bound", """
        def bound(flops, nbytes, seconds, peak_flops, bandwidth, call_overhead):
            return "compute" if flops / nbytes >= peak_flops / bandwidth else "memory"
        """, "check for overhead FIRST"),
    "bound, overhead without the short-call condition": ("05_bottlenecks", "test_bound", """
        def bound(flops, nbytes, seconds, peak_flops, bandwidth, call_overhead):
            if max(flops / peak_flops, nbytes / bandwidth) < 0.1 * seconds:
                return "overhead"
            return "compute" if flops / nbytes >= peak_flops / bandwidth else "memory"
        """, "a call is overhead-bound only when it is short"),
    "bound, roof times summed": ("05_bottlenecks", "test_bound", """
        def bound(flops, nbytes, seconds, peak_flops, bandwidth, call_overhead):
            roof = flops / peak_flops + nbytes / bandwidth
            if seconds < 50 * call_overhead and roof < 0.1 * seconds:
                return "overhead"
            return "compute" if flops / nbytes >= peak_flops / bandwidth else "memory"
        """, "You added the two roof times"),
    "top_operations, total time": ("05_bottlenecks", "test_top_operations", """
        def top_operations(rows, n=10):
            return sorted(rows, key=lambda row: row["total_s"], reverse=True)[:n]
        """, "Sorted by TOTAL time"),
    "top_operations, smallest first": ("05_bottlenecks", "test_top_operations", """
        def top_operations(rows, n=10):
            return sorted(rows, key=lambda row: row["self_s"])[:n]
        """, "Smallest first"),
    "top_operations, not sorted": ("05_bottlenecks", "test_top_operations", """
        def top_operations(rows, n=10):
            return rows[:n]
        """, "These are the first 3 rows as given"),
    "top_operations, every row": ("05_bottlenecks", "test_top_operations", """
        def top_operations(rows, n=10):
            return sorted(rows, key=lambda row: row["self_s"], reverse=True)
        """, "That is every row, sorted"),
    "top_operations, sorted in place": ("05_bottlenecks", "test_top_operations", """
        def top_operations(rows, n=10):
            rows.sort(key=lambda row: row["self_s"], reverse=True)
            return rows[:n]
        """, "Do not sort the caller's list in place"),
    "step_speedup, fractions swapped": ("05_bottlenecks", "test_step_speedup", """
        def step_speedup(seconds_by_part, improved, factor):
            total = sum(seconds_by_part.values())
            p = sum(seconds_by_part[part] for part in improved) / total
            return 1 / (p + (1 - p) / factor)
        """, "The fractions are swapped"),
    "step_speedup, the factor": ("05_bottlenecks", "test_step_speedup", """
        def step_speedup(seconds_by_part, improved, factor):
            return factor
        """, "The whole does not get 2× faster"),
    "step_speedup, new time not inverted": ("05_bottlenecks", "test_step_speedup", """
        def step_speedup(seconds_by_part, improved, factor):
            total = sum(seconds_by_part.values())
            p = sum(seconds_by_part[part] for part in improved) / total
            return (1 - p) + p * factor
        """, "That is (1 − p) + p·s"),
    "step_speedup, seconds as fractions": ("05_bottlenecks", "test_step_speedup", """
        def step_speedup(seconds_by_part, improved, factor):
            p = sum(seconds_by_part[part] for part in improved)
            return 1 / ((1 - p) + p / factor)
        """, "These are seconds, not fractions"),
    "step_speedup, first improved part only": ("05_bottlenecks", "test_step_speedup", """
        def step_speedup(seconds_by_part, improved, factor):
            p = seconds_by_part[next(iter(improved))] / sum(seconds_by_part.values())
            return 1 / ((1 - p) + p / factor)
        """, "Only the first improved part was counted"),
    "time_interleaved, every time in times_a": ("06_benchmarking", "test_time_interleaved", """
        def time_interleaved(a, b, rounds, rng, clock=time.perf_counter):
            times_a, times_b = [], []
            for _ in range(rounds):
                for which in rng.permutation(2):
                    start = clock()
                    (a, b)[which]()
                    times_a.append(clock() - start)
            return times_a, times_b
        """, "Every call landed in times_a"),
    "time_interleaved, one function per round": ("06_benchmarking", "test_time_interleaved", """
        def time_interleaved(a, b, rounds, rng, clock=time.perf_counter):
            times = ([], [])
            for r in range(rounds):
                start = clock()
                (a, b)[r % 2]()
                times[r % 2].append(clock() - start)
            return times
        """, "Each round calls BOTH functions once"),
    "time_interleaved, sequential blocks": ("06_benchmarking", "test_time_interleaved", """
        def time_interleaved(a, b, rounds, rng, clock=time.perf_counter):
            times_a, times_b = [], []
            for _ in range(rounds):
                start = clock()
                a()
                times_a.append(clock() - start)
            for _ in range(rounds):
                start = clock()
                b()
                times_b.append(clock() - start)
            return times_a, times_b
        """, "(sequential blocks)"),
    "time_interleaved, perf_counter instead of the clock given": (
        "06_benchmarking", "test_time_interleaved", """
        def time_interleaved(a, b, rounds, rng, clock=time.perf_counter):
            functions, times = (a, b), ([], [])
            for _ in range(rounds):
                for which in rng.permutation(2):
                    start = time.perf_counter()
                    functions[which]()
                    times[which].append(time.perf_counter() - start)
            return times
        """, "The fake clock was never read"),
    "time_interleaved, times filed by position": ("06_benchmarking", "test_time_interleaved", """
        def time_interleaved(a, b, rounds, rng, clock=time.perf_counter):
            functions, times = (a, b), ([], [])
            for _ in range(rounds):
                for position, which in enumerate(rng.permutation(2)):
                    start = clock()
                    functions[which]()
                    times[position].append(clock() - start)
            return times
        """, "not under its position in the round"),
    "time_interleaved, one start for every call": ("06_benchmarking", "test_time_interleaved", """
        def time_interleaved(a, b, rounds, rng, clock=time.perf_counter):
            functions, times, start = (a, b), ([], []), clock()
            for _ in range(rounds):
                for which in rng.permutation(2):
                    functions[which]()
                    times[which].append(clock() - start)
            return times
        """, "read clock() again right before each call"),
    "time_interleaved, milliseconds": ("06_benchmarking", "test_time_interleaved", """
        def time_interleaved(a, b, rounds, rng, clock=time.perf_counter):
            functions, times = (a, b), ([], [])
            for _ in range(rounds):
                for which in rng.permutation(2):
                    start = clock()
                    functions[which]()
                    times[which].append((clock() - start) * 1e3)
            return times
        """, "Those are milliseconds"),
    "speedup_ci, inverted": ("06_benchmarking", "test_speedup_ci", """
        def speedup_ci(baseline, candidate, resamples=2000, confidence=0.95, seed=0):
            a, b = np.asarray(baseline), np.asarray(candidate)
            rng = np.random.default_rng(seed)
            am = np.median(a[rng.integers(0, a.size, size=(resamples, a.size))], axis=1)
            bm = np.median(b[rng.integers(0, b.size, size=(resamples, b.size))], axis=1)
            low, high = np.percentile(bm / am, [2.5, 97.5])
            return float(np.median(b) / np.median(a)), (float(low), float(high))
        """, "That ratio is inverted"),
    "speedup_ci, means": ("06_benchmarking", "test_speedup_ci", """
        def speedup_ci(baseline, candidate, resamples=2000, confidence=0.95, seed=0):
            a, b = np.asarray(baseline), np.asarray(candidate)
            rng = np.random.default_rng(seed)
            ra = a[rng.integers(0, a.size, size=(resamples, a.size))].mean(axis=1)
            rb = b[rng.integers(0, b.size, size=(resamples, b.size))].mean(axis=1)
            low, high = np.percentile(ra / rb, [2.5, 97.5])
            return float(a.mean() / b.mean()), (float(low), float(high))
        """, "That is a ratio of MEANS"),
    "speedup_ci, resampled ratio inverted": ("06_benchmarking", "test_speedup_ci", """
        def speedup_ci(baseline, candidate, resamples=2000, confidence=0.95, seed=0):
            a, b = np.asarray(baseline), np.asarray(candidate)
            rng = np.random.default_rng(seed)
            am = np.median(a[rng.integers(0, a.size, size=(resamples, a.size))], axis=1)
            bm = np.median(b[rng.integers(0, b.size, size=(resamples, b.size))], axis=1)
            low, high = np.percentile(bm / am, [2.5, 97.5])
            return float(np.median(a) / np.median(b)), (float(low), float(high))
        """, "Inverted ratio: resample median(baseline) / median(candidate)"),
    "speedup_ci, without replacement": ("06_benchmarking", "test_speedup_ci", """
        def speedup_ci(baseline, candidate, resamples=2000, confidence=0.95, seed=0):
            a, b = np.asarray(baseline), np.asarray(candidate)
            rng = np.random.default_rng(seed)
            ratios = [np.median(rng.permutation(a)) / np.median(rng.permutation(b))
                      for _ in range(resamples)]
            low, high = np.percentile(ratios, [2.5, 97.5])
            return float(np.median(a) / np.median(b)), (float(low), float(high))
        """, "resampling without replacement (a permutation)"),
    "speedup_ci, shared indices": ("06_benchmarking", "test_speedup_ci", """
        def speedup_ci(baseline, candidate, resamples=2000, confidence=0.95, seed=0):
            a, b = np.asarray(baseline), np.asarray(candidate)
            rng = np.random.default_rng(seed)
            idx = rng.integers(0, a.size, size=(resamples, a.size))
            low, high = np.percentile(np.median(a[idx], axis=1) / np.median(b[idx], axis=1),
                                      [2.5, 97.5])
            return float(np.median(a) / np.median(b)), (float(low), float(high))
        """, "You reused the baseline's resample indices"),
    "ab_verdict, direction ignored": ("06_benchmarking", "test_ab_verdict", """
        def ab_verdict(low, high, p_value, noise_band=0.05, alpha=0.01):
            if p_value >= alpha:
                return "no change"
            if low > 1 + noise_band or high < 1 / (1 + noise_band):
                return "faster"
            return "no change"
        """, "An interval below 1 means the candidate is SLOWER"),
    "ab_verdict, significance only": ("06_benchmarking", "test_ab_verdict", """
        def ab_verdict(low, high, p_value, noise_band=0.05, alpha=0.01):
            if p_value >= alpha:
                return "no change"
            return "faster" if (low + high) / 2 > 1 else "slower"
        """, "Significant is not the same as worth anything"),
    "ab_verdict, p-value ignored": ("06_benchmarking", "test_ab_verdict", """
        def ab_verdict(low, high, p_value, noise_band=0.05, alpha=0.01):
            if low > 1 + noise_band:
                return "faster"
            if high < 1 / (1 + noise_band):
                return "slower"
            return "no change"
        """, "Check the p-value first"),
    "ab_verdict, the interval's middle": ("06_benchmarking", "test_ab_verdict", """
        def ab_verdict(low, high, p_value, noise_band=0.05, alpha=0.01):
            if p_value >= alpha:
                return "no change"
            middle = (low + high) / 2
            if middle > 1 + noise_band:
                return "faster"
            if middle < 1 / (1 + noise_band):
                return "slower"
            return "no change"
        """, "Only the middle of the interval is above the band"),
    "ab_verdict, a fixed noise band": ("06_benchmarking", "test_ab_verdict", """
        def ab_verdict(low, high, p_value, noise_band=0.05, alpha=0.01):
            if p_value >= alpha:
                return "no change"
            if low > 1.05:
                return "faster"
            if high < 1 / 1.05:
                return "slower"
            return "no change"
        """, "Use the noise_band you are given"),
    "choose_variant, accuracy ignored": ("06_benchmarking", "test_choose_variant", """
        def choose_variant(rows, max_accuracy_drop=0.01):
            faster = [r for r in rows if r["verdict"] == "faster"]
            return max(faster, key=lambda r: r["speedup"])["name"] if faster else rows[0]["name"]
        """, "filter by accuracy_delta"),
    "choose_variant, verdict ignored": ("06_benchmarking", "test_choose_variant", """
        def choose_variant(rows, max_accuracy_drop=0.01):
            ok = [r for r in rows if r["accuracy_delta"] >= -max_accuracy_drop]
            return max(ok, key=lambda r: r["speedup"])["name"]
        """, "Only 'faster' verdicts count"),
    "choose_variant, first eligible": ("06_benchmarking", "test_choose_variant", """
        def choose_variant(rows, max_accuracy_drop=0.01):
            for r in rows:
                if r["verdict"] == "faster" and r["accuracy_delta"] >= -max_accuracy_drop:
                    return r["name"]
            return rows[0]["name"]
        """, "pick the highest speedup"),
    "choose_variant, minus sign forgotten": ("06_benchmarking", "test_choose_variant", """
        def choose_variant(rows, max_accuracy_drop=0.01):
            ok = [r for r in rows
                  if r["verdict"] == "faster" and r["accuracy_delta"] >= max_accuracy_drop]
            return max(ok, key=lambda r: r["speedup"])["name"] if ok else rows[0]["name"]
        """, "mind the minus sign"),
    "choose_variant, budget ignored": ("06_benchmarking", "test_choose_variant", """
        def choose_variant(rows, max_accuracy_drop=0.01):
            ok = [r for r in rows if r["verdict"] == "faster" and r["accuracy_delta"] >= -0.01]
            return max(ok, key=lambda r: r["speedup"])["name"] if ok else rows[0]["name"]
        """, "more than the 0.1 allowed here"),
    "choose_variant, no baseline to fall back on": ("06_benchmarking", "test_choose_variant", """
        def choose_variant(rows, max_accuracy_drop=0.01):
            ok = [r for r in rows
                  if r["verdict"] == "faster" and r["accuracy_delta"] >= -max_accuracy_drop]
            if ok:
                return max(ok, key=lambda r: r["speedup"])["name"]
        """, "Nothing qualified and choose_variant returned None"),
    "choose_variant, the budget's edge excluded": ("06_benchmarking", "test_choose_variant", """
        def choose_variant(rows, max_accuracy_drop=0.01):
            ok = [r for r in rows
                  if r["verdict"] == "faster" and r["accuracy_delta"] > -max_accuracy_drop]
            return max(ok, key=lambda r: r["speedup"])["name"] if ok else rows[0]["name"]
        """, "Losing exactly max_accuracy_drop is allowed"),
    "check_against_baseline, ratio inverted": ("06_benchmarking", "test_check_against_baseline", """
        def check_against_baseline(current_median_s, machine, baseline, tolerance=0.05):
            if machine != baseline["machine"]:
                return "incomparable"
            return "regressed" if baseline["median_s"] / current_median_s - 1 > tolerance else "ok"
        """, "Did you invert the ratio"),
    "check_against_baseline, either direction": (
        "06_benchmarking", "test_check_against_baseline", """
        def check_against_baseline(current_median_s, machine, baseline, tolerance=0.05):
            if machine != baseline["machine"]:
                return "incomparable"
            change = abs(current_median_s / baseline["median_s"] - 1)
            return "regressed" if change > tolerance else "ok"
        """, "Faster is not a regression"),
    "check_against_baseline, tolerance ignored": (
        "06_benchmarking", "test_check_against_baseline", """
        def check_against_baseline(current_median_s, machine, baseline, tolerance=0.05):
            if machine != baseline["machine"]:
                return "incomparable"
            return "regressed" if current_median_s > baseline["median_s"] else "ok"
        """, "within the 5 % tolerance"),
    "check_against_baseline, machine ignored": (
        "06_benchmarking", "test_check_against_baseline", """
        def check_against_baseline(current_median_s, machine, baseline, tolerance=0.05):
            change = current_median_s / baseline["median_s"] - 1
            return "regressed" if change > tolerance else "ok"
        """, "The baseline was measured on another machine"),
    "check_against_baseline, processor only": ("06_benchmarking", "test_check_against_baseline", """
        def check_against_baseline(current_median_s, machine, baseline, tolerance=0.05):
            if machine["processor"] != baseline["machine"]["processor"]:
                return "incomparable"
            change = current_median_s / baseline["median_s"] - 1
            return "regressed" if change > tolerance else "ok"
        """, "compare the whole machine description"),
    "conv2d, int kernel squared only": ("01_parameters", "test_conv2d_params", """
        def conv2d_params(in_channels, out_channels, kernel_size, groups=1, bias=True):
            return out_channels * in_channels // groups * kernel_size * kernel_size + (
                out_channels if bias else 0)
        """, "kernel_size may also be a tuple (kh, kw)"),
    "conv2d, tuple kernel only": ("01_parameters", "test_conv2d_params", """
        def conv2d_params(in_channels, out_channels, kernel_size, groups=1, bias=True):
            kh, kw = kernel_size
            return out_channels * in_channels // groups * kh * kw + (out_channels if bias else 0)
        """, "an int k, which means a k×k kernel"),
    "peak without reset_peak": ("03_memory", "test_peak_memory_bytes", """
        def peak_memory_bytes(fn, *args, **kwargs):
            started = not tracemalloc.is_tracing()
            if started:
                tracemalloc.start()
            try:
                before = tracemalloc.get_traced_memory()[0]
                fn(*args, **kwargs)
                return tracemalloc.get_traced_memory()[1] - before
            finally:
                if started:
                    tracemalloc.stop()
        """, "call tracemalloc.reset_peak()"),
    "peak without try/finally": ("03_memory", "test_peak_memory_bytes", """
        def peak_memory_bytes(fn, *args, **kwargs):
            started = not tracemalloc.is_tracing()
            if started:
                tracemalloc.start()
            tracemalloc.reset_peak()
            before = tracemalloc.get_traced_memory()[0]
            fn(*args, **kwargs)
            peak = tracemalloc.get_traced_memory()[1]
            if started:
                tracemalloc.stop()
            return peak - before
        """, "finally block (try: ... finally: ...)"),
    # Chapter 08: each likely mistake of the fixes, against the slow pipeline's outputs.
    "predicted_speedup, the stage's own speedup": ("08_faster", "test_predicted_speedup", """
        def predicted_speedup(before, after):
            return sum(before[s] for s in after) / sum(after.values())
        """, "That is the load stage's own speedup"),
    "predicted_speedup, upside down": ("08_faster", "test_predicted_speedup", """
        def predicted_speedup(before, after):
            total = sum(before.values())
            return (total - sum(before[s] - t for s, t in after.items())) / total
        """, "Upside down"),
    "predicted_speedup, new time of the fixed stage only": (
        "08_faster", "test_predicted_speedup", """
        def predicted_speedup(before, after):
            return sum(before.values()) / sum(after.values())
        """, "the new step time is the new load time PLUS the untouched stages"),
    "predicted_speedup, first fixed stage only": ("08_faster", "test_predicted_speedup", """
        def predicted_speedup(before, after):
            total = sum(before.values())
            stage, seconds = next(iter(after.items()))
            return total / (total - (before[stage] - seconds))
        """, "Only the first stage in `after` was counted"),
    "predicted_speedup, last fixed stage only": ("08_faster", "test_predicted_speedup", """
        def predicted_speedup(before, after):
            total = sum(before.values())
            for stage, seconds in after.items():
                saved = before[stage] - seconds
            return total / (total - saved)
        """, "Only the last stage in `after` was counted"),
    # Chapter 10: the fit's mistakes on the test's three series, and the snapshot comparison's.
    "growth_per_step, every step fitted": ("10_leaks", "test_growth_per_step", FIT + """
        def growth_per_step(memory, warmup, t_table, tolerance=0.0):
            fitted = fit(memory, 0, t_table, tolerance)
            return (*fitted[:3], right_verdict(*fitted, tolerance))
        """, "leave out the first `warmup` steps"),
    "growth_per_step, the textbook interval": ("10_leaks", "test_growth_per_step", FIT + """
        def growth_per_step(memory, warmup, t_table, tolerance=0.0):
            fitted = fit(memory, warmup, t_table, tolerance, iid=True)
            return (*fitted[:3], right_verdict(*fitted, tolerance))
        """, "That is the textbook interval"),
    "growth_per_step, r1 not corrected for its bias": ("10_leaks", "test_growth_per_step", FIT + """
        def growth_per_step(memory, warmup, t_table, tolerance=0.0):
            fitted = fit(memory, warmup, t_table, tolerance, raw_r1=True)
            return (*fitted[:3], right_verdict(*fitted, tolerance))
        """, "Correct r1 for the bias"),
    "growth_per_step, t with n - 2 degrees of freedom": (
        "10_leaks", "test_growth_per_step", FIT + """
        def growth_per_step(memory, warmup, t_table, tolerance=0.0):
            fitted = fit(memory, warmup, t_table, tolerance, dof_n=True)
            return (*fitted[:3], right_verdict(*fitted, tolerance))
        """, "degrees of freedom, not n − 2"),
    "growth_per_step, every growth above the tolerance a leak": (
        "10_leaks", "test_growth_per_step", FIT + """
        def growth_per_step(memory, warmup, t_table, tolerance=0.0):
            slope, low, high, late, late_high = fit(memory, warmup, t_table, tolerance)
            return slope, low, high, "leak" if slope > tolerance else "within tolerance"
        """, "A plateau grows early and stops"),
    "growth_per_step, leak and plateau swapped": ("10_leaks", "test_growth_per_step", FIT + """
        def growth_per_step(memory, warmup, t_table, tolerance=0.0):
            fitted = fit(memory, warmup, t_table, tolerance)
            verdict = right_verdict(*fitted, tolerance)
            swapped = {"leak": "plateau", "plateau": "leak"}.get(verdict, verdict)
            return (*fitted[:3], swapped)
        """, "A leak's last half grows as fast as the whole window"),
    "growth_per_step, a bend left undecided": ("10_leaks", "test_growth_per_step", FIT + """
        def growth_per_step(memory, warmup, t_table, tolerance=0.0):
            slope, low, high, late, late_high = fit(memory, warmup, t_table, tolerance)
            if low > tolerance:
                return slope, low, high, "leak" if late >= slope / 2 else "plateau"
            return slope, low, high, "within tolerance" if high <= tolerance else "undecided"
        """, "A line drawn through a bend"),
    "growth_per_step, compared with zero": ("10_leaks", "test_growth_per_step", FIT + """
        def growth_per_step(memory, warmup, t_table, tolerance=0.0):
            slope, low, high, late, late_high = fit(memory, warmup, t_table, tolerance)
            if low > 0:
                return slope, low, high, "leak" if late >= slope / 2 else "plateau"
            return slope, low, high, right_verdict(slope, low, high, late, late_high, tolerance)
        """, "Compare the interval with the tolerance, not with zero"),
    "growth_per_step, noise for growth under the tolerance": (
        "10_leaks", "test_growth_per_step", FIT + """
        def growth_per_step(memory, warmup, t_table, tolerance=0.0):
            fitted = fit(memory, warmup, t_table, tolerance)
            verdict = right_verdict(*fitted, tolerance)
            return (*fitted[:3], "noise" if verdict == "within tolerance" else verdict)
        """, "An interval that excludes zero is not noise"),
    "top_growing_lines, compare_to's order kept": ("10_leaks", "test_top_growing_lines", """
        def top_growing_lines(before, after, n):
            return [(d.traceback[0].filename, d.traceback[0].lineno, d.size_diff)
                    for d in after.compare_to(before, "lineno")[:n]]
        """, "Sort by size_diff, largest growth first"),
    "top_growing_lines, sorted by the size now": ("10_leaks", "test_top_growing_lines", """
        def top_growing_lines(before, after, n):
            diffs = [d for d in after.compare_to(before, "lineno") if d.size_diff > 0]
            diffs.sort(key=lambda d: d.size, reverse=True)
            return [(d.traceback[0].filename, d.traceback[0].lineno, d.size_diff)
                    for d in diffs[:n]]
        """, "sorted by the size now"),
    "top_growing_lines, blocks instead of bytes": ("10_leaks", "test_top_growing_lines", """
        def top_growing_lines(before, after, n):
            diffs = [d for d in after.compare_to(before, "lineno") if d.size_diff > 0]
            diffs.sort(key=lambda d: d.size_diff, reverse=True)
            return [(d.traceback[0].filename, d.traceback[0].lineno, d.count_diff)
                    for d in diffs[:n]]
        """, "not in blocks (count_diff)"),
    "train_fixed, the history keeps dicts": ("10_leaks", "test_train_fixed", """
        def train_fixed(steps, seed=0):
            data, w1, w2 = setup(seed)
            history = []
            for step in range(steps):
                loss, recon, _ = sgd_step(normalised(data[step % BATCHES]), w1, w2)
                history.append({"loss": loss, "recon": recon})
            return history
        """, "still keeps a dict with the reconstruction array"),
    "train_fixed, the history keeps arrays": ("10_leaks", "test_train_fixed", """
        def train_fixed(steps, seed=0):
            data, w1, w2 = setup(seed)
            history = []
            for step in range(steps):
                x = normalised(data[step % BATCHES])
                history.append(np.mean((np.tanh(x @ w1) @ w2 - x) ** 2, keepdims=True))
                sgd_step(x, w1, w2)
            return history
        """, "The history keeps arrays"),
    "load_batch, shifted the wrong way": ("08_faster", "test_load_batch", WINDOWS + """
        def load_batch(images, indices, shifts, centre, scale):
            return (windows(images, indices, -shifts[:, 0], -shifts[:, 1]) - centre) / scale
        """, "subtract the shift"),
    "load_batch, rows and columns swapped": ("08_faster", "test_load_batch", WINDOWS + """
        def load_batch(images, indices, shifts, centre, scale):
            return (windows(images, indices, shifts[:, 1], shifts[:, 0]) - centre) / scale
        """, "shifts[:, 0] is dy (rows)"),
    "load_batch, not normalised": ("08_faster", "test_load_batch", WINDOWS + """
        def load_batch(images, indices, shifts, centre, scale):
            return windows(images, indices, shifts[:, 0], shifts[:, 1]).astype(float)
        """, "(x − centre) / scale"),
    "load_batch, np.roll wraps around": ("08_faster", "test_load_batch", """
        def load_batch(images, indices, shifts, centre, scale):
            up = images[indices].reshape(-1, 8, 8).repeat(2, axis=1).repeat(2, axis=2)
            rolled = np.stack([np.roll(im, (int(dy), int(dx)), (0, 1))
                               for im, (dy, dx) in zip(up, shifts)])
            return (rolled.reshape(len(indices), 256) - centre) / scale
        """, "zeros are shifted in"),
    "gelu_with_grad, swapped": ("08_faster", "test_gelu_with_grad", """
        def gelu_with_grad(h):
            t = np.tanh(GELU_C * (h + 0.044715 * h * h * h))
            dy = 0.5 * (1 + t) + 0.5 * h * (1 - t * t) * GELU_C * (1 + 0.134145 * h * h)
            return dy, 0.5 * h * (1 + t)
        """, "in that order"),
    "gelu_with_grad, half the derivative": ("08_faster", "test_gelu_with_grad", """
        def gelu_with_grad(h):
            t = np.tanh(GELU_C * (h + 0.044715 * h * h * h))
            return 0.5 * h * (1 + t), 0.5 * h * (1 - t * t) * GELU_C * (1 + 0.134145 * h * h)
        """, "GELU' has two terms"),
    "gelu_with_grad, no 3": ("08_faster", "test_gelu_with_grad", """
        def gelu_with_grad(h):
            t = np.tanh(GELU_C * (h + 0.044715 * h * h * h))
            dy = 0.5 * (1 + t) + 0.5 * h * (1 - t * t) * GELU_C * (1 + 0.044715 * h * h)
            return 0.5 * h * (1 + t), dy
        """, "the 3 is missing"),
    "gelu_with_grad, ReLU's derivative": ("08_faster", "test_gelu_with_grad", """
        def gelu_with_grad(h):
            t = np.tanh(GELU_C * (h + 0.044715 * h * h * h))
            return 0.5 * h * (1 + t), (h > 0).astype(h.dtype)
        """, "That is ReLU's derivative"),
    "gelu_with_grad, in place in h": ("08_faster", "test_gelu_with_grad", """
        def gelu_with_grad(h):
            t = np.tanh(GELU_C * (h + 0.044715 * h * h * h))
            dy = 0.5 * (1 + t) + 0.5 * h * (1 - t * t) * GELU_C * (1 + 0.134145 * h * h)
            h *= 0.5 * (1 + t)
            return h.copy(), dy
        """, "Your function changed its input"),
    "smoothed_loss, summed": ("08_faster", "test_smoothed_loss", LOG_SOFTMAX + """
        def smoothed_loss(z, labels):
            t = np.full(z.shape, 0.01)
            t[np.arange(len(z)), labels] += 0.9
            return float(-(t * log_softmax(z)).sum()), np.exp(log_softmax(z)) - t
        """, "The loss is the MEAN over the batch"),
    "smoothed_loss, dz not divided": ("08_faster", "test_smoothed_loss", LOG_SOFTMAX + """
        def smoothed_loss(z, labels):
            t = np.full(z.shape, 0.01)
            t[np.arange(len(z)), labels] += 0.9
            return float(-(t * log_softmax(z)).sum() / len(z)), np.exp(log_softmax(z)) - t
        """, "its gradient is (p − t) / n"),
    "smoothed_loss, one-hot targets": ("08_faster", "test_smoothed_loss", LOG_SOFTMAX + """
        def smoothed_loss(z, labels):
            t, n = np.eye(10)[labels], len(z)
            return float(-(t * log_softmax(z)).sum() / n), (np.exp(log_softmax(z)) - t) / n
        """, "The targets are smoothed"),
    "fast_step, no weight decay": ("08_faster", "test_fast_step", NUMPY_STEP + """
        def fast_step(weights, batch):
            loss, new = numpy_step(weights, batch)
            decay = LEARNING_RATE * WEIGHT_DECAY
            return loss, {k: v + decay * weights[k] for k, v in new.items()}
        """, "the weight decay term λ·w is missing"),
    "fast_step, the old weights": ("08_faster", "test_fast_step", NUMPY_STEP + """
        def fast_step(weights, batch):
            return numpy_step(weights, batch)[0], weights
        """, "Return the NEW weights"),
    "gelu_with_grad, in float32": ("08_faster", "test_gelu_with_grad", """
        def gelu_with_grad(h):
            x = h.astype(np.float32)
            t = np.tanh(np.float32(GELU_C) * (x + np.float32(0.044715) * x * x * x))
            c, k = np.float32(GELU_C), np.float32(0.134145)
            dy = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + k * x * x)
            return 0.5 * x * (1 + t), dy
        """, "not in h's dtype"),
    "smoothed_loss, float64 targets": ("08_faster", "test_smoothed_loss", LOG_SOFTMAX + """
        def smoothed_loss(z, labels):
            t, n = np.full(z.shape, SMOOTHING / CLASSES), len(z)
            t[np.arange(n), labels] += 1 - SMOOTHING
            return float(-(t * log_softmax(z)).sum() / n), (np.exp(log_softmax(z)) - t) / n
        """, "Keep the logits' dtype"),
}


def _conv2d(reach: str = "dilation * (kernel_size - 1) + 1", out: str = "", flops: str = "f",
            dx: str = "f if needs_input_grad else 0", dw: str = "f") -> str:
    """conv2d_flops with one part written wrong (each argument replaces the right one)."""
    out = out or "(h + 2 * padding - reach) // stride + 1, (w + 2 * padding - reach) // stride + 1"
    return f"""
        def conv2d_flops(x_shape, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                         groups=1, needs_input_grad=False):
            n, c, h, w = x_shape
            reach = {reach}
            ho, wo = {out}
            f = 2 * n * out_channels * ho * wo * (c // groups) * kernel_size ** 2
            f = {flops}
            return f, {dx}, {dw}
        """


def _segments(stops: str = "[e[0] for e in events[1:]] + [end]",
              opened: str = "totals.setdefault(name, 0.0)",
              current: str = "stack[-1] if stack else None") -> str:
    """backward_segments with one part written wrong (each argument replaces the right one)."""
    return f"""
        def backward_segments(events, end):
            totals, stack, current = {{}}, [], None
            for (start, kind, name), stop in zip(events, {stops}):
                if kind == "open":
                    stack.append(name)
                    {opened}
                else:
                    stack.remove(name)
                current = {current}
                if current is not None:
                    totals[current] += stop - start
            return totals
        """


# -- chapter 07 -------------------------------------------------------------------------------
_CH07 = {
    "count_params, the weight alone": ("test_count_params", """
        def count_params(module):
            return sum(m.weight.numel() for m in module.modules()
                       if isinstance(getattr(m, "weight", None), torch.Tensor)), 0
        """, "8,192 is the weight alone"),
    "count_params, swapped": ("test_count_params", """
        def count_params(module):
            trainable = sum(p.numel() for p in module.parameters() if p.requires_grad)
            return sum(p.numel() for p in module.parameters()) - trainable, trainable
        """, "Swapped: trainable first, then frozen."),
    "count_params, state_dict": ("test_count_params", """
        def count_params(module):
            return sum(t.numel() for t in module.state_dict().values()), 0
        """, "The tied head weight was counted twice"),
    "count_params, requires_grad ignored": ("test_count_params", """
        def count_params(module):
            return sum(p.numel() for p in module.parameters()), 0
        """, "they are frozen"),
    "conv2d_flops, MACs": ("test_conv2d_flops", _conv2d(flops="f // 2"), "Those are MACs"),
    "conv2d_flops, dX always": ("test_conv2d_flops", _conv2d(dx="f"), "autograd computes no dX"),
    "conv2d_flops, input positions": ("test_conv2d_flops", _conv2d(out="h, w"),
                                      "the output is only 8×8"),
    "conv2d_flops, stride and padding ignored": (
        "test_conv2d_flops", _conv2d(out="h - kernel_size + 1, w - kernel_size + 1"),
        "Stride and padding were ignored"),
    "conv2d_flops, dilation ignored": ("test_conv2d_flops", _conv2d(reach="kernel_size"),
                                       "Dilation spreads the kernel"),
    "conv2d_flops, groups ignored": ("test_conv2d_flops", _conv2d(flops="f * groups"),
                                     "divide C by groups"),
    "conv2d_flops, torch's dW": ("test_conv2d_flops", _conv2d(dw="f * groups"),
                                 "That dW is what torch's FlopCounterMode reports"),
    "adam_state_bytes, no step counter": ("test_adam_state_bytes", """
        def adam_state_bytes(module):
            return sum(2 * p.numel() * p.element_size() for p in module.parameters()
                       if p.requires_grad)
        """, "a step counter per parameter tensor"),
    "adam_state_bytes, one moment": ("test_adam_state_bytes", """
        def adam_state_bytes(module):
            return sum(p.numel() * p.element_size() for p in module.parameters() if p.requires_grad)
        """, "Two moments per parameter"),
    "adam_state_bytes, elements": ("test_adam_state_bytes", """
        def adam_state_bytes(module):
            return sum(2 * p.numel() for p in module.parameters() if p.requires_grad)
        """, "Those are elements, not bytes"),
    "adam_state_bytes, one moment and a step": ("test_adam_state_bytes", """
        def adam_state_bytes(module):
            return sum(p.numel() * p.element_size() + 4 for p in module.parameters()
                       if p.requires_grad)
        """, "One moment and a step counter"),
    "adam_state_bytes, state_dict": ("test_adam_state_bytes", """
        def adam_state_bytes(module):
            return sum(2 * t.numel() * t.element_size() + 4 for t in module.state_dict().values())
        """, "The tied weight was counted twice"),
    "adam_state_bytes, frozen included": ("test_adam_state_bytes", """
        def adam_state_bytes(module):
            return sum(2 * p.numel() * p.element_size() + 4 for p in module.parameters())
        """, "Adam keeps no state for it"),
    "adam_state_bytes, 4 bytes always": ("test_adam_state_bytes", """
        def adam_state_bytes(module):
            return sum(2 * p.numel() * 4 + 4 for p in module.parameters() if p.requires_grad)
        """, "bfloat16 takes 2 bytes per element"),
    "backward_segments, nothing after the last event": (
        "test_backward_segments", _segments(stops="[e[0] for e in events[1:]] + [events[-1][0]]"),
        "wte is still open after the last event"),
    "backward_segments, until the next open": ("test_backward_segments",
                                               CORPUS["backward_segments"][0],
                                               "'Until the next open' is not the rule"),
    "backward_segments, the outermost": ("test_backward_segments",
                                         _segments(current="stack[0] if stack else None"),
                                         "The time went to the outer module"),
    "backward_segments, the last module keeps the clock": (
        "test_backward_segments", _segments(current="stack[-1] if stack else current"),
        "no module is open: that time belongs to none"),
    "backward_segments, a second open resets": ("test_backward_segments",
                                                _segments(opened="totals[name] = 0.0"),
                                                "add the segments up"),
    "device_time, no synchronisation": ("test_device_time", """
        def device_time(fn, synchronize, clock):
            start = clock()
            fn()
            return clock() - start
        """, "Synchronise before reading the clock the second time"),
    "device_time, clock after fn": ("test_device_time", """
        def device_time(fn, synchronize, clock):
            synchronize()
            fn()
            start = clock()
            synchronize()
            return clock() - start
        """, "read the clock before fn()"),
    "device_time, no synchronisation first": ("test_device_time", """
        def device_time(fn, synchronize, clock):
            start = clock()
            fn()
            synchronize()
            return clock() - start
        """, "synchronise once BEFORE reading the start time too"),
}
MISTAKES.update({name: ("07_pytorch", grade_id, answer, hint)
                 for name, (grade_id, answer, hint) in _CH07.items()})


def _wait(busy: str = "pass", wall: str = "events") -> str:
    """``input_wait_fraction`` with its busy time or its wall replaced."""
    return f"""
        def input_wait_fraction(events, lane="device"):
            if not events:
                return 0.0
            mine = sorted((e for e in events if e.lane == lane), key=lambda e: e.start)
            wall = max(e.end for e in {wall}) - min(e.start for e in {wall})
            busy, reach = 0.0, -np.inf
            for e in mine:
                start = max(e.start, reach)
                if e.end > start:
                    busy += e.end - start
                reach = max(reach, e.end)
            {busy}
            return 1.0 - busy / wall
        """


def _predicted(slow: str = "steps * (load + compute)",
               fast: str = "load + (steps - 1) * max(load / min(workers, depth), compute) + compute"
               ) -> str:
    return f"""
        def predicted_seconds(load, compute, steps, depth=0, workers=1):
            if depth == 0:
                return {slow}
            return {fast}
        """


#: The solution's Prefetcher (a thread, a bounded queue, the end and the error through it).
_PREFETCHER = """
    class Prefetcher:
        def __init__(self, source, depth=2):
            self._source = iter(source)
            self._queue = queue.Queue(maxsize=depth)
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._load, daemon=True)
            self._thread.start()

        def _put(self, item):
            while not self._stop.is_set():
                try:
                    self._queue.put(item, timeout=0.02)
                    return True
                except queue.Full:
                    pass
            return False

        def _load(self):
            try:
                for item in self._source:
                    if not self._put(("item", item)):
                        return
                self._put(("end", None))
            except Exception as error:
                self._put(("error", error))

        def __iter__(self):
            return self

        def __next__(self):
            if self._stop.is_set():
                raise StopIteration
            kind, value = self._queue.get()
            if kind == "item":
                return value
            self.close()
            if kind == "error":
                raise value
            raise StopIteration

        def close(self):
            self._stop.set()
            self._thread.join()

        def __enter__(self):
            return self

        def __exit__(self, *exc_info):
            self.close()
    """

#: ... whose put gives up when close() sets the stop flag.
_PUT = """def _put(self, item):
            while not self._stop.is_set():
                try:
                    self._queue.put(item, timeout=0.02)
                    return True
                except queue.Full:
                    pass
            return False"""
assert _PUT in _PREFETCHER
#: ... and whose loader puts each item it pulls.
_LOOP = """for item in self._source:
                    if not self._put(("item", item)):
                        return"""
assert _LOOP in _PREFETCHER

_CH09 = {
    "input_wait_fraction, durations summed": (
        "test_input_wait_fraction", _wait(busy="busy = sum(e.end - e.start for e in mine)"),
        "busy time is the union of the device's events"),
    "input_wait_fraction, the device's own wall": (
        "test_input_wait_fraction", _wait(wall="mine"), "the run's wall spans every event"),
    "input_wait_fraction, the utilization": (
        "test_input_wait_fraction", _wait(busy="return busy / wall"),
        "That is the utilization"),
    "predicted_seconds, always overlapped": (
        "test_predicted_seconds", _predicted(slow="steps * max(load, compute)"),
        "Without prefetching nothing overlaps"),
    "predicted_seconds, no fill": (
        "test_predicted_seconds",
        _predicted(fast="steps * max(load / min(workers, depth), compute)"),
        "That leaves out the fill"),
    "predicted_seconds, prefetching ignored": (
        "test_predicted_seconds", _predicted(fast="steps * (load + compute)"),
        "With a depth ≥ 1 loading overlaps computing"),
    "predicted_seconds, n steps at the pace": (
        "test_predicted_seconds",
        _predicted(fast="load + steps * max(load / min(workers, depth), compute) + compute"),
        "The fill is one load, then n − 1 steps"),
    "predicted_seconds, every worker loads at once": (
        "test_predicted_seconds",
        _predicted(fast="load + (steps - 1) * max(load / workers, compute) + compute"),
        "only min(workers, depth) load at once"),
    "predicted_seconds, the sum at the pace": (
        "test_predicted_seconds",
        _predicted(fast="load + (steps - 1) * (load / min(workers, depth) + compute) + compute"),
        "the pace is max(L, C), not L + C"),
    "predicted_seconds, workers ignored": (
        "test_predicted_seconds",
        _predicted(fast="load + (steps - 1) * max(load, compute) + compute"),
        "Here the device bounds the pace: L / min(w, d) = 15 ms < C = 20 ms"),
    "Prefetcher, loads when asked": ("test_Prefetcher", """
        class Prefetcher:
            def __init__(self, source, depth=2):
                self._source = iter(source)

            def __iter__(self):
                return self

            def __next__(self):
                return next(self._source)

            def close(self):
                pass
        """, "Your Prefetcher loads in the consumer's thread"),
    # A thread that loads, but only once __next__ asks it to: nothing is loaded ahead.
    "Prefetcher, a loader that waits to be asked": (
        "test_Prefetcher", _PREFETCHER.replace(
            "self._stop = threading.Event()",
            "self._stop = threading.Event()\n            self._wanted = threading.Semaphore(0)"
        ).replace(_LOOP, """while True:
                    while not self._wanted.acquire(timeout=0.02):
                        if self._stop.is_set():
                            return
                    try:
                        item = next(self._source)
                    except StopIteration:
                        break
                    if not self._put(("item", item)):
                        return""").replace(
            "kind, value = self._queue.get()",
            "self._wanted.release()\n            kind, value = self._queue.get()"),
        "Your loader waits to be asked"),
    "Prefetcher, an unbounded queue": (
        "test_Prefetcher", _PREFETCHER.replace("queue.Queue(maxsize=depth)", "queue.Queue()"),
        "Your loader runs ahead without bound"),
    # A last-in first-out queue hands the items out of order once two are queued.
    "Prefetcher, a LifoQueue": (
        "test_Prefetcher", _PREFETCHER.replace("queue.Queue(maxsize=depth)",
                                               "queue.LifoQueue(maxsize=depth)"),
        "every item of the source, once, in order"),
    "Prefetcher, the loader's exception swallowed": (
        "test_Prefetcher", _PREFETCHER.replace('self._put(("error", error))',
                                               'self._put(("end", None))'),
        "The loader's exception was swallowed"),
    # The error is kept aside and raised at the consumer's next call, ahead of queued items.
    "Prefetcher, the loader's exception raised at once": (
        "test_Prefetcher", _PREFETCHER.replace(
            'self._put(("error", error))',
            'self._error = error\n                self._put(("end", None))'
        ).replace("kind, value = self._queue.get()",
                  "if getattr(self, '_error', None) is not None:\n"
                  "                raise self._error\n"
                  "            kind, value = self._queue.get()"),
        "after the items it loaded before it"),
    "Prefetcher, the loader's exception wrapped": (
        "test_Prefetcher", _PREFETCHER.replace(
            "raise value", 'raise RuntimeError("the loader failed") from value'),
        "Raise the loader's own exception object"),
    # Hangs the first scenario: drive_prefetcher gives up on it after HANG_SECONDS (5 s).
    "Prefetcher, no end marker": (
        "test_Prefetcher", _PREFETCHER.replace('self._put(("end", None))', "pass"),
        "the end of the source, or the loader's error, must be put in the queue too"),
    # __next__ closes the prefetcher at the end, then the consumer does: the second close fails.
    "Prefetcher, close() fails when called twice": (
        "test_Prefetcher", _PREFETCHER.replace("self._thread.join()",
                                               "self._thread.join()\n            del self._thread"),
        "Can close() be called twice"),
    # A plain put that nothing wakes, and a join that gives up on it: the thread is left.
    "Prefetcher, close() gives up on a loader blocked on a full queue": (
        "test_Prefetcher", _PREFETCHER.replace(_PUT, """def _put(self, item):
            self._queue.put(item)
            return True""").replace("self._thread.join()", "self._thread.join(timeout=0.5)"),
        "close() must stop the loader thread and wait for it (join) before it returns"),
    # The same put with the stop flag checked between items, and close() joining for good: the
    # probe lets the loader block on the full queue before it stops, so close() hangs (5 s).
    "Prefetcher, close() joins a loader blocked on a full queue": (
        "test_Prefetcher", _PREFETCHER.replace(_PUT, """def _put(self, item):
            self._queue.put(item)
            return not self._stop.is_set()"""),
        "or close() join a thread stuck on a full queue?"),
    "train_fast, the loop as given": ("test_train_fast", """
        def train_fast(task):
            values = []
            with tp.loading.Device() as device:
                for batch in task.batches():
                    values.append(device.submit(lambda b=batch: task.step(b)).result())
            return values
        """, "The device still waits for input"),
}
MISTAKES.update({name: ("09_pipeline", grade_id, answer, hint)
                 for name, (grade_id, answer, hint) in _CH09.items()})


@lru_cache(maxsize=None)
def failure(mistake: str) -> str:
    """The message the visible tests fail with for this mistake ('' if they pass)."""
    chapter, grade_id, answer, _ = MISTAKES[mistake]
    namespace = {"np": np, "tp": tp, "expect": expect, "tracemalloc": tracemalloc,
                 "time": time, "itertools": itertools, "math": math}
    if chapter == "07_pytorch":
        pytest.importorskip("torch")
    exec(fixtures(chapter), namespace)
    exec(textwrap.dedent(answer), namespace)
    try:
        exec(visible_tests(chapter, grade_id), namespace)
    except AssertionError as error:
        return str(error)
    finally:
        if tracemalloc.is_tracing():
            tracemalloc.stop()
    return ""


#: Mistakes whose run trains chapter 10's loops or drives chapter 09's loaders (9 to 13 s each
#: on a loaded 2-core machine), and the chapters that re-run them: ``slow`` (tests/tiers.py).
SLOW = ("growth_per_step", "train_fixed", "top_growing_lines", "Prefetcher")
SLOW_CHAPTERS = ("09_pipeline", "10_leaks")


def _tiered(names, slow) -> list:
    return [pytest.param(name, marks=pytest.mark.slow) if slow(name) else name
            for name in names]


@pytest.mark.parametrize("mistake", _tiered(sorted(MISTAKES), lambda n: n.startswith(SLOW)))
def test_a_classic_mistake_gets_its_hint(mistake):
    message = failure(mistake)
    assert message, f"{mistake!r} passes the visible tests"
    assert MISTAKES[mistake][3] in message, message


@pytest.mark.parametrize("chapter", _tiered(COVERED, lambda c: c in SLOW_CHAPTERS))
def test_every_hint_is_reached_by_the_mistake_it_names(chapter):
    unreached = []
    for grade_id in graded_cells(chapter):
        messages = [failure(name) for name, (ch, gid, _, _) in MISTAKES.items()
                    if (ch, gid) == (chapter, grade_id)]
        unreached += [f"{grade_id}: {text}" for text in hints_of(visible_tests(chapter, grade_id))
                      if not any(text in message for message in messages)]
    assert not unreached, "hints that no mistake in MISTAKES reaches:\n" + "\n".join(unreached)
