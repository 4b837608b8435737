"""Bad input to the library: a correct answer or a clear error naming the layer, the argument and
what was expected, never a silent wrong answer (issue 13). Global state is left alone."""

import numpy as np
import pytest

import tinyprof as tp
from tinyprof import models, nn, optim


@pytest.mark.parametrize("build, message", [
    (lambda: nn.Linear(0, 3), "Linear: in_features must be a positive integer, got 0"),
    (lambda: nn.Linear(4, -2), "Linear: out_features must be a positive integer, got -2"),
    (lambda: nn.Linear(4.5, 2), "Linear: in_features must be a positive integer, got 4.5"),
    (lambda: nn.Conv2d(3, 8, 3, stride=0), "Conv2d: stride must be a positive integer, got 0"),
    (lambda: nn.Conv2d(3, 8, 3, stride=-1), "Conv2d: stride must be a positive integer, got -1"),
    (lambda: nn.Conv2d(3, 8, 3, padding=-1), "Conv2d: padding must be an integer ≥ 0, got -1"),
    (lambda: nn.Conv2d(3, 8, 3, dilation=0), "Conv2d: dilation must be a positive integer"),
    (lambda: nn.Conv2d(3, 8, 3, groups=0), "Conv2d: groups must be a positive integer, got 0"),
    (lambda: nn.Conv2d(3, 8, 3, groups=2), "must both be divisible by groups"),
    (lambda: nn.Conv2d(3, 8, (3, 3, 3)), "kernel_size must be an int or a pair"),
    (lambda: nn.MultiHeadAttention(8, 0), "MultiHeadAttention: n_heads must be a positive"),
    (lambda: nn.LayerNorm(8, eps=0), "LayerNorm: eps must be a positive number, got 0"),
    (lambda: nn.Embedding(0, 4), "Embedding: num_embeddings must be a positive integer"),
    (lambda: models.gpt2(n_head=0, shape_only=True), "gpt2: n_head must be a positive integer"),
    (lambda: models.gpt2(n_layer=-1, shape_only=True), "gpt2: n_layer must be a positive"),
    (lambda: models.gpt2(d_model=768.5, shape_only=True),
     "gpt2: d_model must be a positive integer, got 768.5"),
    (lambda: models.mlp((784, -5, 10)), "Linear: out_features must be a positive integer, got -5"),
])
def test_settings_are_checked_where_they_are_made(build, message):
    with pytest.raises(ValueError) as error:
        build()
    assert message in str(error.value)


def test_integer_weights_are_refused():
    with pytest.raises(TypeError, match="floating-point dtype .* got int8"):
        models.gpt2(d_model=64, n_layer=1, n_head=2, vocab_size=50, n_ctx=8, dtype="int8")


def test_integer_inputs_give_the_right_answer_or_a_clear_error():
    with pytest.raises(TypeError, match="GELU computes in floating point: its input has dtype int"):
        nn.GELU()(np.array([1, 2, 3]))
    assert np.array_equal(nn.ReLU()(np.array([-1, 2, 3])), [0, 2, 3])    # exact in integers
    assert np.allclose(nn.Linear(3, 2)(np.array([[1, 2, 3]])),             # cast to the weights
                       nn.Linear(3, 2)(np.array([[1.0, 2.0, 3.0]], dtype=np.float32)))
    with pytest.raises(TypeError, match="MSELoss computes in floating point: prediction"):
        nn.MSELoss()(np.array([1, 2]), np.array([1, 3]))
    with pytest.raises(TypeError, match="MSELoss expects target as a numpy array, got list"):
        nn.MSELoss()(np.array([1.0, 2.0]), [1.0, 3.0])
    with pytest.raises(TypeError, match="Embedding looks up integer token ids; got dtype float"):
        nn.Embedding(10, 4)(np.array([[1.0, 2.0]]))


