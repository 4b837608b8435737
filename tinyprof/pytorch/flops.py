"""FLOPs of a torch module, from tinyprof's own formulas on the shapes of one traced forward.

How it works: :func:`trace_calls` runs the module once on an example input (random values, or
token ids for a model that starts with an ``nn.Embedding``) with a forward pre- and post-hook on
every submodule, so each call's input and output shapes, its keyword arguments and whether its
input needs a gradient are recorded. Functions that a module of your own calls directly (``q @
k.transpose(-2, -1)``, ``F.scaled_dot_product_attention``, ``F.linear``) are seen through a
``TorchFunctionMode`` and charged to that module. Each record then goes to a formula, a small
pure function of shapes (as in ``torch/utils/flop_counter.py``): ``formula(module, call) ->
LayerFlops`` for a module type, ``formula(call) -> LayerFlops`` for a function. The numbers
follow the course's convention: a FLOP is one add or one multiply, a multiply-accumulate 2.

What a formula covers: all of its module's forward, children included (``nn.MultiheadAttention``
calls its ``out_proj`` through ``F.linear``, never as a module, so its formula counts all four
projections and the attention). A module with children and no formula is a container: its
children have rows of their own, and so does every function it calls itself (a module without
children that calls counted functions is one too). A leaf module type without a formula that
calls none, or a container calling a matmul-like function without one (``torch.einsum``,
``F.conv2d``, ...), raises :class:`MissingFlopFormulaError`: nothing is silently 0.

Backward: each formula states the matmul FLOPs of the input gradients (``grad_input``: dX, and
inside attention dQ, dK, dV and the scores' gradient) and of the weight gradients
(``grad_weight``: dW). A gradient that autograd does not compute costs nothing: no dX for an
input that does not require grad (a model's input, token ids), no dW for a frozen weight.

Against ``torch.utils.flop_counter.FlopCounterMode`` (the tests check every case):

- Linear, Conv1d/Conv2d without groups, ``nn.MultiheadAttention`` with ``need_weights=True``,
  and scaled dot-product attention on the math backend: equal, forward and backward;
- grouped convolutions (``groups = g > 1``): the forward and dX agree; for dW torch's counter
  uses the formula of an ungrouped convolution and reports g × the real work, 2·N·O·Ho·Wo·C·k
  where the kernel computes 2·N·O·Ho·Wo·(C/g)·k;
- ``F.scaled_dot_product_attention`` on CPU (and ``nn.MultiheadAttention(need_weights=False)``,
  which calls it): torch's counter has no formula for the CPU flash kernel and counts its
  4·B·L·S·E forward and 8·B·L·S·E backward attention matmuls as 0;
- elementwise work (bias adds, norms, activations, softmax) is not in torch's total and not in
  :func:`count_flops` either; :func:`flop_report` lists it in its own column.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..flops.registry import LayerFlops, MissingFlopFormulaError
from ..shapes.registry import FormulaRegistry, snake_case
from ..table import Table
from ..units import format_si
from .dispatch import is_torch_module

Shape = tuple[int, ...]

#: Module type → formula(module, call) -> LayerFlops.
MODULE_FLOPS = FormulaRegistry("FLOP formula for a torch module")
#: Function → formula(call) -> LayerFlops, for functions a container calls itself.
FUNCTION_FLOPS: dict[Any, Callable[["Call"], LayerFlops]] = {}
#: Functions that multiply matrices but have no formula here: called by a container, they
#: raise MissingFlopFormulaError instead of being counted as 0 (filled with torch's objects).
UNCOUNTED_FUNCTIONS: dict[Any, str] = {}
_BUILTINS: list[bool] = []


@dataclass(frozen=True)
class Call:
    """One traced call, as a formula sees it: the shapes of its tensor arguments (positional
    first, then keyword ones, in order), which of them require a gradient and which are
    ``nn.Parameter``s, the shape of its (first) output tensor, its other keyword
    arguments, and the bytes per element of each input and of the output."""

    inputs: tuple[Shape, ...]
    output: Shape
    input_grads: tuple[bool, ...] = ()
    input_params: tuple[bool, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    itemsizes: tuple[int, ...] = ()
    output_itemsize: int = 0

    @property
    def x(self) -> Shape:
        """The first input's shape."""
        return self.inputs[0] if self.inputs else ()

    @property
    def needs_input_grad(self) -> bool:
        """Does autograd compute a gradient for the first input (is dX computed)?"""
        return bool(self.input_grads and self.input_grads[0])


