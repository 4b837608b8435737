"""Per-module forward *and* backward time of torch modules, for ``with tp.Profiler() as prof``.

torch.profiler times operators and, per module, only their forward; a module's backward runs
later, inside autograd, where no module is on any stack. tinyprof records both, with three
kinds of global hooks that :class:`TorchRecorder` installs for the ``with`` block only:

- **forward**: a forward pre-hook and a forward hook on every module (``torch.nn.modules.module.
  register_module_forward_pre_hook`` and ``register_module_forward_hook``) time each call, as
  tinyprof's numpy profiler times each layer call: total = exit − entry, self = total − the
  totals of the module calls it made;
- **backward**: in the forward hook, pre-hooks are registered on the autograd node that produced
  the module's output and on the nodes that produced its inputs (``grad_fn.register_prehook``).
  Autograd runs the backward one node after another; when it reaches the output's node, the
  module's backward begins; when it reaches an input's node, which it can only do after every
  node the module created, the module's backward ends and its caller's resumes. Between those
  events time is charged to the innermost module whose backward is open, until the backward
  ends (a callback queued on autograd's engine): every instant of a backward pass is charged to
  exactly one module, and a module's own work (the attention between its two projections, a
  residual add) to it rather than to a child. A module whose output is one of its inputs (an
  identity, dropout in evaluation) has no backward of its own. Module *full backward hooks*
  are not used: for a module whose inputs need no gradient (the model's first layer, a whole
  model fed token ids) they fire before its weights' gradients are computed, so they would
  time it as 0;
- **optimizer step**: ``torch.optim`` step pre- and post-hooks, a row of phase "optimizer".

The backward "self" time of a module is the sum of its segments; its total adds the backward
self times of the modules it called in the forward. Gradients that autograd adds up where a
tensor was used twice (a residual connection) are summed inside whichever segment is running.

On a GPU a kernel launch returns before the kernel has run, so a timer read after a module's
call measures the launch, not the work: with ``synchronize=True`` (the default when a module or
an input of the block lives on a CUDA device) every timestamp first waits for the device
(``torch.cuda.synchronize()``). That serialises the host and the device, the price of
attributing time to modules; for whole steps use :func:`tinyprof.pytorch.measure_latency`,
which synchronises once per call, or CUDA events (:func:`tinyprof.pytorch.cuda_event_seconds`).
The GPU path is exercised only where a GPU exists; on the CPU no synchronisation is needed.
"""

from __future__ import annotations

import time
from _thread import get_ident
from collections import defaultdict
from typing import Any

from ..flops.torch_counter import module_names
from .layer_profiler import LayerCall

_clock = time.perf_counter
# Row fields: name, kind, phase, start, end, depth, parent, warmup, children_seconds.
NAME, KIND, PHASE, START, END, DEPTH, PARENT, WARM, CHILDREN = range(9)