@pytest.mark.parametrize("targets, error, message", [
    (np.array([0, -1]), ValueError, "target -1 is not a class id: there are 3 classes"),
    (np.array([0, 3]), ValueError, "target 3 is not a class id"),
    (np.array([0.0, 1.0]), TypeError, "targets are class ids and must be integers"),
    ([0, 1], TypeError, "expects targets as a numpy array, got list"),
])
def test_cross_entropy_targets(targets, error, message):
    logits = np.zeros((2, 3), dtype=np.float32)
    with pytest.raises(error, match=message):
        nn.CrossEntropyLoss()(logits, targets)


def test_training_memory_refuses_bad_targets_through_the_loss():
    model = models.mlp((4, 3))
    x = np.ones((2, 4), dtype=np.float32)
    with pytest.raises(ValueError, match="not a class id"):
        tp.training_memory(model, x, targets=np.array([0, 5]))


def test_empty_inputs():
    with pytest.raises(ValueError, match="empty batch"):
        nn.CrossEntropyLoss()(np.zeros((0, 3), dtype=np.float32), np.zeros(0, dtype=np.int64))
    with pytest.raises(nn.ShapeError, match=r"the sequence is empty \(input \(2, 0, 8\)\)"):
        nn.MultiHeadAttention(8, 2)(np.zeros((2, 0, 8), dtype=np.float32))


def test_gradients_of_the_wrong_shape_are_refused():
    layer = nn.Linear(4, 3)
    layer(np.ones((6, 4), dtype=np.float32))
    with pytest.raises(ValueError, match=r"Linear.backward: the gradient has shape \(3, 2, 3\), "
                                         r"expected \(6, 3\)"):
        layer.backward(np.ones((3, 2, 3), dtype=np.float32))
    relu = nn.ReLU()
    relu(np.ones((2, 2), dtype=np.float32))
    with pytest.raises(ValueError, match="ReLU.backward: the gradient has shape"):
        relu.backward(np.ones(2, dtype=np.float32))
    weight = nn.Linear(4, 3)
    weight.weight.grad = np.ones(3, dtype=np.float32)   # (3,) onto a (4, 3) parameter
    with pytest.raises(ValueError, match=r"SGD.step: a gradient of shape \(3,\) for a parameter "
                                         r"of shape \(4, 3\)"):
        optim.SGD(weight, lr=0.1).step()


def test_clear_messages_for_common_slips():
    with pytest.raises(RuntimeError, match="Flatten.backward needs a forward first"):
        nn.Flatten().backward(np.ones((2, 3)))
    model = models.mlp((4, 3))
    sgd = optim.SGD(model, lr=0.1)       # a model stands for its parameters
    assert len(sgd.params) == 2
    with pytest.raises(TypeError, match="takes a model or model.parameters"):
        optim.SGD([model], lr=0.1)


def test_a_layer_used_twice_is_refused_with_both_places():
    shared = nn.Linear(4, 4)
    with pytest.raises(ValueError, match=r"Linear is used twice in one model, at 'layers.0' and "
                                         r"'layers.2'"):
        nn.Sequential(shared, nn.ReLU(), shared)
    tied = nn.Linear(4, 4)
    other = nn.Linear(4, 4)
    other.weight = tied.weight           # sharing a Parameter is the way to share weights
    model = nn.Sequential(tied, nn.ReLU(), other)
    assert tp.count_parameters(model) == 16 + 4 + 4


def test_counts_are_exact_python_ints():
    huge = nn.Linear(2**32, 2**32, shape_only=True)
    assert tp.count_parameters(huge) == 18_446_744_078_004_518_912 == 2**64 + 2**32
    assert tp.parameter_bytes(huge) == 4 * (2**64 + 2**32)


def test_adam_counts_steps_per_parameter_like_pytorch():
    # Recorded with torch.optim.Adam(lr=0.1) from torch 2.13.0 (CPU, float64), same gradients:
    # parameter b gets no gradient for the first two steps.
    a = tp.nn.Parameter(np.array([[1.0, -2.0], [0.5, 3.0]]))
    b = tp.nn.Parameter(np.array([0.25, -0.75]))
    adam = optim.Adam([a, b], lr=0.1)
    grads_b = [None, None, [0.5, -1.0], [0.25, 0.5], [-0.1, 0.2]]
    for i, gb in enumerate(grads_b):
        a.grad = np.array([[0.1 * (i + 1), -0.2], [0.3, 0.05 * i]])
        b.grad = None if gb is None else np.array(gb)
        adam.step()
    assert np.allclose(a.data, [[0.5149169317360103, -1.5000000250000003],
                                [1.6666667435050186e-08, 2.6654287122976217]], rtol=1e-12)
    assert np.allclose(b.data, [-0.0028890613494268677, -0.6143593384671743], rtol=1e-12)
    assert adam.steps == {id(a): 5, id(b): 3} and adam.t == 5


