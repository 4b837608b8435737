"""Finite-difference gradient checks for tinyprof layers (test helper, float64 only).

A layer's backward is checked against central differences of a scalar loss
L = Σ y ⊙ R, where y is the layer's output and R a fixed random projection, so dL/dy = R:

    ∂L/∂θᵢ ≈ (L(θᵢ + ε) − L(θᵢ − ε)) / 2ε       (error O(ε²) plus rounding ~1e-16/ε)

and compared with what ``backward(R)`` returned (the input gradient) or accumulated (each
``param.grad``). The relative error is ‖analytic − numeric‖∞ / max(‖analytic‖∞, ‖numeric‖∞).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from tinyprof.nn import Module

EPS = 1e-6
TOLERANCE = 1e-6


def sample_indices(shape: tuple[int, ...], max_entries: int | None,
                   rng: np.random.Generator) -> list[tuple[int, ...]]:
    """Every index of ``shape``, or ``max_entries`` of them drawn without replacement."""
    total = int(np.prod(shape, dtype=np.int64))
    flat = np.arange(total)
    if max_entries is not None and total > max_entries:
        flat = np.sort(rng.choice(total, size=max_entries, replace=False))
    return [tuple(int(i) for i in np.unravel_index(k, shape)) for k in flat]


def numerical_gradient(loss: Callable[[], float], array: np.ndarray,
                       indices: list[tuple[int, ...]], eps: float = EPS) -> np.ndarray:
    """(loss(a + ε·eᵢ) − loss(a − ε·eᵢ)) / 2ε for each index i, perturbing ``array`` in place."""
    grads = np.empty(len(indices))
    for k, index in enumerate(indices):
        old = array[index]
        array[index] = old + eps
        plus = loss()
        array[index] = old - eps
        minus = loss()
        array[index] = old
        grads[k] = (plus - minus) / (2 * eps)
    return grads


def relative_error(analytic: np.ndarray, numeric: np.ndarray) -> float:
    """‖a − n‖∞ / max(‖a‖∞, ‖n‖∞); raises if both are zero (such a check could never fail)."""
    analytic, numeric = np.asarray(analytic, dtype=np.float64), np.asarray(numeric)
    scale = max(np.abs(analytic).max(), np.abs(numeric).max())
    if scale == 0:
        raise AssertionError("both gradients are exactly zero: the check would be vacuous")
    return float(np.abs(analytic - numeric).max() / scale)


def check_gradients(module: Module, x: np.ndarray, *, seed: int = 0, input_grad: bool = True,
                    params: list[str] | None = None, exclude: tuple[str, ...] = (),
                    max_entries: int | None = 40, eps: float = EPS) -> dict[str, float]:
    """Relative error of the input gradient (``"input"``) and of every named parameter gradient.

    ``params`` restricts the parameters checked (names from ``module.named_parameters()``) and
    ``exclude`` leaves some out (a gradient that is exactly zero in theory, such as attention's
    key bias, has only rounding noise to compare); ``max_entries`` checks that many randomly
    chosen entries of each array (None: all).
    """
    rng = np.random.default_rng(seed)
    named = dict(module.named_parameters())
    for name, param in named.items():
        if param.dtype != np.float64:
            raise TypeError(f"gradient checks need float64 parameters; {name} is {param.dtype}")
    out = module(x)
    projection = rng.standard_normal(out.shape)
    module.zero_grad()
    module(x)
    dx = module.backward(projection.copy())

    def loss() -> float:
        return float(np.sum(module(x) * projection))

    errors: dict[str, float] = {}
    if input_grad:
        if x.dtype != np.float64:
            raise TypeError(f"gradient checks need a float64 input, got {x.dtype}")
        indices = sample_indices(x.shape, max_entries, rng)
        numeric = numerical_gradient(loss, x, indices, eps)
        errors["input"] = relative_error(np.array([dx[i] for i in indices]), numeric)
    for name in params if params is not None else [n for n in named if n not in exclude]:
        param = named[name]
        if param.grad is None:
            raise AssertionError(f"backward left no gradient for {name}")
        if param.grad.shape != param.shape:
            raise AssertionError(f"{name}.grad has shape {param.grad.shape}, "
                                 f"parameter has {param.shape}")
        indices = sample_indices(param.shape, max_entries, rng)
        numeric = numerical_gradient(loss, param.data, indices, eps)
        errors[name] = relative_error(np.array([param.grad[i] for i in indices]), numeric)
    return errors


def check_loss_gradient(loss_fn, prediction: np.ndarray, target: np.ndarray,
                        eps: float = EPS) -> float:
    """Relative error of ``loss_fn.backward()`` against central differences of the loss value."""
    loss_fn(prediction, target)
    analytic = loss_fn.backward()
    indices = sample_indices(prediction.shape, None, np.random.default_rng(0))
    numeric = numerical_gradient(lambda: loss_fn(prediction, target), prediction, indices, eps)
    return relative_error(np.array([analytic[i] for i in indices]), numeric)


def assert_close_gradients(errors: dict[str, float], tolerance: float = TOLERANCE) -> None:
    """Fail naming every gradient whose relative error is at or above ``tolerance``."""
    bad = {name: err for name, err in errors.items() if not err < tolerance}
    assert not bad, f"gradient check failed (relative error ≥ {tolerance:g}): {bad}"
