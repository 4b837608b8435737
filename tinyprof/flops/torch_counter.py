"""FLOPs of a torch module, counted operator by operator and charged to the module that ran them.

How it works: :func:`trace_ops` runs the module once on its input (one you give, or one made to
fit a shape: :func:`example_input`) under a ``TorchDispatchMode``, which sees every aten
operator the forward pass runs: ``nn.Linear`` and HF's ``Conv1D`` as ``addmm``, ``torch.matmul``
and ``torch.einsum`` as ``mm``/``bmm``, a convolution (transposed or not) as ``convolution``,
``F.scaled_dot_product_attention`` as its fused kernel (or, on the math backend, as ``bmm``),
an LSTM as ``mkldnn_rnn_layer``, a GRU as its cells' ``addmm``. Forward pre- and post-hooks on
every submodule keep the stack of running modules, so each operator is charged to the
innermost one (the profiler's rule too). Each operator then goes to its formula
(:mod:`tinyprof.flops.torch_formulas`), a small pure function of shapes as in
``torch/utils/flop_counter.py``; a module is the sum of its operators, so a module built from
counted operators needs no formula of its own, and one that multiplies no matrices (a norm, a
pooling, HF's ``GELUActivation``, a rotary embedding) counts 0 matmul FLOPs and its work in the
elementwise column. An operator that multiplies matrices without a formula here raises
:class:`MissingFlopFormulaError`, named with the module that called it: nothing is a silent 0.

Backward: each formula states the products of the input gradients (``grad_input``, dX) and of
the weight gradients (``grad_weight``, dW) from the operands it saw: one product per operand
that needs a gradient, nothing for one that needs none (a frozen weight, token ids).

The convention for a *shape* (the same in tinyprof's numpy wing): the input made for it is an
activation that needs a gradient, so the first layer's dX is counted;
``skip_first_input_grad=True`` makes it a data input that needs none, as a real batch is. A
tensor you pass is taken as it is: its ``requires_grad`` decides. So
``tp.count_flops(nn.Linear(72, 40), (6, 72), backward=True)`` is 69,120 (dX + dW) in both wings,
and 34,560 with ``skip_first_input_grad=True``.

Against ``torch.utils.flop_counter.FlopCounterMode`` (tests/test_pytorch_flops.py checks each):
equal, forward and backward, on HF GPT-2, BERT and Llama, a ResNet-18-shaped CNN, a
ConvTranspose2d decoder, a GRU and an LSTM without its fused kernel, and where torch is wrong
tinyprof reports its own number and the test pins torch's:

- grouped convolutions (``groups = g > 1``): torch counts dW as if groups = 1, g × the work;
- ``F.scaled_dot_product_attention`` on CPU (its fused kernel) and an LSTM on CPU
  (``mkldnn_rnn_layer``): torch has no formula and counts 0, forward and backward;
- elementwise work (bias adds, norms, activations, softmax, pooling) is not in torch's total
  and not in :func:`count_flops` either; :func:`flop_report` lists it in its own column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from ..shapes.registry import FormulaRegistry, snake_case
from ..table import Table
from ..torchprobe import is_torch_module
from .registry import LayerFlops, MissingFlopFormulaError
from .report import LayerCount, flop_table, total_flops

# conv_flops and numel (the shape walk's) are re-exported: chapter 07's hidden tests use them here
from .torch_formulas import UNCOUNTED_OPS, Call, builtin_op_formulas, per_element
from .torch_formulas import conv_flops as conv_flops
from .torch_formulas import numel as numel

#: Module type → formula(module, call) -> LayerFlops: counts the whole module, its operators
#: and children included (for a module of your own whose operators you want to count as one).
MODULE_FLOPS = FormulaRegistry("FLOP formula for a torch module")
#: aten operator (``torch.ops.aten.mm``, an OpOverloadPacket) → formula(call) -> LayerFlops.
OP_FLOPS: dict[Any, Callable[[Call], LayerFlops]] = {}
#: aten operators that multiply matrices but have no formula: traced, they are refused.
UNCOUNTED: dict[Any, str] = {}
_POINTWISE = per_element(1, "pointwise")


@dataclass(frozen=True)
class Traced:
    """A recorded call: ``name`` of the module that ran it (dotted path, ``"(model)"`` for the
    root), the module (counted by a module formula) or the aten operator, the formula found
    for it (None: a product without one), and its :class:`Call`."""

    name: str
    target: Any
    formula: Callable | None
    call: Call
    owner_type: str = ""

    @property
    def function(self) -> bool:
        """Is this an operator (not a module counted by a formula of its own)?"""
        return not _is_module(self.target)


def _is_module(obj: Any) -> bool:
    import torch

    return isinstance(obj, torch.nn.Module)


def register_flops(module_type: type, *, replace: bool = False):
    """Decorator: ``formula(module, call) -> LayerFlops`` counts every ``module_type`` call
    (and its subclasses'), its operators and children included. Example::

        @register_flops(Scale)
        def scale_flops(module, call):
            return LayerFlops(elementwise=numel(call.x), grad_input=0, grad_weight=0)
    """
    _register_builtins()
    return MODULE_FLOPS.register(module_type, replace=replace)


def _op_packet(op: Any, caller: str):
    """``op`` as an aten OpOverloadPacket (an OpOverload is reduced to its packet)."""
    import torch

    if isinstance(op, torch._ops.OpOverload):
        return op.overloadpacket
    if isinstance(op, torch._ops.OpOverloadPacket):
        return op
    name = getattr(op, "__qualname__", None) or repr(op)
    raise TypeError(f"{caller}: {name} is not an aten operator. tinyprof counts the operators "
                    "a forward pass dispatches (torch.matmul, F.linear and torch.einsum run as "
                    "torch.ops.aten.mm, addmm or bmm, which have formulas): register "
                    "torch.ops.aten.<op>, or the module that calls it with register_flops")


def register_function_flops(op: Any, *, replace: bool = False):
    """Decorator: ``formula(call) -> LayerFlops`` counts the aten operator ``op``
    (``torch.ops.aten.<name>``, e.g. one of your own ``torch.library`` operators): ``call.args``
    are its positional arguments in its schema's order, each tensor replaced by its shape."""
    _register_builtins()
    packet = _op_packet(op, "register_function_flops")

    def decorate(formula: Callable[[Call], LayerFlops]) -> Callable[[Call], LayerFlops]:
        if not callable(formula):
            raise TypeError(f"register_function_flops: the formula for {packet} must be a "
                            f"function (call) -> LayerFlops, got {formula!r}")
        if packet in OP_FLOPS and not replace:
            raise ValueError(f"{packet} already has a FLOP formula; pass replace=True to "
                             "replace it")
        OP_FLOPS[packet] = formula
        UNCOUNTED.pop(packet, None)
        return formula

    return decorate


def _overlay(formulas: Mapping | None) -> tuple[dict, dict]:
    """``formulas`` ({module type: formula(module, call)} and/or {aten op: formula(call)}) split
    into its module and operator parts, each key checked."""
    if formulas is None:
        return {}, {}
    if not isinstance(formulas, Mapping):
        raise TypeError(f"formulas must be a mapping {{module type or aten op: formula}}, got "
                        f"{type(formulas).__name__}")
    import torch

    modules, ops = {}, {}
    for key, formula in formulas.items():
        if not callable(formula):
            raise TypeError(f"formulas: the formula for {key!r} must be a function, got "
                            f"{formula!r}")
        if isinstance(key, type) and issubclass(key, torch.nn.Module):
            modules[key] = formula
        else:
            ops[_op_packet(key, "formulas")] = formula
    return modules, ops


# -- inputs ----------------------------------------------------------------------------------


def example_input(module, input_shape: Sequence[int], seed: int = 0,
                  requires_grad: bool = True):
    """A seeded input of ``input_shape`` for ``module``: token ids in [0, num_embeddings) when
    its first leaf module is an ``nn.Embedding`` (they need no gradient), otherwise standard
    normal values in the dtype and on the device of its first parameter (float32 on the CPU
    for a module without any) that need a gradient unless ``requires_grad=False``."""
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
    x = torch.randn(shape, generator=generator, dtype=dtype).to(device)
    return x.requires_grad_(requires_grad)


def _is_shape(value: Any) -> bool:
    return isinstance(value, (tuple, list)) and all(
        isinstance(n, int) and not isinstance(n, bool) for n in value) and len(value) > 0


def model_inputs(module, inputs: Any, kwargs: dict | None = None, *,
                 skip_first_input_grad: bool = False, caller: str = "count_flops"
                 ) -> tuple[tuple, dict]:
    """(positional, keyword) arguments for ``module`` from what a PyTorch user has: a tensor, a
    tuple of them, a dict of keyword tensors (``{"input_ids": ..., "attention_mask": ...}``),
    or a shape (an input made by :func:`example_input`). ``skip_first_input_grad=True``
    detaches the first tensor (a made one needs no gradient then)."""
    import torch

    kwargs = dict(kwargs or {})
    if isinstance(inputs, torch.Size) or _is_shape(inputs):
        inputs = example_input(module, inputs, requires_grad=not skip_first_input_grad)
    if isinstance(inputs, Mapping):
        bad = [k for k in inputs if not isinstance(k, str)]
        if bad:
            raise TypeError(f"{caller}: a dict of inputs holds keyword arguments, its keys "
                            f"names; got {bad[0]!r}")
        args, kwargs = (), {**inputs, **kwargs}
    elif isinstance(inputs, torch.Tensor):
        args = (inputs,)
    elif isinstance(inputs, (tuple, list)) and inputs and any(
            isinstance(v, torch.Tensor) for v in inputs):
        args = tuple(inputs)
    elif (inputs is None or (isinstance(inputs, tuple) and not inputs)) and kwargs:
        args = ()
    else:
        kind = type(inputs).__name__
        shape = getattr(inputs, "shape", None)
        hint = f" (pass torch.from_numpy(x) or its shape {tuple(shape)})" if shape else ""
        raise TypeError(f"{caller}: give {type(module).__name__} its input as a shape such as "
                        f"(2, 8), a tensor, a tuple of tensors or a dict of keyword tensors "
                        f"({{'input_ids': ids}}); got {kind} {inputs!r:.60}{hint}")
    if skip_first_input_grad:
        args, kwargs = _detach_first(args, kwargs)
    return args, kwargs


def _detach_first(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    import torch

    for i, value in enumerate(args):
        if isinstance(value, torch.Tensor):
            return args[:i] + (value.detach(),) + args[i + 1:], kwargs
    for key, value in kwargs.items():
        if isinstance(value, torch.Tensor):
            return args, {**kwargs, key: value.detach()}
    return args, kwargs


# -- tracing ---------------------------------------------------------------------------------


def _tensors(value: Any) -> list:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    if isinstance(value, Mapping):
        return [t for item in value.values() for t in _tensors(item)]
    return []


def _storage_key(tensor) -> int | None:
    import torch

    if tensor.layout != torch.strided or tensor.device.type == "meta":
        return None
    return tensor.untyped_storage().data_ptr()


def _shapes_of(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return tuple(value.shape)
    if isinstance(value, (tuple, list)) and any(isinstance(v, torch.Tensor) for v in value):
        return [_shapes_of(v) for v in value]
    return value


class Weights:
    """Which tensors are parameters or views of one (the ``W.t()`` that ``addmm`` multiplies):
    ``tensor in weights``. A real tensor is known by its storage; on the meta device, where
    nothing has one, by following the view operators from the parameters (:meth:`follow`)."""

    def __init__(self, module):
        params = list(module.parameters())
        self.keys = frozenset(filter(None, (_storage_key(p) for p in params)))
        self.views: dict[int, Any] = {}      # id → weak reference (tensors compare elementwise)
        for p in params:
            self._add(p)

    def _add(self, tensor) -> None:
        import weakref

        self.views[id(tensor)] = weakref.ref(tensor)

    def _viewed(self, tensor) -> bool:
        ref = self.views.get(id(tensor))
        return ref is not None and ref() is tensor

    def __contains__(self, tensor) -> bool:
        return _storage_key(tensor) in self.keys or self._viewed(tensor)

    def follow(self, func, args: tuple, output: Any) -> None:
        """Remember ``output`` as a weight when ``func`` is a view of one."""
        if func.is_view and args and self._viewed(args[0]):
            for t in _tensors(output):
                self._add(t)


def make_call(args: tuple, kwargs: dict, output: Any, params: Any = frozenset()) -> Call:
    """The :class:`Call` of one call; ``params`` answers ``tensor in params`` for the
    parameters and their views (:class:`Weights`)."""
    tensors = _tensors(list(args)) + _tensors(dict(kwargs))
    outputs = _tensors(output)
    plain = {k: v for k, v in kwargs.items() if not _tensors(v)}
    return Call(tuple(tuple(t.shape) for t in tensors),
                tuple(outputs[0].shape) if outputs else (),
                tuple(bool(t.requires_grad) for t in tensors),
                tuple(t in params for t in tensors), plain,
                tuple(t.element_size() for t in tensors),
                outputs[0].element_size() if outputs else 0,
                tuple(_shapes_of(a) for a in args))


def module_names(module) -> dict[int, str]:
    """id(submodule) → its dotted path in ``module`` (the root is ``"(model)"``), first path
    when a module is reachable by two."""
    names: dict[int, str] = {}
    for name, sub in module.named_modules(remove_duplicate=False):
        names.setdefault(id(sub), name or "(model)")
    return names


def _op_formula(func, ops: Mapping) -> tuple[bool, Callable | None]:
    """(is it counted, its formula) for an aten operator: a formula of its own, None for a
    product without one, the 1-per-output default for another pointwise operator."""
    import torch

    packet = func.overloadpacket
    formula = ops.get(packet) or OP_FLOPS.get(packet)
    if formula is not None:
        return True, formula
    if packet in UNCOUNTED:
        return True, None
    return torch.Tag.pointwise in func.tags, _POINTWISE


def trace_ops(module, args: tuple, kwargs: dict | None = None,
              formulas: Mapping | None = None) -> tuple[list[Traced], dict[str, tuple]]:
    """Run ``module(*args, **kwargs)`` once (gradients enabled, so that which operands need a
    gradient is known; nothing is kept) and return (the counted calls in the order they
    finished, each module's (type, input shape, output shape) of its first call by name).
    A module with a formula (registered, or in ``formulas`` for this call) is one call; any
    other module's operators are calls of their own, charged to the innermost module."""
    from torch.utils._python_dispatch import TorchDispatchMode

    _register_builtins()
    module_formulas, op_formulas = _overlay(formulas)
    names = module_names(module)
    params = Weights(module)
    stack: list[tuple[str, Any, Callable | None, bool]] = []   # name, module, formula, inside
    records: list[Traced] = []
    shapes: dict[str, tuple] = {}

    def before(sub, a, kw):
        inside = bool(stack and (stack[-1][2] is not None or stack[-1][3]))
        formula = None if inside else _module_formula(sub, module_formulas)
        stack.append((names.get(id(sub), type(sub).__name__), sub, formula, inside))

    def after(sub, a, kw, output):
        name, _, formula, inside = stack.pop()
        shapes.setdefault(name, (type(sub).__name__, _first_shape((a, kw)), _first_shape(output)))
        if formula is not None and not inside:
            records.append(Traced(name, sub, formula, make_call(a, kw, output, params),
                                  type(sub).__name__))

    class Operators(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, a=(), kw=None):
            kw = kw or {}
            output = func(*a, **kw)
            params.follow(func, a, output)
            if stack and (stack[-1][2] is not None or stack[-1][3]):
                return output
            counted, formula = _op_formula(func, op_formulas)
            if counted:
                name, owner = (stack[-1][0], stack[-1][1]) if stack else ("(model)", module)
                records.append(Traced(name, func.overloadpacket, formula,
                                      make_call(a, kw, output, params), type(owner).__name__))
            return output

    run_hooked(module, args, kwargs or {}, before, after, Operators())
    return records, shapes


def run_hooked(module, args: tuple, kwargs: dict, before: Callable, after: Callable,
               mode: Any) -> None:
    """``module(*args, **kwargs)`` once, gradients enabled, inside ``mode`` (a torch function or
    dispatch mode), with ``before(sub, args, kwargs)`` and ``after(sub, args, kwargs, output)``
    hooked around every submodule's forward (``after`` also when it raises); the hooks are
    removed afterwards."""
    import torch

    handles = []
    for sub in module.modules():
        handles.append(sub.register_forward_pre_hook(before, with_kwargs=True))
        handles.append(sub.register_forward_hook(after, with_kwargs=True, always_call=True))
    try:
        with torch.enable_grad(), mode:
            module(*args, **kwargs)
    finally:
        for handle in handles:
            handle.remove()


def _module_formula(sub, overlay: Mapping) -> Callable | None:
    for cls in type(sub).__mro__:
        if cls in overlay:
            return overlay[cls]
    found = MODULE_FLOPS.find(sub)
    return found[0] if found else None


def _first_shape(value: Any) -> tuple:
    tensors = _tensors(value)
    return tuple(tensors[0].shape) if tensors else ()


# -- counting ------------------------------------------------------------------------------


#: A row of :func:`flops_by_module`: the numpy counter's record,
#: :class:`~tinyprof.flops.LayerCount` (this name stays for code written against it).
ModuleFlops = LayerCount


def _op_name(op: Any) -> str:
    return str(getattr(op, "_qualified_op_name", op)).replace("aten::", "")


def _missing(record: Traced) -> MissingFlopFormulaError:
    name = _op_name(record.target)
    return MissingFlopFormulaError(
        f"no FLOP formula for the aten operator {name}, called by '{record.name}' "
        f"({record.owner_type}) on {record.call.inputs}: it multiplies matrices, so it cannot "
        f"count as 0. Register one:\n"
        f"    from tinyprof.flops import LayerFlops\n"
        f"    from tinyprof.pytorch import register_function_flops\n"
        f"    @register_function_flops(torch.ops.aten.{name})\n"
        f"    def {snake_case(name).strip('_')}_flops(call):  # call.inputs, call.args: shapes\n"
        f"        return LayerFlops(matmul=..., grad_input=..., grad_weight=...)\n"
        f"or give '{record.owner_type}' a formula of its own with "
        f"tinyprof.pytorch.register_flops({record.owner_type})")


def _count(record: Traced, backward: bool) -> LayerFlops:
    if record.formula is None:
        raise _missing(record)
    if record.function:
        flops, kind = record.formula(record.call), _op_name(record.target)
    else:
        flops, kind = record.formula(record.target, record.call), record.owner_type
    if not isinstance(flops, LayerFlops):
        raise TypeError(f"the FLOP formula for {kind} '{record.name}' returned "
                        f"{type(flops).__name__}; it must return a LayerFlops")
    if backward and (flops.grad_input is None or flops.grad_weight is None):
        raise ValueError(f"the FLOP formula for {kind} '{record.name}' states no backward "
                         "FLOPs: give its LayerFlops grad_input and grad_weight (0 when none)")
    return flops


def _rows(records: list[Traced], shapes: dict[str, tuple], backward: bool
          ) -> list[LayerCount]:
    """One row per module, in the order its first counted call finished: its calls summed,
    the note naming the formula (a module's) or the operators that multiplied matrices."""
    sums: dict[str, list] = {}
    for record in records:
        flops = _count(record, backward)
        row = sums.setdefault(record.name, [0, 0, 0, 0, {}])
        for i, value in enumerate((flops.matmul, flops.elementwise, flops.grad_input or 0,
                                   flops.grad_weight or 0)):
            row[i] += value
        if flops.matmul or not record.function:
            label = flops.note if not record.function else _op_name(record.target)
            row[4][label] = row[4].get(label, 0) + 1
    rows = []
    for name, (matmul, elementwise, dx, dw, notes) in sums.items():
        kind, x, y = shapes.get(name, ("", (), ()))
        note = " + ".join(f"{op}×{n}" if n > 1 else op for op, n in notes.items())
        rows.append(LayerCount(name, kind, x, y, matmul, elementwise, dx, dw, note))
    return rows


def flops_by_module(module, input_shape: Any = None, *, backward: bool = False,
                    inputs: Any = None, kwargs: dict | None = None,
                    skip_first_input_grad: bool = False,
                    formulas: Mapping | None = None) -> list[LayerCount]:
    """One row per module that ran counted operators in one forward pass on ``input_shape``
    (a shape, a tensor, a tuple of tensors or a dict of keyword tensors; or ``inputs`` and
    ``kwargs``), in the order they finished. With ``backward=True`` every formula must state
    its backward FLOPs. ``formulas``: ``{module type: formula(module, call)}`` and/or
    ``{aten op: formula(call)}``, for this call only (the registries are not changed)."""
    args, kw = _arguments(module, input_shape, inputs, kwargs, skip_first_input_grad)
    try:
        records, shapes = trace_ops(module, args, kw, formulas)
    except (TypeError, ValueError, RuntimeError, IndexError) as error:
        given = input_shape if inputs is None else inputs
        if not (_is_shape(given) or type(given).__name__ == "Size"):
            raise
        raise _misfit(module, tuple(given), next(iter(args), None), error) from error
    return _rows(records, shapes, backward)


def _misfit(module, shape: tuple, made: Any, error: Exception) -> TypeError:
    """The error for a model that fails on the input made for ``shape``: what was made, what
    went wrong, and what to pass instead."""
    kind = "token ids" if made is not None and not made.is_floating_point() else "values"
    return TypeError(f"count_flops: {type(module).__name__} failed on the input made for the "
                     f"shape {shape} ({getattr(made, 'dtype', '')} {kind}): {error}. Give it its "
                     "inputs as it takes them: a tensor, a tuple of tensors or a dict of keyword "
                     "tensors")


def _arguments(module, input_shape, inputs, kwargs, skip_first_input_grad):
    if not is_torch_module(module):
        raise TypeError(f"count FLOPs of a torch.nn.Module here, got {type(module).__name__}")
    if input_shape is not None and inputs is not None:
        raise TypeError("give the input once: a shape or tensors as input_shape, or inputs=...")
    given = inputs if inputs is not None else input_shape
    if given is None and not kwargs:
        raise TypeError(f"give {type(module).__name__} its input: a shape such as (2, 8), a "
                        "tensor, a tuple of tensors or a dict of keyword tensors")
    return model_inputs(module, given, kwargs, skip_first_input_grad=skip_first_input_grad)


def count_flops(module, input_shape: Any = None, backward: bool = False, *,
                inputs: Any = None, kwargs: dict | None = None,
                skip_first_input_grad: bool = False, formulas: Mapping | None = None) -> int:
    """Matmul FLOPs (2 per multiply-accumulate) of one forward pass, or with ``backward=True``
    of the backward pass alone (the input and weight gradients autograd computes).
    ``nn.Linear(128, 64)`` on the shape (1, 128): 16,384 forward; 32,768 backward (dX + dW: a
    shape's input needs a gradient), 16,384 with ``skip_first_input_grad=True`` (dW only)."""
    rows = flops_by_module(module, input_shape, backward=backward, inputs=inputs,
                           kwargs=kwargs, skip_first_input_grad=skip_first_input_grad,
                           formulas=formulas)
    return total_flops(rows, backward)


def flop_report(module, input_shape: Any = None, backward: bool = False, *,
                inputs: Any = None, kwargs: dict | None = None,
                skip_first_input_grad: bool = False, formulas: Mapping | None = None) -> Table:
    """Per-module FLOP table whose ``flops`` column sums to :func:`count_flops` (the columns of
    :func:`tinyprof.flop_report`)."""
    rows = flops_by_module(module, input_shape, backward=backward, inputs=inputs,
                           kwargs=kwargs, skip_first_input_grad=skip_first_input_grad,
                           formulas=formulas)
    return flop_table(rows, backward, type(module).__name__,
                      _describe(input_shape, inputs, kwargs))


def _describe(input_shape, inputs, kwargs) -> str:
    given = inputs if inputs is not None else input_shape
    if isinstance(given, Mapping) or (given is None and kwargs):
        items = {**(given or {}), **(kwargs or {})}
        return ", ".join(f"{k}={tuple(getattr(v, 'shape', ()))}" for k, v in items.items())
    if hasattr(given, "shape"):
        return str(tuple(given.shape))
    if isinstance(given, (tuple, list)) and given and hasattr(given[0], "shape"):
        return ", ".join(str(tuple(getattr(v, "shape", ()))) for v in given)
    return str(tuple(given))


def _register_builtins() -> None:
    """Register the formulas of torch's operators (once, on first use: only then is torch
    imported) and the names of the products that have none."""
    if OP_FLOPS or UNCOUNTED:
        return
    import torch

    for op, formula in builtin_op_formulas().items():
        OP_FLOPS.setdefault(op, formula)
    for name in UNCOUNTED_OPS:
        packet = getattr(torch.ops.aten, name, None)
        if packet is not None and packet not in OP_FLOPS:
            UNCOUNTED[packet] = name


# Call, numel and the formulas (conv_flops, ...) are torch_formulas' own, imported here
__all__ = ["MODULE_FLOPS", "MissingFlopFormulaError", "ModuleFlops", "OP_FLOPS", "Traced",
           "count_flops", "example_input", "flop_report", "flops_by_module", "make_call",
           "model_inputs", "module_names", "register_flops", "register_function_flops",
           "run_hooked", "trace_ops", "Weights"]
