"""The regression check: drift corrected by the probe, a noise band from the A/A rows, a flagged
variant re-measured before it is called ("unstable" when the two disagree), never a slowdown
called an improvement, and every baseline that cannot be judged refused with its file named
(the command line exits 2)."""

import dataclasses
import json

import numpy as np
import pytest

import tinyprof as tp
from tinyprof import models
from tinyprof.abtest import ABResult
from tinyprof.regression import MIN_SAMPLES, check_regression, main
from tinyprof.suite import SuiteResult, VariantResult
from tinyprof.timing import LatencyStats


def _variant(name, ms, probe_ms=None, reference_ms=None):
    latency = LatencyStats.from_samples(np.asarray(ms) / 1e3, name=name)
    probe = None if probe_ms is None else LatencyStats.from_samples(np.asarray(probe_ms) / 1e3)
    comparison = None
    if reference_ms is not None:
        comparison = ABResult.from_samples(
            LatencyStats.from_samples(np.asarray(reference_ms) / 1e3, name=name), latency)
    return VariantResult(name, latency, 450, 1000, 100, 0.9, comparison, probe)


def _noise(seed, n=20, scale=1.0, spread=0.02):
    return scale * np.random.default_rng(seed).lognormal(0, spread, n)


@pytest.fixture
def model_and_data():
    """An MLP on 32 rows: every matmul is small enough (M·N·K ≤ 262,144) for OpenBLAS to run it
    on one thread, so a busy machine cannot stall it waiting for a second BLAS thread."""
    model = models.mlp((64, 128, 64, 10))
    x = np.random.default_rng(0).standard_normal((32, 64)).astype(np.float32)
    y = np.random.default_rng(1).integers(0, 10, 32)
    return model, (x, y)


def test_a_busier_machine_is_not_a_regression(tmp_path):
    """Variant and probe both 30 % slower: the raw medians moved, the per-round ratio did not."""
    then = SuiteResult((_variant("m", _noise(1), _noise(2, scale=0.1), _noise(3)),), "m", {})
    path = then.save(tmp_path / "baseline.json")
    busier = SuiteResult((_variant("m", _noise(4, scale=1.3), _noise(5, scale=0.13),
                                   _noise(6, scale=1.3)),), "m", {})
    report = check_regression(busier, path)
    check = report.checks[0]
    assert check.status == "unchanged" and report.ok
    assert check.raw_change == pytest.approx(0.3, abs=0.03)
    assert abs(check.change) < 0.03 and check.change == check.corrected.change
    assert any("the probe ran +30%" in w for w in report.warnings)


def test_a_slower_variant_on_the_same_machine_is_called_without_re_measuring(tmp_path):
    then = SuiteResult((_variant("m", _noise(1), _noise(2, scale=0.1), _noise(3)),), "m", {})
    path = then.save(tmp_path / "baseline.json")
    slower = SuiteResult((_variant("m", _noise(4, scale=1.2), _noise(5, scale=0.1),
                                   _noise(6, scale=1.2)),), "m", {})
    report = check_regression(slower, path)
    check = report.checks[0]
    assert report.regressed == ["m"] and not report.ok
    assert check.corrected.change == pytest.approx(0.2, abs=0.03)
    assert check.corrected.ci[0] > 0.05 and check.remeasured is None
    assert "not re-measured" in check.note and "a suite loaded from a file" in check.note
    assert "REGRESSION: m" in str(report)


def test_a_slowdown_is_never_called_an_improvement(tmp_path):
    """Raw time 10 % slower while the probe ran 40 % slower: against the probe the variant
    looks faster, in raw time slower; the check gives no verdict rather than "improved"."""
    then = SuiteResult((_variant("m", _noise(1), _noise(2, scale=0.1), _noise(3)),), "m", {})
    path = then.save(tmp_path / "baseline.json")
    now = SuiteResult((_variant("m", _noise(4, scale=1.1), _noise(5, scale=0.14),
                                _noise(6, scale=1.1)),), "m", {})
    check = check_regression(now, path).checks[0]
    assert check.corrected.direction == "faster" and check.raw_change > 0.05
    assert check.status == "unstable" and "in raw time" in check.note


