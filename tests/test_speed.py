"""tinyprof.timing.speed and tinyprof.testing.expect_faster measured in this process: fresh inputs,
every output checked, the interval decides, a tier measured once."""

from __future__ import annotations

import numpy as np
import pytest

import tinyprof as tp
from tinyprof.faster import pipeline
from tinyprof.testing import ReferenceUnavailable, expect_faster
from tinyprof.timing.speed import (
    ATOL,
    MAX_CALLS,
    REQUEST_SHARE,
    RTOL,
    Sampled,
    Speedup,
    choose_calls,
    first_difference,
    measure_speedup,
)


def test_a_real_fix_is_measured_faster_with_its_interval():
    result = measure_speedup(pipeline.gelu_fast, pipeline.gelu_slow, pipeline.make_activations)
    low, high = result.ci
    assert result.rounds == 11 and 1 <= result.calls <= MAX_CALLS
    assert low <= result.speedup <= high
    # x ** 3 calls pow per element and the fast GELU multiplies, but tanh and fresh pages remain:
    # 2-3x on the course's machine, whose interval's lower end fell to 2.00 under load. The
    # chapter grades this fix at 1.25x (book/instructors.md); the bound is that tier.
    assert low > 1.25, result
    assert "tinyprof.faster.pipeline.gelu_slow" in result.describe()


def test_a_function_against_itself_is_about_one():
    result = measure_speedup(pipeline.gelu_slow, pipeline.gelu_slow, pipeline.make_activations)
    assert 0.5 < result.speedup < 2, result


def test_a_wrong_output_names_the_call_and_the_first_differing_element():
    def skips_the_bias(h):
        y, dy = pipeline.gelu_fast(h)
        y[0, 3] += 1.0
        return y, dy

    with pytest.raises(AssertionError, match=r"call 1 \(fresh inputs\): output\[0\]\[0, 3\] is "):
        measure_speedup(skips_the_bias, pipeline.gelu_slow, pipeline.make_activations)


def test_a_remembered_output_is_wrong_on_the_next_inputs():
    remembered = {}

    def remembers(h):
        if "y" not in remembered:
            remembered["y"] = pipeline.gelu_fast(h)
        return remembered["y"]

    with pytest.raises(AssertionError, match=r"call 2 \(fresh inputs\)"):
        measure_speedup(remembers, pipeline.gelu_slow, pipeline.make_activations)


def test_first_difference_reads_structures_shapes_and_samples():
    want = (1.5, {"W": np.arange(6.0).reshape(2, 3)})
    assert first_difference((1.5, {"W": np.arange(6.0).reshape(2, 3)}), want) is None
    assert "output[0]" in first_difference((1.6, want[1]), want)
    assert "keys ['W']" in first_difference((1.5, {"V": 0}), want)
    assert "shape (2, 3), got (3, 2)" in first_difference((1.5, {"W": np.zeros((3, 2))}), want)
    sampled = Sampled((2, 3), (5, 1), np.array([5.0, 1.0]))
    assert first_difference(Sampled((2, 3), (5, 1), np.array([5.0, 1.0])), sampled) is None
    message = first_difference(Sampled((2, 3), (5, 1), np.array([5.0, 9.0])), sampled)
    assert message.startswith("output[0, 1] is 9 where the baseline gives 1"), message


def _read(value: np.ndarray, seed: int, fractions: list[float]) -> Sampled:
    """``value`` as the grader reads it back from a kernel (tinyprof.remote's pick request)."""
    from tinyprof.remote import OutputReader  # the kernel's own reader, run here

    _, _, shape, values, sketch, l1, l2 = OutputReader(fractions, seed, 2).read(value)
    positions = tuple(int(u * value.size) for u in fractions)
    return Sampled(shape, positions, np.array(values), np.array(sketch), l1, l2)


def test_every_element_enters_the_sketch_and_honest_rounding_stays_within_its_bound():
    """An output within tolerance everywhere (even at its edge, every sign against it) passes;
    one element wrong among thousands that were not sampled fails, named by the sketch; the
    bound follows from rtol and atol (Hoeffding), not from the data."""
    rng = np.random.default_rng(0)
    fractions = rng.random(16).tolist()
    for _ in range(50):
        want = rng.standard_normal((128, 96))
        seed = int(rng.integers(0, 2**62))
        baseline = _read(want, seed, fractions)
        edge = want + 0.999 * (ATOL + RTOL * np.abs(want)) * np.sign(
            rng.standard_normal(want.shape))
        assert first_difference(_read(edge, seed, fractions), baseline) is None
        assert first_difference(_read(want.astype(np.float32), seed, fractions),
                                baseline) is None
        wrong = want.copy()
        unsampled = next(i for i in range(want.size)
                         if i not in baseline.positions)
        wrong.reshape(-1)[unsampled] += 0.5
        message = first_difference(_read(wrong, seed, fractions), baseline)
        assert message and "outside the elements read back one by one" in message, message
    # left uncomputed (zeros) but for the sampled elements: far outside the bound
    lazy = np.zeros_like(want)
    lazy.reshape(-1)[list(baseline.positions)] = want.reshape(-1)[list(baseline.positions)]
    assert "a sum of all its 12,288 elements" in first_difference(_read(lazy, seed, fractions),
                                                                  baseline)


