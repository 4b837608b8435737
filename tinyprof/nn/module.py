"""Parameters and the Module base class: the one walk over a model that everything else uses."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from .checks import float_dtype, same_shape


class ShapeError(ValueError):
    """An input whose shape a layer cannot accept; the message names the layer and both shapes."""


class ShapeOnlyError(RuntimeError):
    """Raised when a model built with ``shape_only=True`` is asked to compute."""


@dataclass(frozen=True)
class ShapeOnly:
    """Stands in for a weight array of a ``shape_only=True`` model: shape and dtype, no storage."""

    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def size(self) -> int:
        """The product of the shape, as an exact Python int (never overflows)."""
        return math.prod(int(d) for d in self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self.dtype).itemsize


class Parameter:
    """A trainable array (``.data``) and the gradient the last backward left for it (``.grad``)."""

    def __init__(self, data: np.ndarray | ShapeOnly):
        self.data = data
        self.grad: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.data.dtype)

    @property
    def size(self) -> int:
        """Number of scalars: the product of the shape (an exact Python int)."""
        return math.prod(int(d) for d in self.shape)

    @property
    def nbytes(self) -> int:
        """size × bytes per element of the dtype."""
        return self.size * self.dtype.itemsize

    @property
    def shape_only(self) -> bool:
        return isinstance(self.data, ShapeOnly)

    def accumulate_grad(self, grad: np.ndarray) -> None:
        """Add ``grad`` to ``.grad`` (gradients of a parameter used twice add up)."""
        grad = grad.astype(self.dtype, copy=False)
        if self.grad is None:
            self.grad = grad
        else:
            self.grad += grad

    def __repr__(self) -> str:
        kind = "shape-only " if self.shape_only else ""
        return f"Parameter({kind}shape={self.shape}, dtype={self.dtype})"


def new_parameter(
    shape: tuple[int, ...],
    dtype: np.dtype | type,
    shape_only: bool,
    rng: np.random.Generator | None,
    scale: float = 0.0,
    fill: float = 0.0,
) -> Parameter:
    """A parameter drawn from U(-scale, scale) (or filled with ``fill`` when scale is 0);
    ``dtype`` must be a floating-point type."""
    dtype = float_dtype("parameter", dtype)
    if shape_only:
        return Parameter(ShapeOnly(tuple(shape), dtype))
    if scale:
        rng = rng if rng is not None else np.random.default_rng(0)
        data = rng.uniform(-scale, scale, size=shape).astype(dtype)
    else:
        data = np.full(shape, fill, dtype=dtype)
    return Parameter(data)


class Module:
    """Base class of every layer and model.

    Subclasses implement ``forward(x)`` and ``backward(grad)``; ``backward`` returns the gradient
    with respect to the input and adds the parameters' gradients into their ``.grad``. Parameters
    and sub-modules are found by walking the instance's attributes: see :meth:`children` and
    :meth:`own_parameters` for exactly what counts.
    """

    name: str = ""

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.forward(x)

    def forward(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} has no forward")

    def backward(self, grad: np.ndarray) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} has no backward")

    # -- walking the model -------------------------------------------------------------------
    def children(self) -> Iterator[tuple[str, "Module"]]:
        """Direct sub-modules with their attribute names, in attribute order.

        A sub-module is found held directly (``self.fc``), in a list or tuple (``self.h[3]``,
        named ``h.3``) or as a value of a dict (``self.heads["q"]``, named ``heads.q``; the
        dict's keys must be strings). Attributes whose names start with ``_`` are private and
        not walked. A module nested deeper than that (a list in a dict, a module inside a
        plain object) is refused with a TypeError naming the attribute, never skipped.
        """
        for key, value in vars(self).items():
            if key.startswith("_"):
                continue
            if isinstance(value, Module):
                yield key, value
            elif isinstance(value, (list, tuple)):
                for i, item in enumerate(value):
                    if isinstance(item, Module):
                        yield f"{key}.{i}", item
                    else:
                        self._refuse_hidden(f"{key}[{i}]", item)
            elif isinstance(value, dict):
                for name, item in value.items():
                    if isinstance(item, Module) and isinstance(name, str):
                        yield f"{key}.{name}", item
                    elif isinstance(item, Module) or _holds_module(item):
                        raise TypeError(
                            f"{self.describe()}.{key}[{name!r}]: a dict of modules needs "
                            "string keys and modules as values, so that each module has a "
                            "name and is counted")

    def _refuse_hidden(self, where: str, item: object) -> None:
        if _holds_module(item):
            raise TypeError(f"{self.describe()}.{where} holds modules inside a "
                            f"{type(item).__name__}: keep sub-modules directly in an attribute, "
                            "a list, a tuple or a dict so they are found and counted")

    def own_parameters(self) -> Iterator[tuple[str, Parameter]]:
        """Parameters held directly by this module (not by its children): every public attribute
        whose value is a :class:`Parameter`. A plain numpy array is not a parameter (it is
        state, like a mask or a running statistic), and private attributes are not walked."""
        for key, value in vars(self).items():
            if isinstance(value, Parameter) and not key.startswith("_"):
                yield key, value

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, "Module"]]:
        """This module and every descendant, depth first, with dotted names."""
        yield prefix, self
        for key, child in self.children():
            yield from child.named_modules(f"{prefix}.{key}" if prefix else key)

    def named_parameters(self) -> Iterator[tuple[str, Parameter]]:
        """Every parameter once (a tied parameter under the first name it is found at)."""
        seen: set[int] = set()
        for module_name, module in self.named_modules():
            for key, param in module.own_parameters():
                if id(param) not in seen:
                    seen.add(id(param))
                    yield (f"{module_name}.{key}" if module_name else key), param

    def parameters(self) -> Iterator[Parameter]:
        """Every parameter once; the walk that counting, optimizers and memory all use."""
        for _, param in self.named_parameters():
            yield param

    def zero_grad(self) -> None:
        """Forget the gradients of the last backward (sets ``.grad`` to None)."""
        for param in self.parameters():
            param.grad = None

    def set_names(self) -> "Module":
        """Give every sub-module its dotted path as ``.name`` (used in error messages).

        A module object may appear once in a model: its forward saves one input for its
        backward, so a second use would overwrite the first. A layer used twice is refused
        here, naming both places; to share weights, give two layers the same Parameter."""
        seen: dict[int, str] = {}
        for path, module in self.named_modules():
            if id(module) in seen:
                raise ValueError(
                    f"{type(module).__name__} is used twice in one model, at "
                    f"'{seen[id(module)] or '(model)'}' and '{path}': a layer keeps one input "
                    "for its backward, so build a second layer (to share weights, give both "
                    "the same Parameter)")
            seen[id(module)] = path
            module.name = path
        return self

    # -- helpers for subclasses ---------------------------------------------------------------
    @property
    def dtype(self) -> np.dtype:
        """The dtype of the model's parameters (float32 when it has none)."""
        for param in self.parameters():
            return param.dtype
        return np.dtype(np.float32)

    @property
    def shape_only(self) -> bool:
        return any(param.shape_only for param in self.parameters())

    def describe(self) -> str:
        """``Type 'path'`` for error messages."""
        where = f" '{self.name}'" if self.name else ""
        return f"{type(self).__name__}{where}"

    def check_runnable(self) -> None:
        if self.shape_only:
            raise ShapeOnlyError(
                f"{self.describe()} was built with shape_only=True: it has parameter shapes but "
                "no weights, so it can be counted but not run. Build it without shape_only to run "
                "it."
            )

    def pop_saved(self, *names: str) -> tuple:
        """Hand ``backward`` the arrays ``forward`` saved under ``names`` and forget them.

        Like PyTorch, a backward frees what its forward saved, so after a training step only
        parameters, gradients and optimizer state stay allocated. A second backward needs a new
        forward first.
        """
        values = tuple(getattr(self, name, None) for name in names)
        if any(value is None for value in values):
            raise RuntimeError(
                f"{self.describe()}.backward needs a forward first: backward frees the "
                "activations forward saved, so run forward again before another backward")
        for name in names:
            setattr(self, name, None)
        return values

    def check_grad(self, grad: np.ndarray, expected: tuple[int, ...]) -> None:
        """Refuse a gradient whose shape is not the output's (no silent broadcasting)."""
        same_shape(f"{self.describe()}.backward", "the gradient", grad, expected)

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape ``forward`` returns for an input of ``input_shape``, after checking that
        shape (a ShapeError naming this layer, the shape expected and the one received).

        A layer states its shape contract here, once: its ``forward`` checks its input with it
        (:meth:`check_forward_input`) and the shape walk of :mod:`tinyprof.shapes` propagates
        shapes with it, so the two cannot disagree. A layer made of other layers describes how
        shapes flow through its children with ``tinyprof.shapes.register_container``; one that
        states neither gets a MissingShapeRuleError from the walk."""
        raise NotImplementedError(f"{type(self).__name__} does not state its output shape: "
                                  "define output_shape(self, input_shape)")

    def check_shape(self, shape: tuple[int, ...], expected: str, ok: bool) -> None:
        """Raise a ShapeError naming this layer, the expected and the received shape unless
        ``ok``."""
        if not ok:
            raise ShapeError(f"{self.describe()} expected input of shape {expected}, got "
                             f"{tuple(shape)}")

    def check_input(self, x: np.ndarray, expected: str = "", ok: bool = True) -> None:
        """Refuse what is not a numpy array of numbers, then (unless ``ok``) raise a ShapeError
        naming this layer, the expected and the received shape."""
        if not isinstance(x, np.ndarray):
            raise TypeError(f"{self.describe()} expects a numpy array, got {type(x).__name__}")
        if x.dtype.kind not in "biuf":
            raise TypeError(f"{self.describe()} expects an array of numbers (bool, integer or "
                            f"floating point), got dtype {x.dtype}")
        self.check_shape(x.shape, expected, ok)

    def check_forward_input(self, x: np.ndarray) -> tuple[int, ...]:
        """:meth:`check_input`'s array checks, then :meth:`output_shape` of ``x.shape``: what
        every layer's ``forward`` runs first. Returns the output shape."""
        self.check_input(x)
        return self.output_shape(x.shape)

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        kids = list(self.children())
        if not kids:
            return lines[0] + ")"
        for key, child in kids:
            body = repr(child).replace("\n", "\n  ")
            lines.append(f"  ({key}): {body}")
        return "\n".join(lines) + "\n)"


def _holds_module(value: object) -> bool:
    """Whether a container nested inside a list or dict attribute holds a Module."""
    if isinstance(value, (list, tuple)):
        return any(isinstance(v, Module) or _holds_module(v) for v in value)
    if isinstance(value, dict):
        return any(isinstance(v, Module) or _holds_module(v) for v in value.values())
    return False


def as_float(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``x`` in the layer's dtype (no copy when it already is)."""
    return np.asarray(x).astype(dtype, copy=False)
