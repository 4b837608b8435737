"""The measured roofline: its arithmetic, the compute/memory/overhead classification on synthetic
timings, the cache sizes read from sysfs, and a real measurement that stays out of the caller's
memory."""

import resource

import pytest

from tinyprof.roofline import (
    STREAM_BYTES_PER_ELEMENT,
    CacheLevel,
    MachinePeaks,
    cache_levels,
    machine_peaks,
    stream_array_bytes,
)

PEAKS = MachinePeaks(flops_per_second=100e9, bytes_per_second=20e9, call_overhead_s=1e-6)


def test_roof_seconds_is_the_slower_of_the_two_roofs():
    assert PEAKS.roof_seconds(flops=2e9, nbytes=1e6) == pytest.approx(0.02)   # 2e9 / 100e9
    assert PEAKS.roof_seconds(flops=1e6, nbytes=4e8) == pytest.approx(0.02)   # 4e8 / 20e9


@pytest.mark.parametrize("flops, nbytes, seconds, calls, want", [
    # a 1024³ matmul at 80 % of the compute roof: intensity 2e9 / 12.6e6 ≈ 171 FLOPs/byte
    (2 * 1024**3, 12_582_912, 2 * 1024**3 / 80e9, 1, "compute"),
    # ReLU over 16 M floats: 16 M comparisons, 128 MB read + written, near the bandwidth roof
    (16 * 2**20, 128 * 2**20, 128 * 2**20 / 18e9, 1, "memory"),
    # Linear(4, 4) on one row: 32 FLOPs, 5 µs for what the roofline allows in nanoseconds
    (32, 144, 5e-6, 1, "overhead"),
    # ten tiny calls of 4 µs each: still overhead per call
    (320, 1440, 40e-6, 10, "overhead"),
    # slow but not tiny (1 ms per call): the intensity decides, not the per-call cost
    (1_000, 1_000, 1e-3, 1, "memory"),
    # no bytes at all (pure arithmetic, already in registers): compute
    (10**9, 0, 0.02, 1, "compute"),
])
def test_classify_on_synthetic_timings(flops, nbytes, seconds, calls, want):
    assert PEAKS.classify(flops, nbytes, seconds, calls) == want


def test_classify_refuses_impossible_timings():
    with pytest.raises(ValueError, match="classify: seconds must be a finite number > 0"):
        PEAKS.classify(1, 1, 0.0)
    with pytest.raises(ValueError, match="classify: calls must be an integer ≥ 1"):
        PEAKS.classify(1, 1, 1.0, calls=0)


@pytest.mark.parametrize("call, message", [
    (lambda: PEAKS.attainable(-1), "intensity \\(FLOPs per byte\\) must be ≥ 0, got -1.0"),
    (lambda: PEAKS.attainable(float("nan")), "must be ≥ 0, got nan"),
    (lambda: PEAKS.bound(-0.5), "bound: intensity"),
    (lambda: PEAKS.classify(-5, 10, 1e-3), "classify: flops must be a finite number ≥ 0"),
    (lambda: PEAKS.classify(5, -10, 1e-3), "classify: bytes must be a finite number ≥ 0"),
    (lambda: PEAKS.classify(5, 10, float("nan")), "classify: seconds"),
    (lambda: PEAKS.roof_seconds(float("inf"), 1), "roof_seconds: flops"),
    (lambda: MachinePeaks(0, 0), "MachinePeaks: flops_per_second must be a finite number > 0"),
    (lambda: MachinePeaks(1e9, float("nan")), "MachinePeaks: bytes_per_second"),
])
def test_machine_peaks_refuse_what_has_no_roofline(call, message):
    """The methods refuse what the free functions refuse: negative or NaN intensities, FLOPs
    and bytes, and roofs of zero (a ridge point divided by zero)."""
    with pytest.raises(ValueError, match=message):
        call()


def test_machine_peaks_right_answers_at_the_edges():
    assert PEAKS.attainable(0) == 0.0
    assert PEAKS.attainable(float("inf")) == PEAKS.flops_per_second   # no bytes at all
    assert PEAKS.attainable(PEAKS.ridge_intensity) == PEAKS.flops_per_second
    assert PEAKS.classify(10, 0, 1.0) == "compute"


