"""tinyprof.models: whole built-in models pass finite-difference gradient checks, compute in the
dtype they were built with, and name the failing layer by its path when fed a wrong shape."""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import assert_close_gradients, check_gradients

from tinyprof import models
from tinyprof.nn import Linear, ReLU, Sequential, ShapeError, ShapeOnlyError

TINY_GPT = dict(vocab_size=11, n_ctx=6, d_model=8, n_layer=2, n_head=2)


def tiny_gpt(**kwargs) -> models.GPT:
    return models.gpt2(**{**TINY_GPT, **kwargs})


def ids(batch: int = 2, seq: int = 5, vocab: int = 11, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, vocab, size=(batch, seq))


# -- gradients of whole models --------------------------------------------------------------------
def test_mlp_gradients():
    model = models.mlp((6, 5, 4, 3), activation="gelu", dtype=np.float64)
    errors = check_gradients(model, np.random.default_rng(1).standard_normal((4, 6)),
                             max_entries=25)
    assert set(errors) == {"input"} | {f"layers.{i}.{k}" for i in (0, 2, 4)
                                       for k in ("weight", "bias")}
    assert_close_gradients(errors)


def test_mlp_relu_gradients():
    model = models.mlp((5, 7, 3), dtype=np.float64, seed=3)
    assert_close_gradients(check_gradients(model, np.random.default_rng(2).standard_normal((3, 5))))


def test_small_cnn_gradients():
    model = models.small_cnn(in_channels=2, num_classes=3, image_size=8, channels=(3, 4),
                             dtype=np.float64)
    x = np.random.default_rng(1).standard_normal((2, 2, 8, 8))
    errors = check_gradients(model, x, max_entries=20)
    assert set(errors) == {"input", "layers.0.weight", "layers.0.bias", "layers.2.weight",
                           "layers.2.bias", "layers.5.weight", "layers.5.bias"}
    assert_close_gradients(errors)


GPT_CHECKED = ["wte.weight", "wpe.weight", "h.0.ln_1.weight", "h.0.attn.q_proj.weight",
               "h.0.attn.v_proj.bias", "h.0.attn.out_proj.weight", "h.1.attn.k_proj.weight",
               "h.1.ln_2.bias", "h.1.mlp.layers.0.weight", "h.1.mlp.layers.2.bias",
               "ln_f.weight", "ln_f.bias"]


def test_gpt2_gradients_including_the_tied_embedding():
    model = tiny_gpt(dtype=np.float64)
    errors = check_gradients(model, ids(), input_grad=False, params=GPT_CHECKED, max_entries=20)
    assert_close_gradients(errors)


def test_gpt2_tied_gradient_has_both_contributions():
    model = tiny_gpt(dtype=np.float64)
    tokens = ids(seq=4)
    grad = np.random.default_rng(1).standard_normal((2, 4, 11))
    model(tokens)
    model.backward(grad)
    total = model.wte.weight.grad.copy()
    model.zero_grad()
    model(tokens)
    model.head.backward(grad)          # the head's share alone: dE = dlogitsᵀ·h
    head_only = model.wte.weight.grad.copy()
    embedding_rows = np.abs(total - head_only).max(axis=1) > 1e-12
    # exactly the rows of tokens that were read got an extra embedding gradient
    np.testing.assert_array_equal(np.flatnonzero(embedding_rows), np.unique(tokens))


def test_gpt2_backward_returns_none_and_position_rows_beyond_seq_get_zero():
    model = tiny_gpt(dtype=np.float64)
    logits = model(ids(seq=4))
    assert logits.shape == (2, 4, 11)
    assert model.backward(np.ones_like(logits)) is None
    assert np.all(model.wpe.weight.grad[4:] == 0) and np.all(model.wpe.weight.grad[:4] != 0)


def test_gpt2_is_causal():
    model = tiny_gpt(dtype=np.float64)
    tokens = ids(batch=1, seq=6)
    before = model(tokens)
    changed_tokens = tokens.copy()
    changed_tokens[0, 3] = (tokens[0, 3] + 1) % 11
    after = model(changed_tokens)
    np.testing.assert_array_equal(after[0, :3], before[0, :3])
    assert np.abs(after[0, 3:] - before[0, 3:]).min() > 0


def test_builders_are_seeded():
    a, b, c = tiny_gpt(seed=1), tiny_gpt(seed=1), tiny_gpt(seed=2)
    np.testing.assert_array_equal(a.h[1].mlp[0].weight.data, b.h[1].mlp[0].weight.data)
    assert not np.array_equal(a.h[1].mlp[0].weight.data, c.h[1].mlp[0].weight.data)


def test_default_builders_output_shapes():
    x = np.zeros((2, 784), np.float32)
    assert models.mlp()(x).shape == (2, 10)
    assert models.small_cnn()(np.zeros((2, 3, 32, 32), np.float32)).shape == (2, 10)