@dataclass(frozen=True)
class Traced:
    """A recorded call: ``name`` of the module (dotted path, ``"(model)"`` for the root), the
    module or function, whether it is a function call, and its :class:`Call`."""

    name: str
    target: Any
    function: bool
    call: Call
    owner_type: str = ""


def numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def register_flops(module_type: type, *, replace: bool = False):
    """Decorator: ``formula(module, call) -> LayerFlops`` counts every ``module_type`` call
    (and its subclasses'), its children included. Example::

        @register_flops(Scale)
        def scale_flops(module, call):
            return LayerFlops(elementwise=numel(call.x), grad_input=0, grad_weight=0)
    """
    _register_builtins()
    return MODULE_FLOPS.register(module_type, replace=replace)


def register_function_flops(function: Any, *, replace: bool = False):
    """Decorator: ``formula(call) -> LayerFlops`` counts ``function`` when a module without a
    formula of its own calls it (``torch.matmul``, ``F.scaled_dot_product_attention``, ...)."""
    _register_builtins()

    def decorate(formula: Callable[[Call], LayerFlops]) -> Callable[[Call], LayerFlops]:
        if function in FUNCTION_FLOPS and not replace:
            raise ValueError(f"{_function_name(function)} already has a FLOP formula; pass "
                             "replace=True to replace it")
        FUNCTION_FLOPS[function] = formula
        UNCOUNTED_FUNCTIONS.pop(function, None)
        return formula

    return decorate


def _function_name(function: Any) -> str:
    return getattr(function, "__name__", None) or repr(function)


# -- tracing ---------------------------------------------------------------------------------


def example_input(module, input_shape: Sequence[int], seed: int = 0):
    """A seeded input of ``input_shape`` for ``module``: token ids in [0, num_embeddings) when
    its first leaf module is an ``nn.Embedding``, otherwise standard normal values in the dtype
    and on the device of its first parameter (float32 on the CPU for a module without any)."""
    import torch

    shape = tuple(int(n) for n in input_shape)
    first_param = next(module.parameters(), None)
    device = first_param.device if first_param is not None else torch.device("cpu")
    generator = torch.Generator().manual_seed(seed)
    first_leaf = next((m for m in module.modules() if not list(m.children())), module)
    if isinstance(first_leaf, torch.nn.Embedding):
        ids = torch.randint(0, first_leaf.num_embeddings, shape, generator=generator)
        return ids.to(device)
    dtype = first_param.dtype if first_param is not None and first_param.is_floating_point() \
        else torch.float32
    return torch.randn(shape, generator=generator, dtype=dtype).to(device)


def _tensors(value: Any) -> list:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors(item)]
    return []


def _call(args: tuple, kwargs: dict, output: Any) -> Call:
    import torch

    tensors = _tensors(list(args)) + _tensors({k: v for k, v in kwargs.items()})
    outputs = _tensors(output)
    plain = {k: v for k, v in kwargs.items() if not _tensors(v)}
    return Call(tuple(tuple(t.shape) for t in tensors),
                tuple(outputs[0].shape) if outputs else (),
                tuple(bool(t.requires_grad) for t in tensors),
                tuple(isinstance(t, torch.nn.Parameter) for t in tensors), plain,
                tuple(t.element_size() for t in tensors),
                outputs[0].element_size() if outputs else 0)


def module_names(module) -> dict[int, str]:
    """id(submodule) → its dotted path in ``module`` (the root is ``"(model)"``), first path
    when a module is reachable by two."""
    names: dict[int, str] = {}
    for name, sub in module.named_modules(remove_duplicate=False):
        names.setdefault(id(sub), name or "(model)")
    return names


