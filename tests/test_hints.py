"""The visible tests name the classic mistakes: each wrong answer below runs against the real
visible part of its test cell (the cell as in solutions/, up to the hidden tests) and must fail
with the hint that explains it (issue 14)."""

from __future__ import annotations

import json
import textwrap
import tracemalloc

import numpy as np
import pytest
from chapters import SOLUTIONS

import tinyprof as tp
from tinyprof.testing import expect


def visible_tests(chapter: str, grade_id: str) -> str:
    (path,) = (SOLUTIONS / chapter).glob("*.ipynb")
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == grade_id:
            source = "".join(cell["source"])
            return source.split("### BEGIN HIDDEN TESTS")[0]
    raise LookupError(f"{chapter} has no cell {grade_id}")


def chapter_helpers(chapter: str) -> str:
    """The imports, functions and classes of a chapter's read-only cells (such as chapter 03's
    ``someone_elses_trace``), which its test cells may use."""
    import ast

    (path,) = (SOLUTIONS / chapter).glob("*.ipynb")
    kept = []
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "code" or cell["metadata"].get("nbgrader", {}).get("grade") \
                or cell["metadata"].get("nbgrader", {}).get("solution"):
            continue
        try:
            tree = ast.parse("".join(cell["source"]))
        except SyntaxError:
            continue
        kept += [ast.unparse(node) for node in tree.body if isinstance(
            node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef))]
    return "\n".join(kept)


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
}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_a_classic_mistake_gets_its_hint(mistake):
    chapter, grade_id, answer, hint = MISTAKES[mistake]
    namespace = {"np": np, "tp": tp, "expect": expect, "tracemalloc": tracemalloc}
    exec(chapter_helpers(chapter), namespace)
    exec(textwrap.dedent(answer), namespace)
    try:
        with pytest.raises(AssertionError) as failure:
            exec(visible_tests(chapter, grade_id), namespace)
        assert hint in str(failure.value)
    finally:
        if tracemalloc.is_tracing():
            tracemalloc.stop()