def test_the_a_a_rows_widen_the_noise_band(tmp_path):
    """The baseline's A/A row (its two interleaved copies of itself) landed 12 % apart: a 10 %
    change is then not called either way; beyond the 5 % tolerance, it is not "unchanged"
    either, but unstable, and the report says why."""
    then = SuiteResult((_variant("m", _noise(1, scale=1.12), _noise(2, scale=0.1),
                                 _noise(3)),), "m", {})
    path = then.save(tmp_path / "baseline.json")
    now = SuiteResult((_variant("m", _noise(4, scale=1.12 * 1.1), _noise(5, scale=0.1),
                                _noise(6, scale=1.12 * 1.1)),), "m", {})
    report = check_regression(now, path, tolerance=0.05)
    assert report.band == pytest.approx(0.12, abs=0.02)
    check = report.checks[0]
    assert check.status == "unstable" and report.ok and report.unstable == ["m"]
    assert "beyond the ±5% tolerance, but its interval reaches into the ±1" in check.note
    assert any("A/A rows" in w for w in report.warnings)
    assert "noise band ±1" in str(report)


def test_a_flagged_variant_is_re_measured_and_confirmed(tmp_path, model_and_data):
    model, data = model_and_data

    def three_times(x):
        model(x)
        model(x)
        return model(x)

    path = tp.benchmark_suite({"m": model}, data, rounds=20).save(tmp_path / "baseline.json")
    now = tp.benchmark_suite({"m": three_times}, data, rounds=20)
    report = check_regression(now, path)
    check = report.checks[0]
    assert check.status == "regressed" and check.remeasured is not None, str(report)
    assert check.remeasured.rounds == 60
    assert 1.0 < check.change < 3.0       # about +200 %: three forward passes for one
    assert "re-measured in 60 rounds" in check.note


def test_a_change_that_vanishes_when_re_measured_is_unstable(tmp_path, model_and_data):
    """The first measurement ran a model three times slower; the re-measurement, as a machine
    that drifted back would, finds the baseline's speed: no verdict either way.

    The re-measurement times the baseline's own model against a baseline measured seconds
    earlier; on a machine as busy as a CI runner that also grades sandboxed cohorts, the two
    can differ by more than the 5 % band in one try in a few dozen (which is the drift this
    status exists for), or the re-measurement can land beyond the band the other way (also no
    verdict, "opposite directions", but not this scenario). So the scenario gets three tries to
    be the one it describes; a checker that calls a regression here every time fails all
    three."""
    model, data = model_and_data
    for _ in range(3):
        path = tp.benchmark_suite({"m": model}, data, rounds=20).save(tmp_path / "baseline.json")
        now = tp.benchmark_suite({"m": lambda x: [model(x) for _ in range(3)][-1]}, data,
                                 rounds=20)
        drifted_back = dataclasses.replace(now, sources=dataclasses.replace(
            now.sources, models={"m": model}))
        report = check_regression(drifted_back, path)
        check = report.checks[0]
        if check.status == "unstable" and "drifted" in check.note:
            break
    assert check.status == "unstable" and report.unstable == ["m"] and report.ok, str(report)
    assert check.corrected.direction == "slower" and check.remeasured.direction != "slower"
    assert "drifted" in check.note and "NO VERDICT for m" in str(report)


def test_too_few_samples_are_refused_never_ok(tmp_path, capsys):
    few = SuiteResult((_variant("m", _noise(1, n=5), _noise(2, n=5, scale=0.1)),), "m", {})
    path = few.save(tmp_path / "few.json")
    enough = SuiteResult((_variant("m", _noise(3), _noise(4, scale=0.1)),), "m", {})
    current = enough.save(tmp_path / "current.json")
    with pytest.raises(ValueError, match=rf"few.json: variant 'm' has 5 samples.*{MIN_SAMPLES}"):
        check_regression(enough, path)
    with pytest.raises(ValueError, match="the current suite: variant 'm' has 5 samples"):
        check_regression(few, current)
    assert main([str(current), str(path)]) == 2
    assert "few.json" in capsys.readouterr().err