def test_a_baselines_nan_is_matched_by_nan_only():
    fractions = [0.0, 0.5]
    want = np.arange(12.0)
    want[7] = np.nan
    assert first_difference(_read(want, 3, fractions), _read(want, 3, fractions)) is None
    finite = want.copy()
    finite[7] = 1.0
    assert "outside the elements" in first_difference(_read(finite, 3, fractions),
                                                      _read(want, 3, fractions))


def test_calls_per_block_are_chosen_from_the_baseline_alone():
    """The candidate's own time never enters: a candidate that made its chosen call slow would
    otherwise get one call a block, and each request's saving would become a per-call one."""
    assert choose_calls(0.01, 11) == 10                   # 100 ms of baseline
    assert choose_calls(0.01, 11, request_seconds=0.004) == 20   # handling ≤ 2 % of the block
    assert choose_calls(0.07, 11) == 2                    # 11 × 2 × 70 ms ≤ 5 s of baseline
    assert choose_calls(1e-7, 11) == MAX_CALLS            # at most MAX_CALLS
    assert choose_calls(2.0, 11) == 1                     # a slow baseline: one call a block
    assert choose_calls(0.01, 11, request_seconds=0.003) * 0.01 * REQUEST_SHARE >= 0.003


def students_gelu(h):
    """A student's fix of the GELU: the cube as multiplies (code of the student's, so that the
    switch lets it run)."""
    c = float(np.sqrt(2 / np.pi))
    t = np.tanh(c * (h + 0.044715 * h * h * h))
    return 0.5 * h * (1 + t), 0.5 * (1 + t) + 0.5 * h * (1 - t * t) * c * (1 + 0.134145 * h * h)


def test_expect_faster_passes_a_tier_and_fails_the_next_with_one_measurement(capsys):
    first = expect_faster(students_gelu, pipeline.gelu_slow, pipeline.make_activations,
                          at_least=1.5)
    assert "Tier 1.5×: reached" in capsys.readouterr().out
    impossible = first.ci[0] * 10
    with pytest.raises(AssertionError, match=f"not {impossible:g}× faster"):
        expect_faster(students_gelu, pipeline.gelu_slow, pipeline.make_activations,
                      at_least=impossible)
    again = expect_faster(students_gelu, pipeline.gelu_slow, pipeline.make_activations,
                          at_least=1.5)
    assert again is first   # the tiers share one measurement


def test_expect_faster_refuses_a_candidate_that_calls_tinyprof():
    def delegates(weights, batch):
        return tp.faster.fast_step(weights, batch)

    with pytest.raises(ReferenceUnavailable, match="tinyprof.faster.fast_step"):
        expect_faster(delegates, pipeline.slow_step, pipeline.make_inputs, at_least=1.0)


def test_too_few_rounds_are_refused():
    with pytest.raises(ValueError, match="rounds must be ≥ 9"):
        measure_speedup(pipeline.gelu_fast, pipeline.gelu_slow, pipeline.make_activations,
                        rounds=3)


def test_a_speedup_record_is_plain_data():
    result = Speedup("base", (2.0,) * 9, (1.0,) * 9, 4, "a clock")
    assert result.speedup == 2.0 and result.ci == (2.0, 2.0)
    assert result.record() == {"speedup": 2.0, "ci": [2.0, 2.0], "rounds": 9, "calls": 4,
                               "method": "a clock", "baseline": "base"}
    assert result.reaches(2.0) and not result.reaches(2.01)


def _round_times(candidate_block, candidate_rest, baseline_block, baseline_rest,
                 candidate_pick=0.010, baseline_pick=0.010):
    return {"candidate": {"block": candidate_block, "make": 0.010, "pick": candidate_pick,
                          "other": candidate_rest},
            "baseline": {"block": baseline_block, "make": 0.010, "pick": baseline_pick,
                         "other": baseline_rest}}


def test_the_grader_charges_blocks_less_the_request_and_the_median_excess_of_the_rest():
    """autograder.run.speed.charged: a block less the clean kernel's empty request (the tare), and
    the candidate the median over rounds of its rest's excess over the clean kernel's, so that
    noise either way biases nothing while work moved out of most blocks is still charged."""
    from autograder.run.speed import MIN_SECONDS, charged

    noisy = [_round_times(0.020, 0.030 + d, 0.400, 0.030) for d in (-0.004, 0.004, -0.002,
                                                                     0.003, 0.0)]
    assert charged(noisy, "candidate", 0.004) == pytest.approx([0.016] * 5)
    assert charged(noisy, "baseline", 0.004) == pytest.approx([0.396] * 5)
    moved = [_round_times(0.001, 0.030 + work, 0.400, 0.030) for work in (0.019, 0.019, 0.0)]
    assert charged(moved, "candidate", 0.0) == pytest.approx([0.020, 0.020, 0.020])
    assert charged([_round_times(0.003, 0.0, 0.5, 0.0)], "candidate", 0.004) == [MIN_SECONDS]