def test_cache_levels_from_sysfs(tmp_path):
    for index, (level, kind, size, shared) in enumerate([
            (1, "Data", "32K", "0"), (1, "Instruction", "32K", "0"),
            (2, "Unified", "512K", "0"), (3, "Unified", "32768K", "0-1,4-5")]):
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        for name, text in (("level", level), ("type", kind), ("size", size),
                           ("shared_cpu_list", shared)):
            (folder / name).write_text(f"{text}\n")
    assert cache_levels(tmp_path) == (CacheLevel(1, 32 * 1024, 1), CacheLevel(2, 512 * 1024, 1),
                                      CacheLevel(3, 32 * 2**20, 4))
    assert cache_levels(tmp_path / "missing") == ()


def test_a_cache_larger_than_any_real_share_per_cpu_is_trusted_only_up_to_it(tmp_path):
    """A 2-CPU virtual machine reporting its host's 480 MiB L3: 16 MiB per CPU is trusted."""
    folder = tmp_path / "index3"
    folder.mkdir()
    for name, text in (("level", 3), ("type", "Unified"), ("size", "491520K"),
                       ("shared_cpu_list", "0-1")):
        (folder / name).write_text(f"{text}\n")
    (l3,) = cache_levels(tmp_path)
    assert l3 == CacheLevel(3, 32 * 2**20, 2, reported_bytes=480 * 2**20)
    assert str(l3) == "L3 33.6 MB" and "the OS reports 503.3 MB shared by 2 CPUs" in l3.describe()
    assert stream_array_bytes((l3,)) == 128 * 2**20


@pytest.mark.parametrize("llc_mib, want_mib", [(0, 64), (8, 64), (24, 96), (32, 128), (512, 128)])
def test_stream_arrays_are_4x_the_last_level_cache_within_bounds(llc_mib, want_mib):
    levels = (CacheLevel(3, llc_mib * 2**20),) if llc_mib else ()
    assert stream_array_bytes(levels) == want_mib * 2**20


def test_stream_bytes_convention():
    # copy and scale read one array and write one; add reads two and writes one; numpy's triad
    # is two passes (y = s·y, then y += x): 16 + 24 bytes per float64 element
    assert STREAM_BYTES_PER_ELEMENT == {"copy": 16, "scale": 16, "add": 24, "triad": 40}


@pytest.mark.slow
def test_machine_peaks_measured_in_a_child_and_cached():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peaks = machine_peaks()
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert peaks is machine_peaks()
    # two STREAM arrays of 64 to 128 MiB each lived in the child, never here
    assert 64 * 2**20 <= peaks.array_bytes <= 128 * 2**20 and grown_kib < 64 * 1024
    assert set(peaks.stream) == set(STREAM_BYTES_PER_ELEMENT)
    assert peaks.bytes_per_second == max(peaks.stream.values())
    assert peaks.matmul_size in (256, 512, 1024, 2048)
    assert 1e8 < peaks.flops_per_second < 1e14 and 1e8 < peaks.bytes_per_second < 1e13
    assert 0 < peaks.call_overhead_s < 1e-4
    assert "BLAS" in peaks.context and "BLAS" in str(peaks)


@pytest.mark.slow
def test_the_roofline_child_fits_a_chapter_memory_budget():
    """Chapter 05's kernel (about 0.2 GB) plus this child must stay under 0.7 GB: the child's
    peak, read by a fresh process that waited for nothing else, is under 0.4 GB."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", (
        "import json, resource\n"
        "from tinyprof.roofline import measure_in_child\n"
        "peaks = measure_in_child()\n"
        "print(json.dumps([peaks.array_bytes, "
        "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024]))")],
        capture_output=True, text=True, check=True)
    array_bytes, child_peak = json.loads(done.stdout)
    assert child_peak < 400e6, f"the roofline child peaked at {child_peak / 1e6:.0f} MB"
    assert child_peak > 2 * array_bytes   # its two arrays were really there
