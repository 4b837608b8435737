"""Every script in benchmarks/ still runs: each one's ``--quick`` setting completes and prints
the ratios it exists to print (issue 22: a benchmark that nothing runs rots unnoticed, as
bench_timing.py did). The numbers themselves are not judged here: a quick run on a shared
machine is too short for that, and speed targets are read from the full runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
NUMBER = r"[-+]?[\d,]*\.?\d+"

#: Script → what its quick run must print (a ratio, or the counts it reports), as regexes.
PRINTS = {
    "bench_abtest.py": [r"A/A \(false positives\) +\d+/3",
                        rf"100,000 samples a side: +{NUMBER} ms"],
    "bench_block_policy.py": [rf"the speed test's way, 28 calls / 2: speedup {NUMBER}×; "
                              rf"candidate faults a call {NUMBER} vs {NUMBER}",
                              rf"keeps what is freed +fresh, kept \(speed test\) at 2: "
                              rf"{NUMBER}× \[{NUMBER}, {NUMBER}\], {NUMBER}"],
    "bench_check_cost.py": [rf"10_leaks +{NUMBER} +{NUMBER} +{NUMBER}× +\d+/\d+ \d+/\d+"],
    "bench_cohort_report.py": [rf"cohort report of 30 students: {NUMBER} s",
                               rf"{NUMBER} pairs compared\): {NUMBER} s"],
    "bench_chapters.py": [rf"01_parameters +{NUMBER} +\d+% +\d+ +\d+ +\d+ +\d+ +\d+% +\d+%"],
    "bench_cli_startup.py": [rf"import tinyprof / import numpy, median of the 2 per-round "
                             rf"ratios: {NUMBER}"],
    "bench_dask.py": [rf"Dask, 2 workers \(tcp\) +{NUMBER} s .* overhead +{NUMBER} %",
                      r"grades\.csv the same every way \(but for its worker column\): True"],
    "bench_execution_stall.py": [rf"01_parameters +1 +{NUMBER} +{NUMBER} +{NUMBER}× +0 +ok"],
    "bench_fast_step_tiers.py": [rf"every fix \(red team's float32\) +speedups {NUMBER}–{NUMBER}×, "
                                 rf"lowest lower end {NUMBER}×"],
    "bench_flops_shape_only.py": [rf"float32 weights / peak\(build\+count\) = {NUMBER}×"],
    "bench_grading.py": [rf"kernel-life ratio, sandboxed / bare: {NUMBER}×",
                         rf"kernel in the sandbox {NUMBER} s: {NUMBER}× bare"],
    "bench_latency_stats.py": [rf"= {NUMBER}× the \.ci",
                               rf"\({NUMBER}× samples \+ warm-up\)"],
    "bench_loader_workers.py": [rf"serial / 2 threads: {NUMBER}× \(goal < 1\.35: (met|not met)\); "
                                rf"serial / 2 processes: {NUMBER}×"],
    "bench_memory_components.py": [rf"largest deviation from 1: {NUMBER}%"],
    "bench_profiler.py": [rf"profiled / bare step time \(median of pairs\): {NUMBER}",
                          rf"coverage, Σ self time / wall time \(median\): +{NUMBER}"],
    "bench_reference_hook.py": [rf"percentile( +{NUMBER} µs){{3}} +{NUMBER}× +{NUMBER}×",
                                rf"python calls( +{NUMBER} µs){{3}} +{NUMBER}× +{NUMBER}×"],
    "bench_regression.py": [r"\+20 %: detected \(regressed\) +\d/1",
                            r"saved with rounds=5 +exit 2", r"samples edited to 3x faster +exit 2"],
    "bench_roofline.py": [rf"median compute roof / best numpy matmul: +{NUMBER}",
                          rf"median memory roof / STREAM on 256 MiB arrays: {NUMBER}"],
    "bench_socket_memory.py": [rf"(unix_stream +{NUMBER} MB( +{NUMBER}){{3}} +{NUMBER} MB "
                               rf"+{NUMBER}|no writable control groups here)"],
    "bench_solution_stability.py": [r"10_leaks +autograded points, quiet: [\d.]+/[\d.]+ \("
                                    + NUMBER + r" s\); busy: [\d.]+/[\d.]+ \(" + NUMBER + r" s\)",
                                    r"at full autograded marks: (yes|NO)"],
    "bench_speed_grading.py": [rf"by the grader \(CPU time, outside the kernel\) vs {NUMBER}× "
                               rf"by tp\.ab_test in the kernel, called as a student calls it: "
                               rf"{NUMBER}%",
                               rf"grading chapter 08's solution: {NUMBER} s a notebook"],
    "bench_stream_sizes.py": [rf"64 MiB( +{NUMBER}){{7}}"],
    "bench_torch_profiler.py": [rf"tinyprof +{NUMBER}% +\[ *{NUMBER}%, +{NUMBER}%\] +{NUMBER}%",
                                rf"torch\.profiler +{NUMBER}% +\[ *{NUMBER}%, +{NUMBER}%\] +"
                                rf"{NUMBER}%", r"goal for tinyprof: .*: (met|not met)"],
    "bench_timing.py": [rf"median ratio tinyprof/timeit: {NUMBER}",
                        r"lambda: None +'unstable' \d/2"],
}

#: Quick runs that grade real notebooks (chapter 08's with its five speed tests, a Dask cohort)
#: get longer before they count as hung: on a 2-core machine shared with the other test worker
#: and other programs both took over 180 s (bench_speed_grading.py alone on a quiet machine:
#: 126 s).
TIMEOUTS = {"bench_speed_grading.py": 420, "bench_dask.py": 420,
            "bench_check_cost.py": 420}


def test_every_benchmark_has_a_quick_run_checked_here():
    scripts = sorted(p.name for p in BENCHMARKS.glob("*.py"))
    assert scripts == sorted(PRINTS), (
        f"benchmarks without a check here: {sorted(set(scripts) - set(PRINTS))}; "
        f"checked but gone: {sorted(set(PRINTS) - set(scripts))}")
    for name in scripts:
        assert "--quick" in (BENCHMARKS / name).read_text(encoding="utf-8"), name


#: Quick runs that start kernels, bubblewrap or a Dask cohort (tests/tiers.py). Every quick
#: run is a process of its own that takes seconds (bench_check_cost.py: 166 s on a loaded
#: machine), so all are ``slow``: ``make test-fast`` leaves them to ``make test``.
GRADING = [pytest.mark.kernel, pytest.mark.sandbox]
TIERS = {"bench_chapters.py": [pytest.mark.kernel],
         "bench_cohort_report.py": [*GRADING, pytest.mark.cohort],
         "bench_dask.py": [*GRADING, pytest.mark.cohort],
         "bench_execution_stall.py": [pytest.mark.kernel], "bench_grading.py": GRADING,
         "bench_socket_memory.py": [pytest.mark.sandbox], "bench_speed_grading.py": GRADING}


@pytest.mark.slow
@pytest.mark.parametrize("script", [pytest.param(name, marks=TIERS.get(name, ()))
                                    for name in sorted(PRINTS)])
def test_quick_run_completes_and_prints_its_ratios(script):
    done = subprocess.run([sys.executable, str(BENCHMARKS / script), "--quick"],
                          capture_output=True, text=True, timeout=TIMEOUTS.get(script, 180))
    assert done.returncode == 0, f"{script} --quick failed:\n{done.stderr[-3000:]}"
    missing = [pattern for pattern in PRINTS[script] if not re.search(pattern, done.stdout)]
    assert not missing, f"{script} --quick did not print {missing}:\n{done.stdout[-3000:]}"