class TorchRecorder:
    """Records forward, backward and optimizer-step time of every torch module while started.

    ``warmup``: the first calls of each module and phase are marked warm-up (left out of the
    tables, as in :class:`~tinyprof.layer_profiler.LayerProfiler`). ``synchronize``: wait for
    the GPU before each timestamp; None decides when the first module call arrives (True when
    a parameter or input is on a CUDA device)."""

    def __init__(self, warmup: int = 0, synchronize: bool | None = None):
        self.warmup = warmup
        self.synchronize = synchronize
        self.rows: list[list[Any]] = []
        self._stack: list[int] = []
        self._names: dict[int, dict[int, str]] = {}
        self._root_names: dict[int, str] = {}
        self._seen: dict[tuple[int, str], int] = defaultdict(int)
        self._handles: list[Any] = []
        self._thread: int | None = None
        self._active = False
        self._now = _clock
        # backward: segments per forward row, the open segment, node → modules beginning there
        self._segments: dict[int, list[tuple[float, float]]] = defaultdict(list)
        self._current: int | None = None
        self._segment_start = 0.0
        self._in_backward = False
        self._beginning: dict[int, tuple[list[int], list[int]]] = {}
        self._open: list[int] = []      # calls whose backward has begun and not ended
        self._optimizer_rows: dict[int, int] = {}

    # -- hooks ------------------------------------------------------------------------------
    def start(self) -> "TorchRecorder":
        import torch
        from torch.nn.modules import module as nn_module
        from torch.optim import optimizer as optim

        self._torch = torch
        self._tensor, self._grad_enabled = torch.Tensor, torch.is_grad_enabled   # hot in _after
        self._engine = torch.autograd.Variable._execution_engine
        self._thread = get_ident()
        self._active = True
        if self.synchronize:
            self._use_sync()
        self._handles = [
            nn_module.register_module_forward_pre_hook(self._before),
            nn_module.register_module_forward_hook(self._after, always_call=True),
            optim.register_optimizer_step_pre_hook(self._before_step),
            optim.register_optimizer_step_post_hook(self._after_step),
        ]
        return self

    def stop(self) -> list[LayerCall]:
        """Remove the hooks and return every recorded call (forward, backward, optimizer)."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        if self._in_backward:
            self._backward_done()
        self._active = False
        return self.calls()

    def _use_sync(self) -> None:
        synchronize = self._torch.cuda.synchronize

        def now() -> float:
            synchronize()
            return _clock()
        self._now = now
        self.synchronize = True

    def _row(self, name: str, kind: str, phase: str, key: int) -> int:
        seen = self._seen
        warm = seen[(key, phase)] < self.warmup
        seen[(key, phase)] += 1
        stack = self._stack
        self.rows.append([name, kind, phase, 0.0, 0.0, len(stack),
                          stack[-1] if stack else None, warm, 0.0])
        return len(self.rows) - 1

    def _before(self, module, args) -> None:
        if not self._active or get_ident() != self._thread:
            return
        if self.synchronize is None:
            from ..torchprobe import uses_cuda

            if uses_cuda(module, args):
                self._use_sync()
            else:
                self.synchronize = False
        stack = self._stack
        if not stack:
            self._beginning.clear()     # a new forward: the nodes of the last one are hooked
            names = self._names.get(id(module))
            if names is None:
                names = self._names[id(module)] = module_names(module)
                names[id(module)] = type(module).__name__
            self._root_names = names
        # self._row(...) written out: this hook runs at every module call
        kind, key = type(module).__name__, (id(module), "forward")
        seen, rows = self._seen, self.rows
        count = seen[key]
        seen[key] = count + 1
        row = [self._root_names.get(key[0], kind), kind, "forward", 0.0, 0.0, len(stack),
               stack[-1] if stack else None, count < self.warmup, 0.0]
        stack.append(len(rows))
        rows.append(row)
        row[START] = self._now()

    def _after(self, module, args, output) -> None:
        if not self._active or get_ident() != self._thread or not self._stack:
            return
        end = self._now()
        index = self._stack.pop()
        rows = self.rows
        row = rows[index]
        row[END] = end
        parent = row[PARENT]
        if parent is not None:
            rows[parent][CHILDREN] += end - row[START]
        if self._grad_enabled():
            self._mark_backward(index, args, output)

    def _mark_backward(self, index: int, args: tuple, output: Any) -> None:
        """Put this call's backward on the autograd nodes around it (one pre-hook per node): it
        begins at the node that produced its output and ends at a node that produced one of its
        inputs, which autograd reaches only after every node the call created."""
        tensor = self._tensor
        inputs = []             # loops, not comprehensions: this runs at every module call
        for arg in args:
            if isinstance(arg, tensor):
                node = arg.grad_fn          # read once: each read is a call into torch
                if node is not None:
                    inputs.append(node)
        outputs = (output,) if isinstance(output, tensor) else output \
            if isinstance(output, (tuple, list)) else \
            tuple(output.values()) if isinstance(output, dict) else ()      # HF ModelOutput
        begins = False
        for out in outputs:
            if isinstance(out, tensor):
                node = out.grad_fn
                if node is not None and node not in inputs:      # nodes compare by identity
                    self._actions(node)[0].append(index)
                    begins = True
        if not begins:
            return          # no work of its own to differentiate (an identity, a view of x)
        for node in inputs:
            self._actions(node)[1].append(index)

    def _actions(self, node: Any) -> tuple[list[int], list[int]]:
        """(calls whose backward begins here, calls whose backward ends here) for ``node``,
        created with the node's pre-hook on first use."""
        actions = self._beginning.get(id(node))
        if actions is None:
            actions = self._beginning[id(node)] = ([], [])
            node.register_prehook(self._node_hook(actions))
        return actions

    def _node_hook(self, actions: tuple[list[int], list[int]]):
        begins, ends = actions

        def reached(grad_outputs: Any) -> None:
            if not self._active:
                return None
            now = self._now()
            if not self._in_backward:
                self._in_backward = True
                self._open.clear()
                self._engine.queue_callback(self._backward_done)
            current = self._current     # self._close(now), written out: a hook at every node
            if current is not None:
                self._segments[current].append((self._segment_start, now))
            self._current = None
            open_calls = self._open
            for index in ends:                      # inner calls first (they finished first)
                if index in open_calls:
                    del open_calls[open_calls.index(index):]
            for index in reversed(begins):          # outer calls first
                open_calls.append(index)
                self._segments[index].append((now, now))
            if open_calls:
                self._current, self._segment_start = open_calls[-1], now
            return None
        return reached

    def _close(self, now: float) -> None:
        if self._current is not None:
            self._segments[self._current].append((self._segment_start, now))
        self._current = None

    def _backward_done(self) -> None:
        self._close(self._now())
        self._in_backward = False
        self._open.clear()

    def _before_step(self, optimizer, args, kwargs) -> None:
        if not self._active or get_ident() != self._thread:
            return
        kind = type(optimizer).__name__
        index = self._row(kind, kind, "optimizer", id(optimizer))
        self._optimizer_rows[id(optimizer)] = index
        self.rows[index][START] = self._now()

    def _after_step(self, optimizer, args, kwargs) -> None:
        index = self._optimizer_rows.pop(id(optimizer), None)
        if index is not None:
            self.rows[index][END] = self._now()

    # -- results ----------------------------------------------------------------------------
    def calls(self) -> list[LayerCall]:
        """Forward and optimizer calls as recorded, then one backward call per forward call
        that had a backward: start = its first segment, end = the last segment of it or of the
        modules it called, self = Σ its own segments."""
        calls = [LayerCall(*row[:3], row[START], row[END], row[DEPTH], row[PARENT], row[WARM],
                           row[CHILDREN]) for row in self.rows]
        children: dict[int, list[int]] = defaultdict(list)
        for index, row in enumerate(self.rows):
            if row[PARENT] is not None:
                children[row[PARENT]].append(index)
        spans: dict[int, tuple[float, float, float]] = {}   # index → (start, end, total)

        def span(index: int) -> tuple[float, float, float] | None:
            if index in spans:
                return spans[index]
            own = self._segments.get(index, [])
            parts = [(s, e, e - s) for s, e in own]
            parts += [found for child in children[index] if (found := span(child))]
            if not parts:
                return None
            spans[index] = (min(p[0] for p in parts), max(p[1] for p in parts),
                            sum(e - s for s, e in own) + sum(p[2] for p in parts[len(own):]))
            return spans[index]

        backward_index: dict[int, int] = {}
        for index, row in enumerate(self.rows):
            if row[PHASE] != "forward" or span(index) is None:
                continue
            start, end, total = spans[index]
            own = sum(e - s for s, e in self._segments.get(index, []))
            parent = backward_index.get(row[PARENT]) if row[PARENT] is not None else None
            backward_index[index] = len(calls)
            calls.append(LayerCall(row[NAME], row[KIND], "backward", start, start + total,
                                   row[DEPTH], parent, row[WARM], total - own))
        return calls


__all__ = ["TorchRecorder"]