def test_a_cheaper_request_in_one_part_never_pays_for_work_in_another():
    """Issue 45: a kernel that handles the grader's requests 3 ms cheaper (its make and the
    rest) while a thread finishes its outputs during the read-back (3 ms more there) is charged
    the read-back's 3 ms: each part's excess on its own, a saving credited nowhere."""
    from autograder.run.speed import charged

    saved = [_round_times(0.010, 0.027, 0.020, 0.030, candidate_pick=0.013)
             for _ in range(5)]
    assert charged(saved, "candidate", 0.002) == pytest.approx([0.011] * 5)


def test_work_moved_to_another_part_in_each_round_is_charged_in_every_round():
    """Issue 45's red team: half a slow GELU's work moved to the make in some rounds, the
    read-back in others and the rest in the others moves no part's median; the median of each
    round's summed excess charges it."""
    from autograder.run.speed import charged

    work = 0.019
    rounds = []
    for where in ("make", "pick", "other", "make", "pick"):
        times = _round_times(0.001, 0.030, 0.400, 0.030)
        times["candidate"][where] += work
        rounds.append(times)
    assert charged(rounds, "candidate", 0.0) == pytest.approx([0.001 + work] * 5)


def test_the_speed_test_and_ab_tests_speed_test_blocks_are_one_rule():
    """Issue 46: ``tp.ab_test(..., blocks="speed test", make_inputs=...)`` makes its blocks with
    the speed test's own code (tinyprof.timing.blocks): the same fresh inputs in the same order,
    the same calls a block for both sides, and the page faults a call counted on each side."""
    seen = {"speed test": [], "ab_test": []}

    def maker(key):
        def make(seed):
            seen[key].append(seed)
            return pipeline.make_activations(seed, size=32)
        return make

    speed = measure_speedup(pipeline.gelu_fast, pipeline.gelu_slow, maker("speed test"),
                            rounds=9, calls=4)
    ab = tp.ab_test(pipeline.gelu_slow, pipeline.gelu_fast, make_inputs=maker("ab_test"),
                    blocks="speed test", rounds=9, loops=4, warmup=1, clock="cpu")
    assert seen["ab_test"][1:] == seen["speed test"], seen   # its first: where inputs live
    assert speed.calls == ab.baseline.loops == ab.candidate.loops == 4
    assert all(isinstance(f, float) for f in (*speed.faults, *ab.faults)), (speed.faults,
                                                                            ab.faults)
    assert (f"{speed.faults[0]:,.0f} and {speed.faults[1]:,.0f} page faults a call, every "
            "output kept") in speed.describe()
    assert ab.blocks == "speed test" and ab.fresh_inputs


def test_the_measurement_expect_faster_made_is_handed_out_as_it_is(capsys):
    """Chapter 08 prints the speed test's own measurement beside an A/B (issue 46): the same
    object expect_faster measured for the same three functions, None for any other, and as an
    ABResult with the same interval (the same samples and bootstrap)."""
    from tinyprof.testing.handoff import speed_measured

    def gelu_by_multiplying(h):   # the student's own code (the switch refuses tinyprof's)
        c = float(np.sqrt(2 / np.pi))
        t = np.tanh(c * (h + 0.044715 * (h * h * h)))
        return 0.5 * h * (1 + t), 0.5 * (1 + t) + 0.5 * h * (1 - t * t) * c * (1 + 0.134145 * h * h)

    assert speed_measured(gelu_by_multiplying, pipeline.gelu_slow,
                          pipeline.make_activations) is None
    measured = expect_faster(gelu_by_multiplying, pipeline.gelu_slow, pipeline.make_activations,
                             at_least=1.0)
    assert speed_measured(gelu_by_multiplying, pipeline.gelu_slow,
                          pipeline.make_activations) is measured
    def same_code_another_function(h):   # the key is the function itself, not its code
        return gelu_by_multiplying(h)

    assert speed_measured(same_code_another_function, pipeline.gelu_slow,
                          pipeline.make_activations) is None
    result = measured.as_ab_result("gelu_by_multiplying")
    assert result.ci == measured.ci and result.speedup == pytest.approx(measured.speedup)
    assert (result.blocks, result.fresh_inputs, result.clock) == ("speed test", True, "cpu")
    assert result.faults == measured.faults and result.baseline.loops == measured.calls
    assert result.baseline.name == "gelu_slow"
