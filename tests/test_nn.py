"""tinyprof.nn: every layer's backward agrees with central differences; forwards agree with the
maths written out by hand; wrong inputs are refused with messages that name the layer."""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import assert_close_gradients, check_gradients, check_loss_gradient

from tinyprof import nn
from tinyprof.nn import (
    GELU,
    Conv2d,
    CrossEntropyLoss,
    Embedding,
    Flatten,
    LayerNorm,
    Linear,
    MSELoss,
    MultiHeadAttention,
    Parameter,
    ReLU,
    Residual,
    Sequential,
    ShapeError,
    ShapeOnlyError,
    TiedLMHead,
    TransformerBlock,
    conv_output_size,
    softmax,
)

F64 = dict(dtype=np.float64)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# -- the checker itself must be able to fail ------------------------------------------------------
class _WrongBiasLinear(Linear):
    """A Linear whose bias gradient is off by 1 %: the gradient check has to catch it."""

    def backward(self, grad: np.ndarray) -> np.ndarray:
        dx = super().backward(grad)
        self.bias.grad *= 1.01
        return dx


def test_gradient_check_detects_a_wrong_backward():
    layer = _WrongBiasLinear(4, 3, rng=rng(), **F64)
    errors = check_gradients(layer, rng(1).standard_normal((2, 4)))
    assert errors["weight"] < 1e-6 and errors["input"] < 1e-6
    assert errors["bias"] > 1e-3


# -- Linear ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(3, 5), (2, 3, 5)])
def test_linear_gradients(bias, shape):
    layer = Linear(5, 4, bias=bias, rng=rng(), **F64)
    errors = check_gradients(layer, rng(1).standard_normal(shape), max_entries=None)
    assert set(errors) == {"input", "weight"} | ({"bias"} if bias else set())
    assert_close_gradients(errors)


def test_linear_forward_is_x_w_plus_b():
    layer = Linear(3, 2, rng=rng(), **F64)
    x = rng(1).standard_normal((4, 3))
    expected = np.array([[sum(x[r, i] * layer.weight.data[i, o] for i in range(3))
                          + layer.bias.data[o] for o in range(2)] for r in range(4)])
    np.testing.assert_allclose(layer(x), expected, rtol=1e-12)
    assert layer.weight.shape == (3, 2)


# -- Conv2d ---------------------------------------------------------------------------------------
# (in, out, kernel, stride, padding, dilation, groups, bias, (H, W))
CONV_CONFIGS = {
    "plain": (3, 4, 3, 1, 0, 1, 1, True, (6, 6)),
    "stride2-pad1": (3, 4, 3, 2, 1, 1, 1, True, (7, 8)),
    "stride2-drops-last-row": (2, 3, 3, 2, 0, 1, 1, True, (8, 8)),
    "pad2": (2, 3, 3, 1, 2, 1, 1, True, (5, 5)),
    "dilation2": (2, 3, 3, 1, 1, 2, 1, True, (7, 7)),
    "groups2": (4, 6, 3, 1, 1, 1, 2, True, (5, 5)),
    "depthwise": (4, 4, 3, 1, 1, 1, 4, True, (5, 5)),
    "non-square": (3, 2, (2, 3), (2, 1), (1, 0), (1, 2), 1, True, (6, 9)),
    "no-bias": (2, 3, 3, 1, 1, 1, 1, False, (5, 5)),
}


def _conv(config, seed: int = 0) -> tuple[Conv2d, np.ndarray]:
    cin, cout, k, s, p, d, g, bias, (h, w) = config
    layer = Conv2d(cin, cout, k, stride=s, padding=p, dilation=d, groups=g, bias=bias,
                   rng=rng(seed), **F64)
    return layer, rng(seed + 1).standard_normal((2, cin, h, w))