# -- dtypes ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_models_compute_in_their_dtype(dtype):
    rng = np.random.default_rng(0)
    cases = [
        (models.mlp((6, 5, 3), dtype=dtype), rng.standard_normal((2, 6)).astype(dtype)),
        (models.small_cnn(2, 3, image_size=8, channels=(3, 4), dtype=dtype),
         rng.standard_normal((2, 2, 8, 8)).astype(dtype)),
        (tiny_gpt(dtype=dtype), ids()),
    ]
    for model, x in cases:
        y = model(x)
        assert y.dtype == dtype, f"{type(model).__name__}: output {y.dtype}, built {dtype}"
        model.backward(np.ones_like(y))
        for name, param in model.named_parameters():
            assert param.data.dtype == dtype, name
            assert param.grad.dtype == dtype, name
        assert model.dtype == dtype


def test_float64_input_to_float32_models_gives_float32():
    rng = np.random.default_rng(0)
    assert models.mlp((6, 5, 3))(rng.standard_normal((2, 6))).dtype == np.float32
    cnn = models.small_cnn(2, 3, image_size=8, channels=(3, 4))
    assert cnn(rng.standard_normal((2, 2, 8, 8))).dtype == np.float32
    block = tiny_gpt().h[0]
    assert block(rng.standard_normal((2, 3, 8))).dtype == np.float32


# -- refusing bad inputs, naming the layer by its path --------------------------------------------
def test_mlp_wrong_width_names_first_layer():
    with pytest.raises(ShapeError) as info:
        models.mlp()(np.zeros((2, 100), np.float32))
    assert str(info.value) == ("Linear 'layers.0' expected input of shape (..., 784), "
                               "got (2, 100)")


def test_mismatched_sequential_names_the_inner_layer():
    model = Sequential(Linear(4, 5), ReLU(), Linear(6, 3))
    with pytest.raises(ShapeError, match=r"Linear 'layers\.2' .*\(\.\.\., 6\), got \(2, 5\)"):
        model(np.zeros((2, 4), np.float32))


def test_small_cnn_wrong_channels_and_wrong_image_size():
    cnn = models.small_cnn()
    with pytest.raises(ShapeError, match=r"Conv2d 'layers\.0' .*\(N, 3, H, W\), "
                                         r"got \(2, 1, 32, 32\)"):
        cnn(np.zeros((2, 1, 32, 32), np.float32))
    with pytest.raises(ShapeError, match=r"Linear 'layers\.7' .*\(\.\.\., 4096\), got \(2, 1024\)"):
        cnn(np.zeros((2, 3, 16, 16), np.float32))


def test_gpt2_too_long_and_bad_ids():
    model = tiny_gpt()
    with pytest.raises(ShapeError, match=r"GPT expected input of shape \(batch, seq ≤ 6\) of "
                                         r"token ids, got \(1, 7\)"):
        model(np.zeros((1, 7), dtype=int))
    with pytest.raises(ShapeError, match=r"GPT .*got \(5,\)"):
        model(np.zeros(5, dtype=int))
    with pytest.raises(IndexError,
                       match=r"Embedding 'wte' has 11 rows; got token ids from 0 to 11"):
        model(np.array([[0, 11]]))


def test_gpt2_sub_modules_carry_their_paths():
    model = tiny_gpt()
    assert model.h[1].mlp[2].name == "h.1.mlp.layers.2"
    with pytest.raises(ShapeError, match=r"MultiHeadAttention 'h\.0\.attn' expected input of "
                                         r"shape \(batch, seq, 8\), got \(2, 4, 7\)"):
        model.h[0].attn(np.zeros((2, 4, 7), np.float32))
    with pytest.raises(ShapeError, match=r"LayerNorm 'ln_f' .*\(\.\.\., 8\), got \(3, 9\)"):
        model.ln_f(np.zeros((3, 9), np.float32))


def test_builder_argument_errors():
    with pytest.raises(ValueError, match="unknown size 'tiny'"):
        models.gpt2("tiny")
    with pytest.raises(ShapeError, match=r"d_model \(10\) must be divisible by n_head \(3\)"):
        models.gpt2(d_model=10, n_head=3, shape_only=True)
    with pytest.raises(ValueError, match="unknown activation 'tanh'"):
        models.mlp(activation="tanh")
    with pytest.raises(ValueError, match="at least an input and an output"):
        models.mlp((5,))


@pytest.mark.parametrize("build, x", [
    (lambda: models.mlp(shape_only=True), np.zeros((1, 784), np.float32)),
    (lambda: models.small_cnn(shape_only=True), np.zeros((1, 3, 32, 32), np.float32)),
    (lambda: models.gpt2("small", shape_only=True), np.zeros((1, 4), dtype=int)),
])
def test_shape_only_models_refuse_to_run(build, x):
    model = build()
    assert model.shape_only
    with pytest.raises(ShapeOnlyError, match="shape_only=True"):
        model(x)


# -- gradient accumulation ------------------------------------------------------------------------
def test_gpt2_backward_twice_doubles_every_gradient_including_the_tied_one():
    model = tiny_gpt(dtype=np.float64)
    tokens = ids()
    grad = np.random.default_rng(1).standard_normal((2, 5, 11))
    model(tokens)
    model.backward(grad)
    once = {name: p.grad.copy() for name, p in model.named_parameters()}
    model(tokens)                       # a second full pass, no zero_grad in between
    model.backward(grad)
    for name, p in model.named_parameters():
        np.testing.assert_allclose(p.grad, 2 * once[name], rtol=1e-12, atol=1e-15, err_msg=name)
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())