def test_adam_refuses_float16_parameters():
    with pytest.raises(TypeError, match="float16.*eps=1e-08 rounds to 0"):
        optim.Adam(models.mlp((4, 3), dtype=np.float16).parameters())


def test_global_state_is_left_alone():
    import tracemalloc

    before = np.geterr()
    for bad in (lambda: nn.GELU()(np.array([1])), lambda: nn.Linear(0, 1)):
        with pytest.raises((TypeError, ValueError)):
            bad()
    assert np.geterr() == before and not tracemalloc.is_tracing()


@pytest.mark.parametrize("analysis", [tp.count_flops, tp.predict_training_memory,
                                      tp.activation_table])
def test_negative_input_shapes_are_refused_by_every_analysis(analysis):
    with pytest.raises(ValueError, match=r"input_shape must be a tuple of positive ints, got "
                                         r"\(-32, 784\)"):
        analysis(models.mlp((784, 10)), (-32, 784))


# -- issue 21: the benchmarking library under real use ------------------------------------------
def _digits_like(rows=64, classes=10, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((rows, 64)).astype(np.float32),
            rng.integers(0, classes, rows))


@pytest.mark.parametrize("kwargs, error, message", [
    ({"noise_band": -0.5, "alpha": 1}, ValueError, "noise_band is the relative change treated"),
    ({"alpha": 1}, ValueError, "alpha is a significance level strictly between 0 and 1"),
    ({"alpha": 0}, ValueError, "alpha is a significance level"),
    ({"noise_band": float("nan")}, ValueError, "noise_band"),
    ({"loops": 0}, ValueError, "ab_test: loops must be ≥ 1, got 0"),
    ({"loops": -1}, ValueError, "ab_test: loops must be ≥ 1, got -1"),
    ({"loops": 2.5}, TypeError, "ab_test: loops must be an integer, got 2.5"),
    ({"rounds": 0}, ValueError, "ab_test: rounds must be ≥ 1, got 0"),
    ({"warmup": -1}, ValueError, "ab_test: warmup must be ≥ 0, got -1"),
])
def test_ab_test_checks_every_setting_before_timing(kwargs, error, message):
    calls = []
    with pytest.raises(error, match=message):
        tp.ab_test(lambda: calls.append(1), lambda: calls.append(2), **kwargs)
    assert not calls          # refused before anything ran


def test_ab_test_names_the_function_and_phase_that_raised():
    def broken_model(x):
        raise KeyError("weights")

    with pytest.raises(RuntimeError, match=r"ab_test: the candidate \(.*broken_model\) raised "
                                           r"KeyError during warm-up: 'weights'"):
        tp.ab_test(lambda x: x, broken_model, np.ones(3))
    calls = []

    def fails_later():
        calls.append(1)
        if len(calls) > 5:
            raise ValueError("out of memory")

    with pytest.raises(RuntimeError, match=r"the baseline \(.*fails_later\) raised ValueError "
                                           r"during (calibration|timing)"):
        tp.ab_test(fails_later, lambda: None, warmup=1)


def test_ab_test_bootstrap_is_the_order_statistic_one():
    """One bootstrap for both: the ratio interval of ab_test draws each side's resampled medians
    as timing does, so its percentiles match a ratio of two bootstrap_medians draws."""
    from tinyprof.abtest import bootstrap_ratio_ci
    from tinyprof.timing import bootstrap_medians

    rng = np.random.default_rng(4)
    a, b = rng.lognormal(0, 0.1, 1001), rng.lognormal(0.2, 0.1, 1000)
    generator = np.random.default_rng(0)
    ratios = bootstrap_medians(a, 2000, generator) / bootstrap_medians(b, 2000, generator)
    assert bootstrap_ratio_ci(a, b) == tuple(np.percentile(ratios, [2.5, 97.5]))
    big = rng.lognormal(0, 0.1, 100_000)
    low, high = bootstrap_ratio_ci(big, big * 1.1)
    assert low < 1 / 1.1 < high and high - low < 0.01


