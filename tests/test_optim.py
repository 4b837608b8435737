"""tinyprof.optim: update rules against hand computation, state memory as a multiple of the
parameter bytes, and loss going down on a small regression problem."""

from __future__ import annotations

import numpy as np
import pytest

from tinyprof import models, parameter_bytes
from tinyprof.nn import CrossEntropyLoss, Linear, MSELoss, Parameter
from tinyprof.optim import SGD, Adam

TINY_GPT = dict(vocab_size=11, n_ctx=6, d_model=8, n_layer=2, n_head=2)


def one_parameter(seed: int = 0) -> Parameter:
    return Parameter(np.random.default_rng(seed).standard_normal((3, 4)))


def gradients(steps: int, seed: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((3, 4)) for _ in range(steps)]


# -- update rules ---------------------------------------------------------------------------------
def test_sgd_update_is_w_minus_lr_g():
    param = one_parameter()
    w = param.data.copy()
    optimizer = SGD([param], lr=0.1)
    for g in gradients(3):
        param.grad = g
        optimizer.step()
        w = w - 0.1 * g
        np.testing.assert_array_equal(param.data, w)
    assert optimizer.state_bytes() == 0 and optimizer.state_arrays() == []


def test_sgd_momentum_update_by_hand():
    param = one_parameter()
    w, v = param.data.copy(), np.zeros((3, 4))
    optimizer = SGD([param], lr=0.05, momentum=0.9)
    for g in gradients(4):
        param.grad = g
        optimizer.step()
        v = 0.9 * v + g
        w = w - 0.05 * v
        np.testing.assert_array_equal(param.data, w)


def test_adam_update_by_hand():
    param = one_parameter()
    w, m, v = param.data.copy(), np.zeros((3, 4)), np.zeros((3, 4))
    lr, b1, b2, eps = 0.01, 0.8, 0.99, 1e-6
    optimizer = Adam([param], lr=lr, betas=(b1, b2), eps=eps)
    for t, g in enumerate(gradients(5), start=1):
        param.grad = g
        optimizer.step()
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat, v_hat = m / (1 - b1**t), v / (1 - b2**t)
        w = w - lr * m_hat / (np.sqrt(v_hat) + eps)
        # the library multiplies by 1/(1 − βᵗ) where this divides: equal to rounding (1e-13)
        np.testing.assert_allclose(param.data, w, rtol=1e-13, atol=0)
    np.testing.assert_allclose(optimizer.state[id(param)]["m"], m, rtol=1e-13)
    assert optimizer.t == 5


def test_adam_first_step_moves_each_weight_by_lr():
    # m̂ = g and v̂ = g² after one step, so the step is lr·g/(|g| + ε) ≈ lr·sign(g)
    param = one_parameter()
    w = param.data.copy()
    param.grad = gradients(1)[0]
    Adam([param], lr=0.01, eps=0.0).step()
    np.testing.assert_allclose(w - param.data, 0.01 * np.sign(param.grad), rtol=1e-12)


def test_parameters_without_gradients_are_left_alone():
    a, b = one_parameter(0), one_parameter(1)
    b_before = b.data.copy()
    a.grad = np.ones((3, 4))
    optimizer = Adam([a, b], lr=0.1)
    optimizer.step()
    np.testing.assert_array_equal(b.data, b_before)
    assert optimizer.state_bytes() == 2 * a.nbytes


# -- state memory ---------------------------------------------------------------------------------
def _mlp_with_gradients(dtype=np.float32):
    model = models.mlp((20, 16, 4), dtype=dtype)
    x = np.random.default_rng(0).standard_normal((8, 20)).astype(dtype)
    loss = CrossEntropyLoss()
    loss(model(x), np.arange(8) % 4)
    model.backward(loss.backward())
    return model


def _gpt_with_gradients():
    model = models.gpt2(**TINY_GPT)
    tokens = np.random.default_rng(0).integers(0, 11, size=(2, 6))
    loss = CrossEntropyLoss()
    loss(model(tokens[:, :-1]), tokens[:, 1:])
    model.backward(loss.backward())
    return model


