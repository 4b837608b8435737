"""Training memory of a torch module by component, measured on one real step beside the formulas.

Method. On a CPU torch allocates through its own allocator, which tracemalloc (what tinyprof
uses for numpy) does not see; so each component is measured as the bytes of the tensors that
hold it, every storage counted once (``untyped_storage()``: two views of one buffer, or a tied
weight, are one allocation):

* parameters — the storages of ``module.parameters()``;
* activations — what autograd keeps for the backward pass: every tensor that an operation of
  the forward pass and the loss saves, seen through ``torch.autograd.graph.saved_tensors_hooks``
  (the parameters it saves, e.g. a Linear's weight for dX, are not activations);
* gradients — the storages of every ``.grad`` after the backward pass;
* optimizer state — the tensors in ``optimizer.state`` after one ``step()``;
* the timeline and the peak — :class:`LiveStorages` follows every storage the step's operators
  create until its last tensor is gone (forward, backward and optimizer step alike) and marks
  the live bytes and their peak after each phase, as tracemalloc does for numpy. The two
  measurements agree at each mark (after the backward only the gradients are alive; the
  optimizer step adds exactly its state), and the peak of a step once the state exists is
  parameters + optimizer state + the highest phase peak (``peak_bytes``, see
  :func:`~tinyprof.memory.step.phase_peaks`).

On a GPU (a module with CUDA parameters) the same tensors are counted, and the result also
holds ``torch.cuda.memory_allocated()`` at each point of the step (``cuda_allocated``), which
includes the allocator's rounding and what is alive but not saved (the loss, the output).

Formulas (b bytes per element, P parameters, P_t trainable ones): parameters P·b; gradients
P_t·b; optimizer state k·P_t·b + 4 B per parameter tensor for Adam's step counter (k = 0 SGD,
1 momentum, 2 Adam/AdamW); activations Σ over the traced calls of what each one saves
(:data:`SAVED_FORMULAS`), None with the culprit named when a call has no formula. The model's
weights, gradients and the optimizer's state are put back afterwards: measuring does not train.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any, Callable

from ..flops.torch_counter import Call, make_call, model_inputs, module_names, run_hooked
from ..shapes import numel
from ..table import Table
from ..torchprobe import is_torch_module
from ..units import format_bytes
from .step import Component, TrainingMemory, phase_peaks
from .trace import Mark

INDEX_BYTES = 8      # int64 token ids and targets
STATE_SLOTS = {"sgd": 0, "momentum": 1, "adam": 2, "adamw": 2}

#: Module type (or function) → formula(module or None, call) -> bytes autograd saves.
SAVED_FORMULAS: dict[Any, Callable[[Any, Call], int]] = {}
_BUILTINS: list[bool] = []


def _input_bytes(call: Call, i: int = 0) -> int:
    return numel(call.inputs[i]) * call.itemsizes[i]


def _output_bytes(call: Call) -> int:
    return numel(call.output) * call.output_itemsize


def _register_builtins() -> None:
    if _BUILTINS:
        return
    _BUILTINS.append(True)
    import torch
    import torch.nn.functional as F
    from torch import nn

    def linear(m, call):
        """its input, for dW (the weight it also saves is a parameter)."""
        return _input_bytes(call) if m.weight.requires_grad else 0

    def conv(m, call):
        """its input, for dW."""
        return _input_bytes(call) if m.weight.requires_grad else 0

    def layernorm(m, call):
        """its input, and the mean and 1/std of each row in float32."""
        rows = numel(call.x) // max(numel(m.normalized_shape), 1)
        return _input_bytes(call) + 2 * 4 * rows

    def saves_input(m, call):
        return _input_bytes(call)

    def saves_output(m, call):
        return _output_bytes(call)

    def dropout(m, call):
        """a bool mask, 1 byte per element, while training."""
        return numel(call.x) if m.training and m.p > 0 else 0

    def nothing(m, call):
        return 0

    def cross_entropy(m, call):
        """the log-probabilities, the targets (int64) and a float32 total weight."""
        return _input_bytes(call) + numel(call.inputs[1]) * INDEX_BYTES + 4

    def mse(m, call):
        return _input_bytes(call) + _input_bytes(call, 1)

    def sdpa(m, call):
        """CPU flash kernel: q, k, v, its output, and a float32 logsumexp per query row."""
        q = call.inputs[0]
        return sum(_input_bytes(call, i) for i in range(3)) + _output_bytes(call) + \
            4 * numel(q[:-1])

    def matmul(m, call):
        """each operand that the other one's gradient needs."""
        a, b = (tuple(call.input_grads[:2]) + (False, False))[:2]
        return (_input_bytes(call, 0) if b else 0) + (_input_bytes(call, 1) if a else 0)

    SAVED_FORMULAS.update({
        nn.Linear: linear, nn.Conv1d: conv, nn.Conv2d: conv, nn.Conv3d: conv,
        nn.LayerNorm: layernorm, nn.GELU: saves_input, nn.SiLU: saves_input,
        nn.ReLU: saves_output, nn.Sigmoid: saves_output, nn.Tanh: saves_output,
        nn.Softmax: saves_output, nn.Dropout: dropout, nn.Embedding: saves_input,
        nn.Identity: nothing, nn.Flatten: nothing, nn.Unflatten: nothing,
        nn.CrossEntropyLoss: cross_entropy, nn.MSELoss: mse,
        F.scaled_dot_product_attention: sdpa, torch.matmul: matmul, torch.Tensor.matmul: matmul,
        torch.Tensor.__matmul__: matmul, torch.bmm: matmul, torch.Tensor.bmm: matmul,
        torch.mm: matmul, torch.Tensor.mm: matmul,
    })