@pytest.mark.parametrize("edit, error, message", [
    (lambda d: d.update(warmup=-3), ValueError, "warmup must be an integer ≥ 0, got -3"),
    (lambda d: d.update(name=123), TypeError, "name must be a string, got 123"),
    (lambda d: d.update(timer_resolution=-1e-9), ValueError, "timer_resolution is a time"),
    (lambda d: d.update(timer_overhead=float("inf")), ValueError, "timer_overhead is a time"),
    (lambda d: d.update(tracemalloc_active="yes"), TypeError, "tracemalloc_active must be"),
    (lambda d: d.pop("samples"), ValueError, "has no 'samples' field"),
    (lambda d: d.update(samples=[[1e-3, 2e-3]]), ValueError, "1-D sequence of times, got shape"),
    (lambda d: d.update(samples=[1e308, 1e308]), ValueError, "at most 1e\\+09 s"),
    (lambda d: d.update(context={"python": "3"}), ValueError, "does not describe a TimingContext"),
])
def test_a_saved_latency_stats_is_checked_field_by_field(tmp_path, edit, error, message):
    data = tp.LatencyStats.from_samples([1e-3, 2e-3, 3e-3], name="f").to_dict()
    edit(data)
    with pytest.raises(error, match=message):
        tp.LatencyStats.from_dict(data)
    path = tmp_path / "stats.json"
    path.write_text(__import__("json").dumps(data))
    with pytest.raises(ValueError, match="stats.json"):
        tp.LatencyStats.load(path)


def test_latency_samples_none_and_2d_are_named_and_huge_ones_stay_finite():
    with pytest.raises(TypeError, match="samples must be a sequence of times in seconds, got "
                                        "NoneType"):
        tp.LatencyStats.from_samples(None)
    with pytest.raises(ValueError, match=r"1-D sequence of times, got shape \(2, 3\)"):
        tp.LatencyStats.from_samples(np.ones((2, 3)) * 1e-3)
    big = tp.LatencyStats.from_samples([9e8, 9e8, 9e8, 9e8])   # the largest allowed times
    assert big.ci == (9e8, 9e8) and "nan" not in str(big)
    from tinyprof.timing import bootstrap_medians
    assert np.all(bootstrap_medians([1e308, 1e308], 50) == 1e308)   # no overflow to inf


@pytest.mark.parametrize("model, message", [
    (lambda x: np.full((len(x), 10), np.nan, dtype=np.float32), "non-finite scores"),
    (lambda x: np.zeros(len(x)), "output of shape \\(64,\\); top-1 accuracy needs one row"),
    (lambda x: np.zeros((len(x), 3)), "labels must be class indices 0…2"),
])
def test_suite_accuracy_refuses_outputs_it_cannot_score(model, message):
    x, y = _digits_like()
    with pytest.raises(ValueError, match=f"variant 'bad' .*{message}|{message}.*'bad'"):
        tp.benchmark_suite({"bad": model}, (x, y), rounds=2)


def test_suite_refuses_labels_that_do_not_fit():
    x, y = _digits_like()
    with pytest.raises(ValueError, match=r"one label per row of x, got x of shape \(64, 64\) "
                                         r"and y of shape \(63,\)"):
        tp.benchmark_suite({"m": models.mlp((64, 10))}, (x, y[:-1]), rounds=2)
    with pytest.raises(TypeError, match="labels y are class indices"):
        tp.benchmark_suite({"m": models.mlp((64, 10))}, (x, y.astype(float)), rounds=2)
    with pytest.raises(ValueError, match="accuracy.*must be a number in \\[0, 1\\], got 1.5"):
        tp.benchmark_suite({"m": models.mlp((64, 10))}, (x, y), rounds=2,
                           accuracy=lambda model, x, y: 1.5)
    suite = tp.benchmark_suite({"m": models.mlp((64, 10))}, (x, y), rounds=2)
    assert 0 <= suite["m"].accuracy <= 1