def trace_calls(module, inputs: Any, kwargs: dict | None = None) -> list[Traced]:
    """Run ``module(*inputs, **kwargs)`` once (gradients enabled, so that which inputs need a
    gradient is known; nothing is kept) and return the calls that formulas count, in the order
    they finished: every call of a module that has a formula or no children, and every call of
    a counted (or uncounted matmul-like) function made by a module without a formula."""
    import torch
    from torch.overrides import TorchFunctionMode

    _register_builtins()
    names = module_names(module)
    # (module, covered by a formula here or above, [functions it called that were recorded])
    stack: list[tuple[Any, bool, list]] = []
    records: list[Traced] = []

    def before(sub, args, kw):
        covered = bool(stack and stack[-1][1])
        stack.append((sub, covered or MODULE_FLOPS.find(sub) is not None, []))

    def after(sub, args, kw, output):
        _, covered, called = stack.pop()
        outer_covered = bool(stack and stack[-1][1])
        if outer_covered:
            return None
        if covered or not (list(sub.children()) or called):
            records.append(Traced(names.get(id(sub), type(sub).__name__), sub, False,
                                  _call(args, kw, output)))
        return None

    class Functions(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kw=None):
            kw = kw or {}
            output = func(*args, **kw)
            if stack and not stack[-1][1] and (func in FUNCTION_FLOPS
                                               or func in UNCOUNTED_FUNCTIONS):
                owner = stack[-1][0]
                stack[-1][2].append(func)
                records.append(Traced(names.get(id(owner), type(owner).__name__), func, True,
                                      _call(args, kw, output), type(owner).__name__))
            return output

    handles = []
    for sub in module.modules():
        handles.append(sub.register_forward_pre_hook(before, with_kwargs=True))
        handles.append(sub.register_forward_hook(after, with_kwargs=True))
    args = inputs if isinstance(inputs, tuple) else (inputs,)
    try:
        with torch.enable_grad(), Functions():
            module(*args, **(kwargs or {}))
    finally:
        for handle in handles:
            handle.remove()
    return records


# -- counting ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModuleFlops:
    """A row of :func:`flops_by_module`, with the fields of tinyprof's
    :class:`~tinyprof.flops.LayerCount`: a module call's (or function call's) counted work."""

    name: str
    type: str
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    matmul: int
    elementwise: int
    grad_input: int
    grad_weight: int
    note: str = ""

    @property
    def macs(self) -> int:
        """Multiply-accumulates of the forward matmuls: matmul / 2."""
        return self.matmul // 2

    @property
    def backward(self) -> int:
        """Backward matmul FLOPs: grad_input + grad_weight."""
        return self.grad_input + self.grad_weight


def _missing_module(record: Traced) -> MissingFlopFormulaError:
    cls = type(record.target)
    return MissingFlopFormulaError(
        f"no FLOP formula for {cls.__name__} '{record.name}' ({cls.__module__}."
        f"{cls.__qualname__}), a module without children, called on {record.call.inputs}. "
        f"Register one:\n"
        f"    from tinyprof.flops import LayerFlops\n"
        f"    from tinyprof.pytorch import register_flops\n"
        f"    @register_flops({cls.__name__})\n"
        f"    def {snake_case(cls.__name__)}_flops(module, call):  # call.x, call.output: shapes\n"
        f"        return LayerFlops(matmul=..., elementwise=..., grad_input=..., grad_weight=...)")


def _missing_function(record: Traced) -> MissingFlopFormulaError:
    name = _function_name(record.target)
    return MissingFlopFormulaError(
        f"no FLOP formula for {name}, called by '{record.name}' ({record.owner_type}) on "
        f"{record.call.inputs}: it "
        f"multiplies matrices, so it cannot count as 0. Register one with "
        f"tinyprof.pytorch.register_function_flops({name}), or a formula for the module "
        f"that calls it with tinyprof.pytorch.register_flops")


def _count(record: Traced, backward: bool) -> ModuleFlops:
    if record.function:
        formula = FUNCTION_FLOPS.get(record.target)
        if formula is None:
            raise _missing_function(record)
        flops = formula(record.call)
        kind = _function_name(record.target)
        name = f"{record.name} · {kind}"
    else:
        found = MODULE_FLOPS.find(record.target)
        if found is None:
            raise _missing_module(record)
        flops = found[0](record.target, record.call)
        kind, name = type(record.target).__name__, record.name
    if not isinstance(flops, LayerFlops):
        raise TypeError(f"the FLOP formula for {kind} '{name}' returned "
                        f"{type(flops).__name__}; it must return a LayerFlops")
    if backward and (flops.grad_input is None or flops.grad_weight is None):
        raise ValueError(f"the FLOP formula for {kind} '{name}' states no backward FLOPs: give "
                         "its LayerFlops grad_input and grad_weight (0 when none)")
    return ModuleFlops(name, kind, record.call.x, record.call.output, flops.matmul,
                       flops.elementwise, flops.grad_input or 0, flops.grad_weight or 0,
                       flops.note)