def _formula(record) -> Callable | None:
    if record.function:
        return SAVED_FORMULAS.get(record.target)
    return _module_formula(record.target)


def _storages(tensors) -> dict[int, int]:
    """data_ptr → bytes of each distinct storage among ``tensors``."""
    found = {}
    for t in tensors:
        if t is None or t.layout != __import__("torch").strided:
            continue
        storage = t.untyped_storage()
        found[storage.data_ptr()] = storage.nbytes()
    return found


def _optimizer(module, optimizer):
    import torch

    params = [p for p in module.parameters() if p.requires_grad]
    if isinstance(optimizer, torch.optim.Optimizer):
        name = type(optimizer).__name__.lower()
        if name == "sgd":
            name = "momentum" if optimizer.defaults.get("momentum") else "sgd"
        return optimizer, name
    builders = {"sgd": lambda: torch.optim.SGD(params, lr=1e-2),
                "momentum": lambda: torch.optim.SGD(params, lr=1e-2, momentum=0.9),
                "adam": lambda: torch.optim.Adam(params, lr=1e-3),
                "adamw": lambda: torch.optim.AdamW(params, lr=1e-3)}
    if optimizer not in builders:
        raise ValueError(f"optimizer: unknown name {optimizer!r}; choose from {list(builders)} "
                         "or pass a torch.optim.Optimizer")
    return builders[optimizer](), optimizer


def _loss_and_targets(loss, output, targets):
    import torch

    if loss is None:
        loss = torch.nn.CrossEntropyLoss()
    if targets is None:
        generator = torch.Generator().manual_seed(1)
        if isinstance(loss, torch.nn.CrossEntropyLoss):
            targets = torch.randint(0, output.shape[-1], output.shape[:-1],
                                    generator=generator).to(output.device)
        else:
            targets = torch.randn(output.shape, generator=generator).to(output.device)
    return loss, targets


def _apply_loss(loss, output, targets):
    import torch

    if isinstance(loss, torch.nn.CrossEntropyLoss) and output.dim() > 2:
        return loss(output.flatten(0, -2), targets.flatten())
    return loss(output, targets)


