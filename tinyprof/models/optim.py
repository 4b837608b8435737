"""Optimizers with real state arrays, so their memory can be measured, not assumed.

SGD keeps no state; SGD with momentum keeps one velocity per parameter (1× the parameters);
Adam keeps first and second moments (2× the parameters).
"""

from __future__ import annotations

import numbers
from typing import Iterable

import numpy as np

from ..nn.module import Module, Parameter


class Optimizer:
    """Holds the parameters and their per-parameter state arrays."""

    def __init__(self, params: Iterable[Parameter] | Module, lr: float):
        if isinstance(params, Module):   # optim.SGD(model, ...) means its parameters
            params = params.parameters()
        self.params = list(params)
        odd = [p for p in self.params if not isinstance(p, Parameter)]
        if odd:
            raise TypeError(f"{type(self).__name__} takes a model or model.parameters(), got "
                            f"{type(odd[0]).__name__} among them")
        if not self.params:
            raise ValueError(f"{type(self).__name__} got no parameters to optimize")
        if not lr > 0:   # also refuses NaN
            raise ValueError(f"{type(self).__name__}: learning rate must be positive, got {lr}")
        self.lr = lr
        self.state: dict[int, dict[str, np.ndarray]] = {}

    def zero_grad(self) -> None:
        for param in self.params:
            param.grad = None

    def state_arrays(self) -> list[np.ndarray]:
        """Every state array the optimizer holds."""
        return [array for slots in self.state.values() for array in slots.values()]

    def state_bytes(self) -> int:
        """Bytes held in optimizer state (0 before the first step)."""
        return sum(array.nbytes for array in self.state_arrays())

    def _slots(self, param: Parameter, names: tuple[str, ...]) -> dict[str, np.ndarray]:
        if id(param) not in self.state:
            self.state[id(param)] = {name: np.zeros_like(param.data) for name in names}
        return self.state[id(param)]

    def step(self) -> None:
        """Update every parameter that has a gradient (its shape must be the parameter's)."""
        for param in self.params:
            if param.grad is not None:
                if param.grad.shape != param.shape:
                    raise ValueError(f"{type(self).__name__}.step: a gradient of shape "
                                     f"{param.grad.shape} for a parameter of shape "
                                     f"{param.shape} (no broadcasting: the backward pass "
                                     "produced the wrong shape)")
                self._update(param)

    def _update(self, param: Parameter) -> None:
        raise NotImplementedError


class SGD(Optimizer):
    """w ← w − lr·g; with momentum μ: v ← μ·v + g, w ← w − lr·v (state: v, 1× params)."""

    def __init__(self, params: Iterable[Parameter] | Module, lr: float = 0.01,
                 momentum: float = 0.0):
        super().__init__(params, lr)
        if not momentum >= 0:
            raise ValueError(f"SGD: momentum must be ≥ 0, got {momentum}")
        self.momentum = momentum

    def _update(self, param: Parameter) -> None:
        if self.momentum:
            velocity = self._slots(param, ("velocity",))["velocity"]
            velocity *= self.momentum
            velocity += param.grad
            param.data -= self.lr * velocity
        else:
            param.data -= self.lr * param.grad


class Adam(Optimizer):
    """m ← β₁m + (1−β₁)g; v ← β₂v + (1−β₂)g²; w ← w − lr·m̂/(√v̂ + ε) (state: m, v, 2× params).

    As in ``torch.optim.Adam``, each parameter counts its own steps t (the bias corrections
    m̂ = m/(1 − β₁ᵗ), v̂ = v/(1 − β₂ᵗ) use it): a parameter whose gradient was None for the first
    steps starts its count when it first gets one. float16 parameters are refused: ε = 1e-8
    rounds to 0 in float16 and g² underflows, so the update becomes inf or NaN; train in float32
    (mixed precision keeps float32 weights and moments beside float16 copies).
    """

    def __init__(self, params: Iterable[Parameter] | Module, lr: float = 1e-3,
                 betas=(0.9, 0.999), eps: float = 1e-8):
        super().__init__(params, lr)
        half = [p for p in self.params if p.dtype == np.float16]
        if half:
            raise TypeError(f"Adam: {len(half)} parameter(s) are float16, where eps={eps:g} "
                            "rounds to 0 and squared gradients underflow (the update becomes "
                            "inf/NaN); train in float32, or keep float32 master weights as mixed "
                            "precision does")
        if (isinstance(betas, (str, bytes)) or not hasattr(betas, "__len__")
                or len(betas) != 2 or not all(isinstance(b, numbers.Real)
                                              and not isinstance(b, bool) for b in betas)):
            raise ValueError(f"Adam: betas is a pair of numbers (beta1, beta2), e.g. (0.9, "
                             f"0.999), got {betas!r}")
        self.beta1, self.beta2 = (float(b) for b in betas)
        if not (0 <= self.beta1 < 1 and 0 <= self.beta2 < 1):
            raise ValueError(f"Adam: betas must lie in [0, 1), got {tuple(betas)}")
        if not eps >= 0:
            raise ValueError(f"Adam: eps must be ≥ 0, got {eps}")
        self.eps = eps
        self.steps: dict[int, int] = {}   # id(parameter) → its step count t

    @property
    def t(self) -> int:
        """The most steps any parameter has taken."""
        return max(self.steps.values(), default=0)

    def _update(self, param: Parameter) -> None:
        t = self.steps[id(param)] = self.steps.get(id(param), 0) + 1
        slots = self._slots(param, ("m", "v"))
        m, v, g = slots["m"], slots["v"], param.grad
        m *= self.beta1
        m += (1 - self.beta1) * g
        v *= self.beta2
        v += (1 - self.beta2) * g * g
        m_hat_scale = 1.0 / (1 - self.beta1 ** t)
        v_hat_scale = 1.0 / (1 - self.beta2 ** t)
        param.data -= self.lr * (m * m_hat_scale) / (np.sqrt(v * v_hat_scale) + self.eps)