def _inputs(module, input_shape, inputs):
    if not is_torch_module(module):
        raise TypeError(f"count FLOPs of a torch.nn.Module here, got {type(module).__name__}")
    if inputs is not None:
        return inputs
    if input_shape is None:
        raise TypeError("give the input's shape (input_shape) or the inputs themselves "
                        "(inputs=...)")
    if hasattr(input_shape, "shape") and not isinstance(input_shape, tuple):
        raise TypeError(f"input_shape is a shape such as {tuple(input_shape.shape)}; pass a "
                        "tensor as inputs=... instead")
    return example_input(module, input_shape)


def flops_by_module(module, input_shape: Sequence[int] | None = None, *,
                    backward: bool = False, inputs: Any = None,
                    kwargs: dict | None = None) -> list[ModuleFlops]:
    """One row per counted call of one forward pass on an input of ``input_shape`` (or on
    ``inputs``, a tensor or a tuple of them, with ``kwargs``), in the order the calls finished.
    With ``backward=True`` every formula must state its backward FLOPs."""
    records = trace_calls(module, _inputs(module, input_shape, inputs), kwargs)
    return [_count(record, backward) for record in records]


def count_flops(module, input_shape: Sequence[int] | None = None, backward: bool = False, *,
                inputs: Any = None, kwargs: dict | None = None) -> int:
    """Matmul FLOPs (Linear, convolution, attention; 2 per multiply-accumulate) of one forward
    pass, or with ``backward=True`` of the backward pass alone (the input and weight gradients
    autograd computes). ``nn.Linear(128, 64)`` on (1, 128): 16,384 forward; backward 16,384
    (dW only: the model's input needs no gradient)."""
    rows = flops_by_module(module, input_shape, backward=backward, inputs=inputs,
                           kwargs=kwargs)
    return sum(row.backward if backward else row.matmul for row in rows)


def flop_report(module, input_shape: Sequence[int] | None = None, backward: bool = False, *,
                inputs: Any = None, kwargs: dict | None = None) -> Table:
    """Per-call FLOP table whose ``flops`` column sums to :func:`count_flops` (the columns of
    :func:`tinyprof.flop_report`)."""
    rows = flops_by_module(module, input_shape, backward=backward, inputs=inputs,
                           kwargs=kwargs)
    total = sum(r.backward if backward else r.matmul for r in rows)

    def share(flops: int) -> float:
        return 100.0 * flops / total if total else 0.0

    if backward:
        columns = ["name", "type", "output shape", "grad input", "grad weight", "flops",
                   "% flops"]
        body = [[r.name, r.type, r.output_shape, r.grad_input, r.grad_weight, r.backward,
                 share(r.backward)] for r in rows]
        footer = ["total", "", "", sum(r.grad_input for r in rows),
                  sum(r.grad_weight for r in rows), total, 100.0 if total else 0.0]
    else:
        columns = ["name", "type", "output shape", "flops", "macs", "elementwise", "% flops"]
        body = [[r.name, r.type, r.output_shape, r.matmul, r.macs, r.elementwise,
                 share(r.matmul)] for r in rows]
        footer = ["total", "", "", total, total // 2, sum(r.elementwise for r in rows),
                  100.0 if total else 0.0]
    shape = input_shape if inputs is None else tuple(getattr(inputs, "shape", ()))
    title = (f"{type(module).__name__} on {tuple(shape)}: {format_si(total, 'FLOPs')} "
             f"{'backward' if backward else 'forward'} (matmul)")
    return Table(columns, body, title=title, footer=footer,
                 formats={"% flops": lambda v: f"{v:.1f}%"})


# -- the formulas ----------------------------------------------------------------------------

def _weight_grad(module, *names: str) -> bool:
    return any(getattr(module, n, None) is not None and getattr(module, n).requires_grad
               for n in names)