@pytest.mark.parametrize("build", [_mlp_with_gradients, _gpt_with_gradients])
@pytest.mark.parametrize("make, multiple", [
    (lambda p: SGD(p, lr=0.1), 0),
    (lambda p: SGD(p, lr=0.1, momentum=0.9), 1),
    (lambda p: Adam(p, lr=1e-3), 2),
])
def test_optimizer_state_is_a_multiple_of_parameter_bytes(build, make, multiple):
    model = build()
    optimizer = make(model.parameters())
    assert optimizer.state_bytes() == 0                     # state is created on the first step
    optimizer.step()
    assert optimizer.state_bytes() == multiple * parameter_bytes(model)
    n_params = len(list(model.parameters()))
    assert len(optimizer.state_arrays()) == multiple * n_params
    optimizer.step()
    assert optimizer.state_bytes() == multiple * parameter_bytes(model)   # not re-allocated


def test_tied_weight_gets_state_once():
    model = _gpt_with_gradients()
    optimizer = Adam(model.parameters())
    optimizer.step()
    assert id(model.head.weight) in optimizer.state
    assert sum(1 for p in optimizer.params if p is model.wte.weight) == 1
    assert parameter_bytes(model) == 4 * 1_896
    assert optimizer.state_bytes() == 2 * 4 * 1_896


@pytest.mark.parametrize("dtype, make, multiple", [
    (np.float16, lambda p: SGD(p, lr=0.1, momentum=0.9), 1),
    (np.float64, lambda p: Adam(p), 2),
])
def test_state_follows_the_parameter_dtype(dtype, make, multiple):
    model = _mlp_with_gradients(dtype)
    optimizer = make(model.parameters())
    optimizer.step()
    assert all(array.dtype == dtype for array in optimizer.state_arrays())
    n = 21 * 16 + 17 * 4
    assert optimizer.state_bytes() == multiple * np.dtype(dtype).itemsize * n


# -- training reduces the loss --------------------------------------------------------------------
def _regression_losses(make, steps: int) -> list[float]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 3))
    y = x @ np.array([[1.5], [-2.0], [0.5]]) + 0.3
    model = Linear(3, 1, dtype=np.float64, rng=rng)
    loss = MSELoss()
    optimizer = make(model.parameters())
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        losses.append(loss(model(x), y))
        model.backward(loss.backward())
        optimizer.step()
    return losses


@pytest.mark.parametrize("make", [
    lambda p: SGD(p, lr=0.1),
    lambda p: SGD(p, lr=0.05, momentum=0.9),
    lambda p: Adam(p, lr=0.1),
], ids=["sgd", "momentum", "adam"])
def test_optimizers_reduce_regression_loss(make):
    losses = _regression_losses(make, steps=60)
    assert losses[-1] < 0.01 * losses[0], f"loss went from {losses[0]:.4g} to {losses[-1]:.4g}"


# -- zero_grad and bad arguments ------------------------------------------------------------------
def test_zero_grad_clears_gradients():
    model = _mlp_with_gradients()
    assert all(p.grad is not None for p in model.parameters())
    optimizer = SGD(model.parameters(), lr=0.1)
    optimizer.zero_grad()
    assert all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize("make, message", [
    (lambda: SGD([one_parameter()], lr=0.0), "learning rate must be positive, got 0.0"),
    (lambda: Adam([one_parameter()], lr=-1e-3), "learning rate must be positive, got -0.001"),
    (lambda: SGD([one_parameter()], lr=float("nan")), "learning rate must be positive"),
    (lambda: SGD([], lr=0.1), "SGD got no parameters to optimize"),
    (lambda: Adam(iter([])), "Adam got no parameters to optimize"),
    (lambda: SGD([one_parameter()], momentum=-0.5), "momentum must be ≥ 0"),
    (lambda: Adam([one_parameter()], betas=(1.0, 0.999)), r"betas must lie in \[0, 1\)"),
    (lambda: Adam([one_parameter()], eps=-1.0), "eps must be ≥ 0"),
])
def test_bad_arguments_raise_value_error(make, message):
    with pytest.raises(ValueError, match=message):
        make()