class _SavedRecorder:
    """Storages autograd saves, each attributed to the module that was running."""

    def __init__(self, module, exclude: set[int]):
        self.exclude = exclude
        self.first_by: dict[int, tuple[str, int]] = {}
        self.names = module_names(module)
        self.stack: list[str] = []
        self.module = module

    def __enter__(self):
        import torch

        self.handles = []
        def enter(module, args) -> None:
            self.stack.append(self.names.get(id(module), type(module).__name__))

        def leave(module, args, output) -> None:
            self.stack.pop()

        for sub in self.module.modules():
            self.handles.append(sub.register_forward_pre_hook(enter))
            self.handles.append(sub.register_forward_hook(leave, always_call=True))
        self.hooks = torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t)
        self.hooks.__enter__()
        return self

    def pack(self, tensor):
        if tensor.layout == __import__("torch").strided:
            storage = tensor.untyped_storage()
            key = storage.data_ptr()
            if key not in self.exclude and key not in self.first_by:
                self.first_by[key] = (self.stack[-1] if self.stack else "(loss)",
                                      storage.nbytes())
        return tensor

    def __exit__(self, *exc):
        self.hooks.__exit__(*exc)
        for handle in self.handles:
            handle.remove()

    def by_module(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for name, nbytes in self.first_by.values():
            totals[name] = totals.get(name, 0) + nbytes
        return totals



@dataclass(frozen=True)
class _Saved:
    """A call whose saved tensors a formula predicts: the module's name, the module (or the
    function it called itself) and its :class:`Call`."""

    name: str
    target: Any
    function: bool
    call: Call


def trace_saved_calls(module, args: tuple, kwargs: dict) -> list[_Saved]:
    """Run ``module`` once and return the calls whose saved bytes :data:`SAVED_FORMULAS`
    predicts: every call of a module that has a formula (its children are inside it) or no
    children (so that one without a formula is named), and every call of a function with a
    formula made by a module without one (``F.scaled_dot_product_attention``, ``@``)."""
    from torch.overrides import TorchFunctionMode

    _register_builtins()
    names = module_names(module)
    stack: list[tuple[Any, bool]] = []     # (module, covered by a formula here or above)
    records: list[_Saved] = []

    def before(sub, a, kw):
        covered = bool(stack and stack[-1][1])
        stack.append((sub, covered or _module_formula(sub) is not None))

    def after(sub, a, kw, output):
        _, covered = stack.pop()
        if stack and stack[-1][1]:
            return
        if covered or not list(sub.children()):
            records.append(_Saved(names.get(id(sub), type(sub).__name__), sub, False,
                                  make_call(a, kw, output)))

    class Functions(TorchFunctionMode):
        def __torch_function__(self, func, types, a=(), kw=None):
            kw = kw or {}
            output = func(*a, **kw)
            if stack and not stack[-1][1] and func in SAVED_FORMULAS:
                owner = stack[-1][0]
                records.append(_Saved(names.get(id(owner), type(owner).__name__), func, True,
                                      make_call(a, kw, output)))
            return output

    run_hooked(module, args, kwargs, before, after, Functions())
    return records


def _module_formula(sub) -> Callable | None:
    return next((SAVED_FORMULAS[c] for c in type(sub).__mro__ if c in SAVED_FORMULAS), None)


def model_output(output: Any) -> tuple[Any, bool]:
    """(the tensor a training step differentiates, is it already the loss) from a module's
    output: a tensor; a tuple or list (its first tensor); a Hugging Face ``ModelOutput`` or a
    dict (its ``loss`` when the model computed one, labels given, otherwise its ``logits``)."""
    import torch

    if isinstance(output, torch.Tensor):
        return output, False
    loss = output.get("loss") if isinstance(output, dict) else getattr(output, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss, True
    logits = output.get("logits") if isinstance(output, dict) else \
        getattr(output, "logits", None)
    if isinstance(logits, torch.Tensor):
        return logits, False
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return output[0], False
    raise TypeError(f"training_memory: the module returned {type(output).__name__}; give it "
                    "a tensor, a tuple whose first item is one, or an output with .loss or "
                    ".logits (a Hugging Face ModelOutput)")


def predicted_activations(module, inputs, loss=None, targets=None, kwargs: dict | None = None
                          ) -> tuple[int | None, str, dict[str, int]]:
    """(Σ saved bytes by formula or None, how, per-module predictions) for one forward and the
    loss, traced on ``inputs`` (a tensor, a tuple of them or a dict of keyword tensors)."""
    import torch

    _register_builtins()
    args, kwargs = model_inputs(module, inputs, kwargs, caller="predicted_activations")
    records = trace_saved_calls(module, args, kwargs)
    with torch.no_grad():
        output, is_loss = model_output(module(*args, **kwargs))
    per: dict[str, int] = {}
    missing = []
    for record in records:
        formula = _formula(record)
        if formula is None:
            kind = record.target.__name__ if record.function else type(record.target).__name__
            missing.append(f"{kind} '{record.name}'")
            continue
        nbytes = formula(None if record.function else record.target, record.call)
        per[record.name] = per.get(record.name, 0) + nbytes
    if not is_loss:
        loss, targets = _loss_and_targets(loss, output, targets)
        loss_formula = next((SAVED_FORMULAS[c] for c in type(loss).__mro__
                             if c in SAVED_FORMULAS), None)
        if loss_formula is None:
            missing.append(f"loss {type(loss).__name__}")
        else:
            per["(loss)"] = loss_formula(loss, _loss_call(loss, output, targets))
    if missing:
        return None, "no saved-bytes formula for " + ", ".join(missing), per
    return sum(per.values()), "Σ per-call saved tensors (formulas)", per


def _loss_call(loss, output, targets) -> Call:
    import torch

    flat = isinstance(loss, torch.nn.CrossEntropyLoss)
    flat_out = output.flatten(0, -2) if flat else output
    flat_t = targets.flatten() if flat else targets
    return Call((tuple(flat_out.shape), tuple(flat_t.shape)), (), (True, False),
                (False, False), {}, (flat_out.element_size(), flat_t.element_size()), 4)


class LiveStorages:
    """The bytes of the tensor storages a run creates and keeps alive, with their peak: a
    ``TorchDispatchMode`` sees every operator's output, of the forward, the backward (CPU
    autograd runs in the caller's thread) and the optimizer step alike; a new storage counts
    from the operator that made it until the last tensor on it is gone. Storages that existed
    before (parameters, the batch, a view of either) never count. What a kernel allocates
    and frees inside itself is not seen: the peak is that of the tensors, a lower bound on the
    allocator's. :meth:`mark` labels points as :class:`~tinyprof.memory.MemoryTimeline` does."""

    def __init__(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        tracker = self

        class Outputs(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                return tracker._seen(func, args, kwargs or {})

        self.mode, self.marks = Outputs(), []
        self.refs: dict[int, int] = {}
        self.sizes: dict[int, int] = {}
        self.old: set[int] = set()
        self.now = self.peak = self.last = 0

    def __enter__(self):
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        return self.mode.__exit__(*exc)

    def _seen(self, func, args, kwargs):
        import weakref

        from torch.utils._pytree import tree_flatten

        fresh = func.overloadpacket.__name__.startswith("lift_fresh")   # torch.tensor(...)
        for t in tree_flatten((args, kwargs))[0]:
            key = _key(t)
            if key is not None and key not in self.refs and not fresh:
                self.old.add(key)
        output = func(*args, **kwargs)
        for t in tree_flatten(output)[0]:
            key = _key(t)
            if key is None or key in self.old:
                continue
            if key not in self.refs:
                self.refs[key], self.sizes[key] = 0, t.untyped_storage().nbytes()
                self.now += self.sizes[key]
                self.peak = max(self.peak, self.now)
            self.refs[key] += 1
            weakref.finalize(t, self._drop, key)
        return output

    def _drop(self, key: int) -> None:
        self.refs[key] -= 1
        if not self.refs[key]:
            del self.refs[key]
            self.now -= self.sizes.pop(key)

    def mark(self, label: str) -> None:
        """Record (label, live bytes, change since the last mark, peak since the last mark)."""
        self.marks.append(Mark(label, self.now, self.now - self.last, self.peak))
        self.last = self.peak = self.now


def _key(tensor) -> int | None:
    import torch

    if not isinstance(tensor, torch.Tensor) or tensor.layout != torch.strided \
            or tensor.device.type == "meta":
        return None
    return tensor.untyped_storage().data_ptr() or None


def training_memory(module, inputs, targets=None, loss=None,
                    optimizer: Any = "adam") -> TrainingMemory:
    """Measure one real training step of ``module`` on ``inputs`` by component, each beside its
    formula (see the module docstring for the method). ``loss``: an ``nn.Module`` loss or a
    callable (default cross-entropy over the last axis, random class targets when ``targets``
    is None); ``optimizer``: "sgd", "momentum", "adam", "adamw" or an optimizer over the
    module's parameters (stepped for real, its state restored afterwards)."""
    if not is_torch_module(module):
        raise TypeError(f"training_memory needs a torch.nn.Module here, got "
                        f"{type(module).__name__}")
    import copy

    import torch

    args, kwargs = model_inputs(module, inputs, skip_first_input_grad=True,
                                caller="training_memory")
    params = list(module.parameters())
    trainable = [p for p in params if p.requires_grad]
    if not trainable:
        raise ValueError("training_memory: the module has no trainable parameters, so a "
                         "training step has nothing to train")
    opt, kind = _optimizer(module, optimizer)
    kept_state = copy.deepcopy(module.state_dict())
    kept_grads = [p.grad for p in params]
    kept_opt = copy.deepcopy(opt.state_dict())
    param_storages = _storages(params)
    cuda = params[0].is_cuda
    allocated: dict[str, int] = {}
    live = LiveStorages()

    def mark(label: str) -> None:
        if cuda:
            torch.cuda.synchronize()
            allocated[label] = torch.cuda.memory_allocated()
        if label != "start":
            live.mark(label)

    try:
        for p in params:
            p.grad = None
        mark("start")
        with live, _SavedRecorder(module, set(param_storages)) as saved:
            output, is_loss = model_output(module(*args, **kwargs))
            if is_loss:
                value = output
            else:
                loss_fn, targets = _loss_and_targets(loss, output, targets)
                value = _apply_loss(loss_fn, output, targets)
            del output
            mark("after forward")
        with live:
            value.backward()
            del value
            mark("after backward")
            gradients = _storages(p.grad for p in params)
            state_before = _state_storages(opt)
            opt.step()
            mark("after optimizer step")
        state = {k: v for k, v in _state_storages(opt).items() if k not in state_before}
        state.update(state_before)
        activations = saved.by_module()
    finally:
        module.load_state_dict(kept_state)
        for p, grad in zip(params, kept_grads):
            p.grad = grad
        if isinstance(optimizer, torch.optim.Optimizer):
            optimizer.load_state_dict(kept_opt)
    itemsize = params[0].element_size()
    count = sum(p.numel() for p in params)
    count_trainable = sum(p.numel() for p in trainable)
    slots = STATE_SLOTS.get(kind, 0)
    steps = 4 * len(trainable) if kind in ("adam", "adamw") else 0
    predicted, how, _ = predicted_activations(module, args, loss, targets, kwargs)
    how = f"{how}; measured: saved_tensors_hooks, each storage once"
    components = (
        Component("parameters", sum(param_storages.values()), count * itemsize,
                  f"P × {itemsize} B; measured: parameter storages"),
        Component("activations", sum(activations.values()), predicted, how),
        Component("gradients", sum(gradients.values()), count_trainable * itemsize,
                  "1 × trainable parameters; measured: .grad storages"),
        Component("optimizer state", sum(state.values()),
                  slots * count_trainable * itemsize + steps,
                  f"{slots} × trainable parameters ({kind})"
                  + (" + 4 B step per tensor" if steps else "")
                  + "; measured: optimizer.state tensors"),
    )
    marks = tuple(live.marks)
    peak = max(phase_peaks(marks, components[0].measured_bytes).values())
    where = "GPU (cuda memory_allocated in .cuda_allocated)" if cuda else \
        "CPU (tensor storages; tracemalloc cannot see torch's allocator)"
    first = next(t for t in (*args, *kwargs.values()) if hasattr(t, "shape"))
    title = (f"{type(module).__name__} training step, input {tuple(first.shape)}, "
             f"{params[0].dtype}, {kind}: measured peak {format_bytes(peak)} on {where}")
    result = TrainingMemory(title, components, marks[0].peak_bytes,
                            max(m.peak_bytes for m in marks),
                            types.MappingProxyType({kind: components[3].measured_bytes}),
                            marks)
    object.__setattr__(result, "cuda_allocated", dict(allocated))
    object.__setattr__(result, "activations_by_module", dict(activations))
    return result


def _state_storages(optimizer) -> dict[int, int]:
    import torch

    tensors = [v for state in optimizer.state.values() for v in state.values()
               if isinstance(v, torch.Tensor)]
    return _storages(tensors)


def activation_table(module, inputs, targets=None, loss=None) -> Table:
    """Per module: bytes autograd saved while it ran (each storage counted where it was first
    saved), beside the formula's prediction; the last row is the loss."""
    memory = training_memory(module, inputs, targets, loss, optimizer="sgd")
    _, _, predicted = predicted_activations(module, inputs, loss, targets)
    measured = memory.activations_by_module
    names = list(dict.fromkeys([*predicted, *measured]))
    rows = [[name, measured.get(name, 0), predicted.get(name)] for name in names]
    return Table(["name", "measured", "predicted"], rows,
                 title="Saved for backward, per module (measured: saved_tensors_hooks)",
                 formats={"measured": format_bytes,
                          "predicted": lambda v: format_bytes(v) if v is not None else "—"},
                 footer=["total", sum(r[1] for r in rows),
                         memory.activations.predicted_bytes])


__all__ = ["LiveStorages", "SAVED_FORMULAS", "activation_table", "model_output",
           "predicted_activations", "trace_saved_calls", "training_memory"]