def linear_flops(module, call: Call) -> LayerFlops:
    """y = x·Wᵀ + b on (..., in): 2·rows·in·out FLOPs, + 1 per output for the bias.

    Backward: dX = dY·W and dW = dYᵀ·X, 2·rows·in·out each (db is a sum, not a matmul)."""
    mm = 2 * numel(call.x[:-1]) * module.in_features * module.out_features
    return LayerFlops(matmul=mm, elementwise=numel(call.output) if module.bias is not None
                      else 0, grad_input=mm if call.needs_input_grad else 0,
                      grad_weight=mm if _weight_grad(module, "weight") else 0,
                      note="2·rows·in·out")


def conv_flops(module, call: Call) -> LayerFlops:
    """(N, C, *spatial) → (N, O, *out): 2·N·O·Π(out)·(C/groups)·Π(kernel) FLOPs, + 1 per output
    for the bias; the output size already holds stride, padding and dilation,
    ⌊(L + 2·pad − dil·(k − 1) − 1)/stride⌋ + 1. Backward: dX and dW cost the forward each.
    (torch's FlopCounterMode counts a grouped conv's dW as if groups = 1: g × this.)"""
    per_output = (module.in_channels // module.groups) * numel(module.kernel_size)
    mm = 2 * numel(call.output) * per_output
    return LayerFlops(matmul=mm, elementwise=numel(call.output) if module.bias is not None
                      else 0, grad_input=mm if call.needs_input_grad else 0,
                      grad_weight=mm if _weight_grad(module, "weight") else 0,
                      note="2·N·O·out·(C/g)·k")


SOFTMAX_FLOPS_PER_ELEMENT = 5


def multihead_attention_flops(module, call: Call) -> LayerFlops:
    """query (L, N, E) (or (N, L, E) with batch_first; (L, E) unbatched), key and value of
    length S and widths kdim, vdim, H heads:

    - projections: 2·N·L·E·E (q) + 2·N·S·kdim·E (k) + 2·N·S·vdim·E (v) + 2·N·L·E·E (out);
    - attention: Q·Kᵀ and A·V, 2·N·L·S·E each (all heads together).

    Elementwise, per score (N·H·L·S): scaling 1 + softmax 5. Backward: the projections' dW,
    their dX for each input that requires grad, the output projection's dX, and the
    attention's dA, dV, dQ, dK (2·N·L·S·E each)."""
    query = call.inputs[0]
    key = call.inputs[1] if len(call.inputs) > 1 else query
    batch_first = module.batch_first and len(query) == 3
    if len(query) == 2:
        n, length, source = 1, query[0], key[0]
    elif batch_first:
        n, length, source = query[0], query[1], key[1]
    else:
        n, length, source = query[1], query[0], key[0]
    e = module.embed_dim
    proj_q = 2 * n * length * e * e
    proj_k = 2 * n * source * module.kdim * e
    proj_v = 2 * n * source * module.vdim * e
    proj_out = 2 * n * length * e * e
    attention = 2 * (2 * n * length * source * e)
    grads = list(call.input_grads[:3]) + [False] * (3 - len(call.input_grads[:3]))
    in_trainable = _weight_grad(module, "in_proj_weight", "q_proj_weight", "k_proj_weight",
                                "v_proj_weight")
    out_trainable = _weight_grad(module.out_proj, "weight")
    needs_qkv = in_trainable or any(grads)
    dx = sum(p for p, g in zip((proj_q, proj_k, proj_v), grads) if g)
    grad_input = dx + (proj_out + 2 * attention if needs_qkv or out_trainable else 0)
    grad_weight = (proj_q + proj_k + proj_v if in_trainable else 0) + \
        (proj_out if out_trainable else 0)
    scores = n * module.num_heads * length * source
    return LayerFlops(matmul=proj_q + proj_k + proj_v + proj_out + attention,
                      elementwise=(1 + SOFTMAX_FLOPS_PER_ELEMENT) * scores,
                      grad_input=grad_input, grad_weight=grad_weight,
                      note="4 projections + QKᵀ + AV")


LAYERNORM_FLOPS_PER_ELEMENT = 7
LAYERNORM_FLOPS_PER_ROW = 5


def layernorm_flops(module, call: Call) -> LayerFlops:
    """(x − mean)/√(var + eps)·γ + β over the normalized dims: 7 FLOPs per element + 5 per row
    (as tinyprof's numpy LayerNorm); no matmul, forward or backward."""
    width = numel(module.normalized_shape)
    rows = numel(call.x) // width if width else 0
    return LayerFlops(elementwise=LAYERNORM_FLOPS_PER_ELEMENT * numel(call.x)
                      + LAYERNORM_FLOPS_PER_ROW * rows, grad_input=0, grad_weight=0,
                      note="7 per element + 5 per row")


def _per_element(flops: int, note: str) -> Callable[[Any, Call], LayerFlops]:
    def formula(module, call: Call) -> LayerFlops:
        return LayerFlops(elementwise=flops * numel(call.x), grad_input=0, grad_weight=0,
                          note=note)
    formula.__doc__ = f"{note}; no matmul, forward or backward."
    return formula


def gelu_flops(module, call: Call) -> LayerFlops:
    """Exact GELU ½·x·(1 + erf(x/√2)): 5 FLOPs per element (/√2, erf, 1 +, ·x, ·½); the tanh
    approximation ½·x·(1 + tanh(c·(x + 0.044715·x³))): 9, as tinyprof's numpy GELU."""
    per = 9 if getattr(module, "approximate", "none") == "tanh" else 5
    return LayerFlops(elementwise=per * numel(call.x), grad_input=0, grad_weight=0,
                      note=f"{per} per element")


def dropout_flops(module, call: Call) -> LayerFlops:
    """Training: a random mask and a rescale, 2 FLOPs per element; evaluation: the identity."""
    per = 2 if module.training and module.p > 0 else 0
    return LayerFlops(elementwise=per * numel(call.x), grad_input=0, grad_weight=0,
                      note=f"{per} per element")


def no_flops(module, call: Call) -> LayerFlops:
    """A lookup, a reshape or the identity: 0 FLOPs, forward and backward."""
    return LayerFlops(grad_input=0, grad_weight=0, note="no arithmetic")


def cross_entropy_flops(module, call: Call) -> LayerFlops:
    """log-softmax over the classes (5 per element: max, −, exp, Σ, log) and the mean of the
    picked log-probabilities; no matmul."""
    return LayerFlops(elementwise=SOFTMAX_FLOPS_PER_ELEMENT * numel(call.x), grad_input=0,
                      grad_weight=0, note="log-softmax")


def mse_flops(module, call: Call) -> LayerFlops:
    """(x − y)², then the mean: 3 FLOPs per element; no matmul."""
    return LayerFlops(elementwise=3 * numel(call.x), grad_input=0, grad_weight=0,
                      note="3 per element")


def _matrix(shape: Shape, first: bool) -> tuple[Shape, int, int]:
    """(batch, rows, cols) of a matmul operand; a vector is a row (first) or a column."""
    if len(shape) == 1:
        return (), (1 if first else shape[0]), (shape[0] if first else 1)
    return tuple(shape[:-2]), shape[-2], shape[-1]


def matmul_flops(call: Call) -> LayerFlops:
    """a @ b with broadcast batch dims: 2·Π(batch)·M·K·N. Backward: one product of the same
    size for each operand that requires grad (a parameter's is a weight gradient)."""
    import torch

    (batch_a, m, k), (batch_b, _, n) = _matrix(call.inputs[0], True), \
        _matrix(call.inputs[1], False)
    batch = tuple(torch.broadcast_shapes(batch_a, batch_b))
    mm = 2 * numel(batch) * m * k * n
    grads = call.input_grads[:2]
    params = call.input_params[:2]
    return LayerFlops(matmul=mm,
                      grad_input=sum(mm for g, p in zip(grads, params) if g and not p),
                      grad_weight=sum(mm for g, p in zip(grads, params) if g and p),
                      note="2·batch·M·K·N")


def functional_linear_flops(call: Call) -> LayerFlops:
    """F.linear(x, W, b): as nn.Linear, with W of shape (out, in)."""
    out, width = call.inputs[1]
    mm = 2 * numel(call.x[:-1]) * width * out
    grads = call.input_grads + (False,) * 3
    return LayerFlops(matmul=mm, elementwise=numel(call.output) if len(call.inputs) > 2 else 0,
                      grad_input=mm if grads[0] else 0, grad_weight=mm if grads[1] else 0,
                      note="2·rows·in·out")


def sdpa_flops(call: Call) -> LayerFlops:
    """softmax(Q·Kᵀ·scale + mask)·V, Q (..., L, E), K (..., S, E), V (..., S, Ev): Q·Kᵀ is
    2·Π(...)·L·S·E and A·V 2·Π(...)·L·S·Ev, over the full L×S scores also when causal (as
    the math backend computes them). Elementwise per score: scale 1, softmax 5, +1 with a mask.
    Backward: dA = dO·Vᵀ (when Q or K requires grad), dV = Aᵀ·dO, dQ = dS·K, dK = dSᵀ·Q,
    each for the operand that requires grad."""
    q, k, v = call.inputs[:3]
    batch, length, width = numel(q[:-2]), q[-2], q[-1]
    source, value_width = k[-2], v[-1]
    scores_mm = 2 * batch * length * source * width
    values_mm = 2 * batch * length * source * value_width
    gq, gk, gv = (tuple(call.input_grads[:3]) + (False,) * 3)[:3]
    grad_input = (values_mm if gq or gk else 0) + (values_mm if gv else 0) + \
        (scores_mm if gq else 0) + (scores_mm if gk else 0)
    masked = call.kwargs.get("is_causal") or len(call.inputs) > 3
    per_score = 1 + SOFTMAX_FLOPS_PER_ELEMENT + (1 if masked else 0)
    return LayerFlops(matmul=scores_mm + values_mm,
                      elementwise=per_score * batch * length * source,
                      grad_input=grad_input, grad_weight=0,
                      note="QKᵀ + AV" + (", causal: full L×S" if call.kwargs.get("is_causal")
                                         else ""))


def _register_builtins() -> None:
    """Register the formulas of torch's own modules and functions (once, on first use: only
    then is torch imported)."""
    if _BUILTINS:
        return
    _BUILTINS.append(True)
    import torch
    import torch.nn.functional as F
    from torch import nn

    modules = {
        nn.Linear: linear_flops, nn.Conv1d: conv_flops, nn.Conv2d: conv_flops,
        nn.Conv3d: conv_flops, nn.MultiheadAttention: multihead_attention_flops,
        nn.LayerNorm: layernorm_flops, nn.GELU: gelu_flops, nn.Dropout: dropout_flops,
        nn.ReLU: _per_element(1, "max(x, 0): 1 per element"),
        nn.SiLU: _per_element(4, "x·σ(x): exp, 1 +, /, · — 4 per element"),
        nn.Sigmoid: _per_element(3, "1/(1 + exp(−x)): 3 per element"),
        nn.Tanh: _per_element(1, "tanh: 1 per element"),
        nn.Softmax: _per_element(SOFTMAX_FLOPS_PER_ELEMENT, "softmax: 5 per element"),
        nn.Embedding: no_flops, nn.Identity: no_flops, nn.Flatten: no_flops,
        nn.Unflatten: no_flops,
        nn.CrossEntropyLoss: cross_entropy_flops, nn.MSELoss: mse_flops,
    }
    for cls, formula in modules.items():
        MODULE_FLOPS.register(cls)(formula)
    for function in (torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__,
                     torch.bmm, torch.Tensor.bmm, torch.mm,
                     torch.Tensor.mm):
        FUNCTION_FLOPS[function] = matmul_flops
    FUNCTION_FLOPS[F.linear] = functional_linear_flops
    FUNCTION_FLOPS[F.scaled_dot_product_attention] = sdpa_flops
    for function in (torch.einsum, torch.tensordot, torch.addmm, torch.baddbmm, torch.addbmm,
                     torch.Tensor.addmm, torch.Tensor.baddbmm, F.conv1d, F.conv2d, F.conv3d,
                     F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d, F.bilinear,
                     F.multi_head_attention_forward, torch.linalg.multi_dot):
        UNCOUNTED_FUNCTIONS[function] = _function_name(function)


__all__ = ["Call", "FUNCTION_FLOPS", "MODULE_FLOPS", "MissingFlopFormulaError", "ModuleFlops",
           "Traced", "count_flops", "example_input", "flop_report", "flops_by_module",
           "module_names", "register_flops", "register_function_flops", "trace_calls"]
