"""Conv2d by im2col: the convolution becomes one (grouped) matrix multiply."""

from __future__ import annotations

import numpy as np

from .. import ops
from .checks import positive_int
from .module import Module, ShapeError, as_float, new_parameter


def _pair(name: str, value, minimum: int = 1) -> tuple[int, int]:
    """``value`` (an int or a pair) as a pair of ints ≥ ``minimum``, named in errors."""
    pair = (value, value) if np.isscalar(value) else tuple(value)
    if len(pair) != 2:
        raise ValueError(f"Conv2d: {name} must be an int or a pair of ints, got {value!r}")
    return tuple(positive_int("Conv2d", name, v, minimum) for v in pair)


def conv_output_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """⌊(size + 2·padding − dilation·(kernel − 1) − 1) / stride⌋ + 1."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


class Conv2d(Module):
    """2-D convolution over (N, C, H, W) with stride, padding, dilation and groups.

    Weight shape (out, in/groups, kh, kw). Forward FLOPs: 2·N·out·Ho·Wo·(in/groups)·kh·kw.
    Backward does the same amount twice: once for dX (Wᵀ·dY, then col2im) and once for dW.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, *,
                 dtype=np.float32, shape_only: bool = False, rng=None):
        in_channels = positive_int("Conv2d", "in_channels", in_channels)
        out_channels = positive_int("Conv2d", "out_channels", out_channels)
        groups = positive_int("Conv2d", "groups", groups)
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"Conv2d: in_channels ({in_channels}) and out_channels "
                             f"({out_channels}) must both be divisible by groups ({groups})")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride = _pair("kernel_size", kernel_size), _pair("stride", stride)
        self.padding = _pair("padding", padding, minimum=0)
        self.dilation = _pair("dilation", dilation)
        kh, kw = self.kernel_size
        fan_in = in_channels // groups * kh * kw
        bound = 1.0 / np.sqrt(fan_in)
        self.weight = new_parameter((out_channels, in_channels // groups, kh, kw), dtype,
                                    shape_only, rng, bound)
        self.bias = new_parameter((out_channels,), dtype, shape_only, rng, bound) if bias else None

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, int, int, int]:
        """(N, C, H, W) → (N, O, Ho, Wo), Ho = ⌊(H + 2·pad − dil·(k − 1) − 1)/stride⌋ + 1."""
        self.check_shape(input_shape, f"(N, {self.in_channels}, H, W)",
                         len(input_shape) == 4 and input_shape[1] == self.in_channels)
        n, c, h, w = input_shape
        ho, wo = (conv_output_size(size, k, s, p, d) for size, k, s, p, d in zip(
            (h, w), self.kernel_size, self.stride, self.padding, self.dilation))
        if ho < 1 or wo < 1:
            raise ShapeError(f"{self.describe()}: input {tuple(input_shape)} is smaller than the "
                             f"dilated kernel {self.kernel_size} with padding {self.padding}")
        return n, self.out_channels, ho, wo

    def forward(self, x: np.ndarray) -> np.ndarray:
        self.check_runnable()
        n, _, ho, wo = self.check_forward_input(x)
        x = as_float(x, self.weight.dtype)
        self._input_shape = x.shape
        cols = self._im2col(x, ho, wo)                          # (N, G, K, L)
        self._cols = cols
        weight = self.weight.data.reshape(self.groups, self.out_channels // self.groups, -1)
        out = ops.matmul(weight, cols)                          # (N, G, O/G, L)
        out = out.reshape(n, self.out_channels, ho, wo)
        if self.bias is not None:
            out += self.bias.data[None, :, None, None]
        return out

    def backward(self, grad: np.ndarray) -> np.ndarray:
        if getattr(self, "_input_shape", None) is not None:
            self.check_grad(grad, self.output_shape(self._input_shape))
        n, _, ho, wo = grad.shape
        g = self.groups
        grad_cols = grad.reshape(n, g, self.out_channels // g, ho * wo)
        weight = self.weight.data.reshape(g, self.out_channels // g, -1)
        (cols,) = self.pop_saved("_cols")
        dweight = ops.matmul(grad_cols, cols.transpose(0, 1, 3, 2)).sum(axis=0)
        del cols
        self.weight.accumulate_grad(dweight.reshape(self.weight.shape))
        if self.bias is not None:
            self.bias.accumulate_grad(grad.sum(axis=(0, 2, 3)))
        dcols = ops.matmul(weight.transpose(0, 2, 1), grad_cols)  # (N, G, K, L)
        return self._col2im(dcols, ho, wo)

    def _im2col(self, x: np.ndarray, ho: int, wo: int) -> np.ndarray:
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = (self.kernel_size, self.stride,
                                                  self.padding, self.dilation)
        n, c = x.shape[:2]
        xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw))) if ph or pw else x
        cols = np.empty((n, c, kh, kw, ho, wo), dtype=x.dtype)
        for i in range(kh):
            for j in range(kw):
                cols[:, :, i, j] = xp[:, :, i * dh: i * dh + sh * (ho - 1) + 1: sh,
                                      j * dw: j * dw + sw * (wo - 1) + 1: sw]
        return cols.reshape(n, self.groups, -1, ho * wo)

    def _col2im(self, dcols: np.ndarray, ho: int, wo: int) -> np.ndarray:
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = (self.kernel_size, self.stride,
                                                  self.padding, self.dilation)
        n, c, h, w = self._input_shape
        dcols = dcols.reshape(n, c, kh, kw, ho, wo)
        dxp = np.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=dcols.dtype)
        for i in range(kh):
            for j in range(kw):
                dxp[:, :, i * dh: i * dh + sh * (ho - 1) + 1: sh,
                    j * dw: j * dw + sw * (wo - 1) + 1: sw] += dcols[:, :, i, j]
        return dxp[:, :, ph: ph + h, pw: pw + w]

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}, dilation={self.dilation}, "
                f"groups={self.groups}")