def naive_conv2d(x: np.ndarray, layer: Conv2d) -> np.ndarray:
    """y[n,o,i,j] = b[o] + Σ_{c,a,b} x_pad[n, g·C/G + c, i·sh + a·dh, j·sw + b·dw] · W[o,c,a,b],
    with g = o // (O/G), written as plain loops."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = (layer.kernel_size, layer.stride, layer.padding,
                                              layer.dilation)
    n, cin, h, w = x.shape
    weight = layer.weight.data
    cout, cpg = weight.shape[:2]
    ho = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    wo = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    xp = np.zeros((n, cin, h + 2 * ph, w + 2 * pw))
    xp[:, :, ph:ph + h, pw:pw + w] = x
    out = np.zeros((n, cout, ho, wo))
    for b in range(n):
        for o in range(cout):
            group = o // (cout // layer.groups)
            for i in range(ho):
                for j in range(wo):
                    total = layer.bias.data[o] if layer.bias is not None else 0.0
                    for c in range(cpg):
                        for a in range(kh):
                            for e in range(kw):
                                total += (xp[b, group * cpg + c, i * sh + a * dh, j * sw + e * dw]
                                          * weight[o, c, a, e])
                    out[b, o, i, j] = total
    return out


@pytest.mark.parametrize("name", list(CONV_CONFIGS))
def test_conv2d_forward_matches_naive_loops(name):
    layer, x = _conv(CONV_CONFIGS[name])
    x = x[:1]
    expected = naive_conv2d(x, layer)
    got = layer(x)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", list(CONV_CONFIGS))
def test_conv2d_gradients(name):
    layer, x = _conv(CONV_CONFIGS[name])
    assert_close_gradients(check_gradients(layer, x, max_entries=30))


def test_conv2d_output_shape_formula():
    assert conv_output_size(32, 3, 1, 1, 1) == 32
    assert conv_output_size(32, 3, 2, 1, 1) == 16
    assert conv_output_size(7, 3, 1, 0, 2) == 3   # dilated extent 5
    layer = Conv2d(3, 8, (3, 5), stride=(2, 1), padding=(1, 2), rng=rng())
    assert layer.output_shape((4, 3, 9, 10)) == (4, 8, 5, 10)
    assert layer(np.zeros((4, 3, 9, 10), np.float32)).shape == (4, 8, 5, 10)


def test_conv2d_weight_shape_and_bad_groups():
    assert Conv2d(4, 6, 3, groups=2).weight.shape == (6, 2, 3, 3)
    with pytest.raises(ValueError, match="divisible by groups"):
        Conv2d(3, 6, 3, groups=2)


# -- activations and normalization ----------------------------------------------------------------
def test_relu_gradient_and_values():
    x = rng().standard_normal((3, 4))
    x = np.where(np.abs(x) < 0.05, 0.5, x)    # stay away from the kink at 0
    assert_close_gradients(check_gradients(ReLU(), x, max_entries=None))
    np.testing.assert_array_equal(ReLU()(np.array([-2.0, 0.0, 3.0])), [0.0, 0.0, 3.0])


def test_gelu_gradient_and_values():
    assert_close_gradients(check_gradients(GELU(), 2 * rng().standard_normal((3, 5)),
                                           max_entries=None))
    # ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) at x = 0, 1, −1
    np.testing.assert_allclose(GELU()(np.array([0.0, 1.0, -1.0])),
                               [0.0, 0.8411919906082768, -0.15880800939172324], rtol=1e-12)


@pytest.mark.parametrize("shape", [(4, 6), (2, 3, 6)])
def test_layernorm_gradients(shape):
    layer = LayerNorm(6, **F64)
    r = rng()
    layer.weight.data[:] = 1 + 0.5 * r.standard_normal(6)
    layer.bias.data[:] = r.standard_normal(6)
    assert_close_gradients(check_gradients(layer, r.standard_normal(shape), max_entries=None))


def test_layernorm_normalises_each_row():
    x = rng().standard_normal((5, 16)) * 3 + 7
    y = LayerNorm(16, **F64)(x)
    np.testing.assert_allclose(y.mean(axis=-1), 0, atol=1e-12)
    np.testing.assert_allclose(y.var(axis=-1), 1, rtol=1e-4)   # var/(var + 1e-5)


# -- embeddings and attention ---------------------------------------------------------------------
def test_embedding_weight_gradient_with_repeated_ids():
    layer = Embedding(7, 4, rng=rng(), **F64)
    ids = np.array([[1, 3, 3], [6, 1, 1]])
    errors = check_gradients(layer, ids, input_grad=False, max_entries=None)
    assert_close_gradients(errors)
    # rows never read get exactly zero gradient; row 1 was read three times
    assert np.all(layer.weight.grad[[0, 2, 4, 5]] == 0)
    assert np.all(layer.weight.grad[1] != 0)


def test_embedding_lookup_and_out_of_range_ids():
    layer = Embedding(5, 3, rng=rng(), **F64).set_names()
    np.testing.assert_array_equal(layer(np.array([4, 0])), layer.weight.data[[4, 0]])
    with pytest.raises(IndexError, match=r"Embedding has 5 rows; got token ids from 0 to 5"):
        layer(np.array([0, 5]))
    with pytest.raises(IndexError, match="-1"):
        layer(np.array([-1, 2]))
    with pytest.raises(TypeError, match="Embedding looks up integer token ids; got dtype float64"):
        layer(np.array([0.0, 1.0]))   # a dtype problem, said as one (issue 13)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_gradients(causal):
    layer = MultiHeadAttention(8, 2, causal=causal, rng=rng(), **F64)
    errors = check_gradients(layer, rng(1).standard_normal((2, 5, 8)), max_entries=25,
                             exclude=("k_proj.bias",))
    assert set(errors) == {"input", "k_proj.weight"} | {
        f"{p}_proj.{k}" for p in ("q", "v", "out") for k in ("weight", "bias")}
    assert_close_gradients(errors)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_key_bias_gets_zero_gradient(causal):
    # A key bias b adds q·b to every score of a row; softmax ignores a constant shift, so
    # dL/db_k = 0 exactly (up to rounding) while the query bias gets a real gradient.
    layer = MultiHeadAttention(8, 2, causal=causal, rng=rng(), **F64)
    layer(rng(1).standard_normal((2, 5, 8)))
    layer.backward(rng(2).standard_normal((2, 5, 8)))
    assert np.abs(layer.k_proj.bias.grad).max() < 1e-12 * np.abs(layer.q_proj.bias.grad).max()


@pytest.mark.parametrize("causal", [False, True])
def test_attention_causal_mask_hides_the_future(causal):
    layer = MultiHeadAttention(8, 2, causal=causal, rng=rng(), **F64)
    x = rng(1).standard_normal((1, 6, 8))
    before = layer(x)
    x2 = x.copy()
    x2[0, 4] += 1.0                         # change token 4
    after = layer(x2)
    changed = np.abs(after - before).max(axis=-1)[0] > 1e-9
    assert changed[4]
    assert changed[:4].any() != causal      # earlier positions see token 4 only without the mask


def test_attention_rejects_indivisible_heads():
    with pytest.raises(ValueError, match=r"d_model \(10\).*n_heads \(3\)"):
        MultiHeadAttention(10, 3)


def test_softmax_rows_sum_to_one_and_are_shift_invariant():
    s = rng().standard_normal((3, 7)) * 50
    p = softmax(s)
    np.testing.assert_allclose(p.sum(axis=-1), 1, rtol=1e-12)
    np.testing.assert_allclose(softmax(s + 1000), p, rtol=1e-12)


# -- containers and the transformer pieces --------------------------------------------------------
def test_sequential_gradients():
    model = Sequential(Linear(5, 6, rng=rng(), **F64), GELU(), LayerNorm(6, **F64),
                       Linear(6, 3, rng=rng(1), **F64))
    errors = check_gradients(model, rng(2).standard_normal((4, 5)))
    assert set(errors) == {"input", "layers.0.weight", "layers.0.bias", "layers.2.weight",
                           "layers.2.bias", "layers.3.weight", "layers.3.bias"}
    assert_close_gradients(errors)


def test_residual_gradients():
    block = Residual(Sequential(Linear(4, 4, rng=rng(), **F64), GELU()))
    x = rng(1).standard_normal((3, 4))
    np.testing.assert_allclose(block(x), x + block.fn(x), rtol=1e-15)
    assert_close_gradients(check_gradients(block, x, max_entries=None))


def test_flatten_gradients_and_shapes():
    x = rng().standard_normal((2, 3, 2, 2))
    assert Flatten()(x).shape == (2, 12)
    assert_close_gradients(check_gradients(Flatten(), x, max_entries=None))
    model = Sequential(Flatten(), Linear(12, 3, rng=rng(), **F64))
    assert_close_gradients(check_gradients(model, x))


@pytest.mark.parametrize("causal", [True, False])
def test_transformer_block_gradients(causal):
    block = TransformerBlock(8, 2, causal=causal, rng=rng(), **F64)
    errors = check_gradients(block, rng(1).standard_normal((2, 4, 8)), max_entries=15,
                             exclude=("attn.k_proj.bias",))
    assert len(errors) == 1 + 15       # input, 2 LayerNorms × 2, 4 projections × 2 − key bias,
    #                                    2 MLP Linears × 2
    assert_close_gradients(errors)


def test_tied_head_gradients_and_sharing():
    table = Parameter(rng().standard_normal((11, 6)))
    head = TiedLMHead(table)
    assert head.weight is table and list(head.parameters()) == [table]
    h = rng(1).standard_normal((2, 3, 6))
    np.testing.assert_allclose(head(h), h @ table.data.T, rtol=1e-15)
    assert_close_gradients(check_gradients(head, h))


# -- losses ---------------------------------------------------------------------------------------
def test_cross_entropy_value_and_gradient():
    loss = CrossEntropyLoss()
    assert loss(np.zeros((4, 10)), np.arange(4)) == pytest.approx(np.log(10), rel=1e-12)
    logits = rng().standard_normal((2, 3, 5))
    targets = np.array([[0, 4, 2], [1, 1, 3]])
    flat = logits.reshape(-1, 5)
    log_probs = flat - np.log(np.exp(flat).sum(axis=1, keepdims=True))
    assert loss(logits, targets) == pytest.approx(
        -log_probs[np.arange(6), targets.reshape(-1)].mean(), rel=1e-12)
    assert loss.backward().shape == logits.shape
    assert check_loss_gradient(loss, logits, targets) < 1e-7
    with pytest.raises(ValueError, match="6 rows of logits but 5 targets"):
        loss(logits, np.zeros(5, dtype=int))


def test_mse_value_and_gradient():
    loss = MSELoss()
    prediction = rng().standard_normal((3, 4))
    target = rng(1).standard_normal((3, 4))
    assert loss(prediction, target) == pytest.approx(np.mean((prediction - target) ** 2),
                                                     rel=1e-12)
    assert check_loss_gradient(loss, prediction, target) < 1e-7
    with pytest.raises(ValueError, match=r"\(3, 4\).*\(4, 3\)"):
        loss(prediction, target.T)


# -- refusing bad inputs --------------------------------------------------------------------------
def test_linear_shape_error_names_layer_and_both_shapes():
    layer = Linear(128, 64)
    with pytest.raises(ShapeError) as info:
        layer(np.zeros((2, 100), np.float32))
    message = str(info.value)
    assert "Linear" in message and "(..., 128)" in message and "(2, 100)" in message
    assert isinstance(info.value, ValueError)


def test_conv2d_wrong_channels():
    with pytest.raises(ShapeError, match=r"Conv2d expected input of shape \(N, 3, H, W\), "
                                         r"got \(1, 4, 8, 8\)"):
        Conv2d(3, 8, 3)(np.zeros((1, 4, 8, 8), np.float32))
    with pytest.raises(ShapeError, match=r"Conv2d.*\(1, 3, 2, 2\).*smaller than"):
        Conv2d(3, 8, 3)(np.zeros((1, 3, 2, 2), np.float32))


def test_attention_and_layernorm_shape_errors():
    with pytest.raises(ShapeError, match=r"MultiHeadAttention.*\(batch, seq, 8\).*\(2, 8\)"):
        MultiHeadAttention(8, 2)(np.zeros((2, 8), np.float32))
    with pytest.raises(ShapeError, match=r"LayerNorm.*\(\.\.\., 8\).*\(2, 7\)"):
        LayerNorm(8)(np.zeros((2, 7), np.float32))


def test_non_array_input_is_a_type_error():
    with pytest.raises(TypeError, match="Linear expects a numpy array, got list"):
        Linear(2, 2)([[1.0, 2.0]])


def test_shape_only_layers_refuse_to_run():
    for layer, x in [(Linear(4, 3, shape_only=True), np.zeros((1, 4), np.float32)),
                     (Conv2d(3, 4, 3, shape_only=True), np.zeros((1, 3, 5, 5), np.float32)),
                     (Embedding(10, 4, shape_only=True), np.array([1])),
                     (LayerNorm(4, shape_only=True), np.zeros((1, 4), np.float32))]:
        with pytest.raises(ShapeOnlyError, match="shape_only=True"):
            layer(x)


# -- dtypes ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_layers_compute_in_their_parameter_dtype(dtype):
    x = rng().standard_normal((2, 4, 8)).astype(dtype)
    for layer in [Linear(8, 8, dtype=dtype), LayerNorm(8, dtype=dtype), GELU(), ReLU(),
                  MultiHeadAttention(8, 2, causal=True, dtype=dtype),
                  TransformerBlock(8, 2, dtype=dtype)]:
        y = layer(x)
        assert y.dtype == dtype, f"{layer.describe()} turned {np.dtype(dtype)} into {y.dtype}"
        assert layer.backward(np.ones_like(y)).dtype == dtype
        for name, param in layer.named_parameters():
            assert param.data.dtype == dtype and param.grad.dtype == dtype, name
    conv = Conv2d(2, 3, 3, padding=1, dtype=dtype)
    assert conv(rng().standard_normal((1, 2, 4, 4)).astype(dtype)).dtype == dtype


def test_float64_input_to_float32_layers_gives_float32():
    x = rng().standard_normal((2, 8))
    assert Linear(8, 4)(x).dtype == np.float32
    assert LayerNorm(8)(x).dtype == np.float32
    assert Conv2d(2, 3, 3)(rng().standard_normal((1, 2, 5, 5))).dtype == np.float32


# -- gradient accumulation ------------------------------------------------------------------------
def test_backward_twice_without_zero_grad_doubles_gradients():
    model = Sequential(Linear(4, 5, rng=rng()), GELU(), LayerNorm(5), Linear(5, 2, rng=rng(1)))
    x = rng(2).standard_normal((3, 4)).astype(np.float32)
    grad = rng(3).standard_normal((3, 2)).astype(np.float32)
    model(x)
    model.backward(grad)
    once = {name: p.grad.copy() for name, p in model.named_parameters()}
    model(x)                    # backward released the saved activations: forward again
    model.backward(grad)
    for name, p in model.named_parameters():
        np.testing.assert_allclose(p.grad, 2 * once[name], rtol=1e-6, err_msg=name)
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_kept_state_leaves_grads_pending_backward_and_weights_as_they_were():
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    model(x)                                    # a forward whose backward is still pending
    model.backward(np.ones((5, 2), np.float32))
    grads = [p.grad for p in model.parameters()]
    y = model(x)
    weights = [p.data.copy() for p in model.parameters()]
    with nn.KeptState(model, weights=True) as kept:
        assert all(p.grad is None for p in model.parameters())
        model(2 * x)
        model.backward(np.ones((5, 2), np.float32))
        for param in kept.params:
            param.data -= 0.1 * param.grad
        kept.restore_weights()
        assert all(np.array_equal(p.data, w) for p, w in zip(model.parameters(), weights))
        model(x)
        for param in kept.params:
            param.data += 1.0
    assert [p.grad for p in model.parameters()] == grads      # the same arrays, untouched
    assert all(np.array_equal(p.data, w) for p, w in zip(model.parameters(), weights))
    model.backward(np.ones_like(y))                           # the pending backward still runs
    fresh = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    with nn.KeptState(fresh):
        fresh(x)
    assert vars(fresh.layers[0])["_x"] is None                # nothing saved, as before
    assert "_mask" not in vars(fresh.layers[1])               # state it added is removed
    with pytest.raises(RuntimeError, match="weights=True"), nn.KeptState(fresh) as kept:
        kept.restore_weights()