def test_an_edited_baseline_is_refused(tmp_path, capsys):
    suite = SuiteResult((_variant("m", _noise(1), _noise(2, scale=0.1)),), "m", {})
    path = suite.save(tmp_path / "baseline.json")
    current = suite.save(tmp_path / "current.json")
    data = json.loads(path.read_text())
    data["variants"][0]["latency"]["samples"] = [t / 3 for t in
                                                 data["variants"][0]["latency"]["samples"]]
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="baseline.json: the content does not match its sha256"):
        SuiteResult.load(path)
    assert main([str(current), str(path)]) == 2
    assert "edited" in capsys.readouterr().err


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.pop("variants"), "the file has no 'variants' field"),
    (lambda d: d.pop("machine"), "the file has no 'machine' field"),
    (lambda d: d.update(variants=None), "'variants' must be list, got None"),
    (lambda d: d.update(variants=[]), "'variants' is empty"),
    (lambda d: d["variants"][0]["latency"].pop("samples"),
     "variant 'm', 'latency': saved LatencyStats has no 'samples' field"),
    (lambda d: d["variants"][0].pop("latency"), "variant 'm' has no 'latency' field"),
    (lambda d: d["variants"][0]["latency"].update(warmup=-3),
     "warmup must be an integer ≥ 0, got -3"),
    (lambda d: d["variants"][0]["latency"].update(name=123), "name must be a string"),
    (lambda d: d["variants"][0]["latency"].update(timer_resolution=-1e-9),
     "timer_resolution is a time in seconds, finite and ≥ 0"),
    (lambda d: d["variants"][0]["probe"].update(samples=[1e-4] * 3),
     "3 probe samples for 20 rounds"),
    (lambda d: d.update(baseline="other"), "the baseline 'other' is not one of the variants"),
    (lambda d: d["variants"][0].update(accuracy=1.5), "accuracy in \\[0, 1\\]"),
    (lambda d: d.update(format="tinyprof-suite/1"), "saved by an older tinyprof"),
])
def test_malformed_baselines_name_the_file_and_the_field(tmp_path, capsys, edit, message):
    """Each edit is saved with a fresh digest (as a careless tool would write it), so the
    check reaches the field itself; the command line exits 2 with the same message."""
    from tinyprof.suite import _digest

    suite = SuiteResult((_variant("m", _noise(1), _noise(2, scale=0.1)),), "m", {})
    current = suite.save(tmp_path / "current.json")
    data = suite.to_dict()
    edit(data)
    data["sha256"] = _digest(data)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=message) as error:
        check_regression(current, path)
    assert str(error.value).startswith(str(path))
    assert main([str(current), str(path)]) == 2
    assert "broken.json" in capsys.readouterr().err


def test_a_saved_suite_round_trips_with_its_comparisons(tmp_path, model_and_data):
    model, data = model_and_data
    suite = tp.benchmark_suite({"m": model, "twice": lambda x: [model(x), model(x)][-1]}, data,
                               rounds=10)
    loaded = SuiteResult.load(suite.save(tmp_path / "suite.json"))
    for name in ("m", "twice"):
        assert loaded[name].latency.samples == suite[name].latency.samples
        assert loaded[name].probe.samples == suite[name].probe.samples
        assert loaded[name].latency.context == suite[name].latency.context
        assert loaded[name].comparison.speedup == suite[name].comparison.speedup
    assert loaded.sources is None and suite.sources is not None


def test_check_regression_checks_its_arguments(tmp_path):
    suite = SuiteResult((_variant("m", _noise(1), _noise(2, scale=0.1)),), "m", {})
    path = suite.save(tmp_path / "b.json")
    with pytest.raises(ValueError, match="tolerance"):
        check_regression(suite, path, tolerance=-0.1)
    with pytest.raises(ValueError, match="alpha"):
        check_regression(suite, path, alpha=1)
    with pytest.raises(TypeError, match="SuiteResult or the path"):
        check_regression(42, path)