def test_variants_convert_every_eligible_layer_or_refuse():
    from tinyprof import variants

    single = variants.int8(nn.Linear(4, 4))
    assert isinstance(single, nn.QuantizedLinear)
    gpt = models.gpt2(vocab_size=50, n_ctx=8, d_model=16, n_layer=2, n_head=2)
    with pytest.warns(UserWarning, match="quantized 12 Linear layers; Embedding 'wte', "
                                         "Embedding 'wpe', TiedLMHead 'head' keep"):
        quantized = variants.int8(gpt)
    attention = quantized.h[0].attn
    assert all(isinstance(getattr(attention, f"{p}_proj"), nn.QuantizedLinear)
               for p in "qkvo" if p != "o") and isinstance(attention.out_proj, nn.QuantizedLinear)
    assert not any(isinstance(m, nn.Linear) for _, m in quantized.named_modules())
    tokens = np.random.default_rng(0).integers(0, 50, (2, 8))
    assert np.abs(quantized(tokens) - gpt(tokens)).max() < 0.05 * np.abs(gpt(tokens)).max()
    with pytest.raises(ValueError, match="int8: ReLU holds no Linear layer to quantize"):
        variants.int8(nn.ReLU())
    with pytest.raises(ValueError, match="fused: GPT has no Linear directly followed by a ReLU"):
        variants.fused(gpt)
    with pytest.raises(ValueError, match="pruned: Sequential holds no Linear layer to prune"):
        variants.pruned(nn.Sequential(nn.ReLU()), 0.5)


@pytest.mark.parametrize("call, error, message", [
    (lambda: optim.Adam(models.mlp((4, 3)).parameters(), betas=(0.9,)), ValueError,
     "Adam: betas is a pair of numbers"),
    (lambda: optim.Adam(models.mlp((4, 3)), betas=0.9), ValueError, "betas is a pair"),
    (lambda: tp.parameter_table(5), TypeError, "parameter_table needs a model"),
    (lambda: tp.parameter_bytes("gpt"), TypeError, "parameter_bytes needs a model"),
    (lambda: nn.ReLU()(np.array(["a", "b"])), TypeError,
     "ReLU expects an array of numbers .* got dtype <U1"),
    (lambda: nn.Residual(nn.Linear(4, 3))(np.ones((2, 4), np.float32)), ValueError,
     r"y = x \+ f\(x\) needs f to keep the input's shape, but Linear maps \(2, 4\) to \(2, 3\)"),
    (lambda: tp.Profiler().count_flops(models.mlp((4, 3)), np.ones((2, 4))), TypeError,
     r"takes the input's shape, e.g. x.shape = \(2, 4\), not the array itself"),
    (lambda: tp.format_count(1.7), ValueError, "exact counts \\(whole numbers\\), got 1.7"),
    (lambda: tp.format_count(float("nan")), ValueError, "got nan"),
    (lambda: tp.amdahl_speedup(0.5, float("nan")), ValueError, "speedup factor must be positive"),
    (lambda: tp.amdahl_speedup(float("nan"), 2), ValueError, "fraction of the work"),
    (lambda: tp.required_factor(0.5, float("nan")), ValueError, "target speedup"),
    (lambda: tp.gflops_per_second(1e9, float("nan")), ValueError, "positive time"),
    (lambda: tp.gflops_per_second(float("nan"), 1.0), ValueError, "non-negative FLOP count"),
])
def test_obscure_slips_get_named_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_units_and_amdahl_right_answers_at_the_edges():
    assert tp.format_seconds(float("nan")) == "nan"         # no unit for what is no time
    assert tp.format_seconds(float("inf")) == "inf s"
    assert tp.format_count(3.0) == "3" and tp.format_count(np.int64(124439808)) == "124,439,808"
    assert tp.amdahl_speedup(0.5, float("inf")) == 2.0      # the limit
