"""A long training loop with the classic leaks planted the way they happen, each switchable.

The model is a small autoencoder (``FEATURES`` → ``HIDDEN`` → ``FEATURES``, tanh, mean squared
error, plain SGD) trained on ``BATCHES`` fixed batches of random pixels that it cycles through;
each step normalises its batch (a per-feature centre and scale), runs forward and backward and
updates the weights. Everything is float64, so every array's size is exactly its elements × 8.

The leaks (:data:`LEAKS`), each one line of :meth:`Trainer.step`:

- ``history``: the history for a plot keeps each step's whole reconstruction array instead of
  the loss as a float (``BATCH × FEATURES × 8`` bytes a step);
- ``cache``: a memo of the normalised batches keyed by the step number, which never repeats,
  instead of by the batch's index (the fixed memo fills with ``BATCHES`` entries and stops: a
  plateau);
- ``hook``: a forward hook (a closure) that appends the hidden activations to a list it
  captured (``BATCH × HIDDEN × 8``);
- ``cycle``: a record of the step that refers to itself and holds the step's error array: only
  the cyclic garbage collector frees it, so it grows while the collector is off (as chapter 6
  turns it off in timed rounds) and in bursts between collections while it is on.

Leak-free, the loop keeps the loss history as Python floats (32 bytes a step: a float and a
list slot) and a memo of ``BATCHES`` entries. :func:`leak_bytes_per_step` gives each leak's
bytes per step exactly, from the shapes. With torch installed, :func:`torch_total_loss` shows
the fifth classic, ``total_loss += loss``.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from typing import Callable, Collection, Iterable

import numpy as np

#: The leaks :class:`Trainer` can plant, in the order the chapter introduces them.
LEAKS = ("history", "cache", "hook", "cycle")
FEATURES, HIDDEN, BATCH, BATCHES = 784, 128, 32, 16
LEARNING_RATE = 0.05
#: Bytes of one Python float plus its slot in a list: what the fixed history keeps per step.
FLOAT_IN_LIST = 24 + 8


def check_leaks(leaks: Iterable[str]) -> tuple[str, ...]:
    """``leaks`` as a tuple in :data:`LEAKS` order; ValueError naming an unknown one."""
    chosen = set(leaks)
    unknown = sorted(chosen - set(LEAKS))
    if unknown:
        raise ValueError(f"unknown leak(s) {unknown}: the leaks are {list(LEAKS)}")
    return tuple(leak for leak in LEAKS if leak in chosen)


def leak_bytes_per_step(leak: str, batch: int = BATCH) -> int:
    """The array bytes ``leak`` keeps alive per step (data only: the few hundred bytes of
    each array's header and of the containers come on top)."""
    sizes = {"history": batch * FEATURES * 8, "cache": batch * FEATURES * 8,
             "hook": batch * HIDDEN * 8, "cycle": batch * FEATURES * 8}
    return sizes[check_leaks([leak])[0]]


def make_data(seed: int, batch: int = BATCH) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The data set (``BATCHES`` batches of ``batch`` × ``FEATURES`` pixels in [0, 1)) and the
    initial weights W1 (FEATURES × HIDDEN), W2 (HIDDEN × FEATURES), all from ``seed``."""
    rng = np.random.default_rng(seed)
    data = rng.random((BATCHES, batch, FEATURES))
    w1 = rng.normal(0.0, 0.05, (FEATURES, HIDDEN))
    w2 = rng.normal(0.0, 0.05, (HIDDEN, FEATURES))
    return data, w1, w2


def normalise(raw: np.ndarray) -> np.ndarray:
    """Each feature centred on its batch mean and scaled by its batch spread (+1e-3)."""
    return (raw - raw.mean(axis=0)) / (raw.std(axis=0) + 1e-3)


class _Record:
    """What the ``cycle`` leak keeps of a step: it refers to itself."""

    def __init__(self, step: int, error: np.ndarray):
        self.step, self.error = step, error
        self.me = self   # the cycle: its count never drops to zero


@dataclass
class Trainer:
    """The loop's state: weights, data, and whatever the planted ``leaks`` keep."""

    leaks: tuple[str, ...] = ()
    seed: int = 0
    batch: int = BATCH
    history: list = field(default_factory=list)
    cache: dict = field(default_factory=dict)
    captured: list = field(default_factory=list)
    hooks: list[Callable[[np.ndarray], None]] = field(default_factory=list)
    #: With the ``cache`` leak: keep at most this many memo entries (the oldest go first), so
    #: that the memo fills and stops: a plateau. None: unbounded.
    memo_limit: int | None = None
    steps: int = 0

    def __post_init__(self) -> None:
        self.leaks = check_leaks(self.leaks)
        self.data, self.w1, self.w2 = make_data(self.seed, self.batch)
        if "hook" in self.leaks:
            captured = self.captured
            self.hooks.append(lambda hidden: captured.append(hidden))   # the closure keeps them

    def step(self) -> float:
        """One training step; returns its loss."""
        index = self.steps % BATCHES
        key = self.steps if "cache" in self.leaks else index
        if key not in self.cache:
            self.cache[key] = normalise(self.data[index])        # the memo's allocation
            if self.memo_limit is not None and len(self.cache) > self.memo_limit:
                del self.cache[next(iter(self.cache))]
        x = self.cache[key]
        hidden = np.tanh(x @ self.w1)                             # activations (hook: kept)
        for hook in self.hooks:
            hook(hidden)
        recon = hidden @ self.w2                                  # the output (history: kept)
        error = recon - x                                         # the error (cycle: kept)
        loss = float(np.mean(error * error))
        grad = error * (2.0 / error.size)
        grad_hidden = (grad @ self.w2.T) * (1.0 - hidden * hidden)
        self.w2 -= LEARNING_RATE * (hidden.T @ grad)
        self.w1 -= LEARNING_RATE * (x.T @ grad_hidden)
        self.history.append(recon if "history" in self.leaks else loss)
        if "cycle" in self.leaks:
            _Record(self.steps, error)
        self.steps += 1
        return loss

    def run(self, steps: int, on_step: Callable[[int, float], None] | None = None) -> list[float]:
        """``steps`` steps; ``on_step(step, loss)`` after each. Returns their losses."""
        losses = []
        for _ in range(steps):
            losses.append(self.step())
            if on_step is not None:
                on_step(self.steps - 1, losses[-1])
        return losses


def train(steps: int, seed: int = 0, leaks: Collection[str] = (), batch: int = BATCH
          ) -> list[float]:
    """The losses of ``steps`` steps of a fresh :class:`Trainer` (the leaks' memory is freed
    when it returns): the reference a fixed loop's history must match."""
    return Trainer(tuple(leaks), seed, batch).run(steps)


class collector_off:
    """Within the block the cyclic garbage collector is off (as in chapter 6's timed rounds);
    after it, back as it was."""

    def __enter__(self) -> None:
        self._was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc_info: object) -> None:
        if self._was:
            gc.enable()


def torch_total_loss(steps: int, keep_graph: bool = True, seed: int = 0) -> list[int]:
    """PyTorch's classic: ``total_loss += loss`` adds the loss *tensor*, so ``total_loss``
    keeps every step's autograd graph (and the activations it saved) alive;
    ``total_loss += loss.item()`` keeps a float. Returns the bytes tracemalloc counts live after
    each step (torch's CPU allocator does not report to tracemalloc, so this counts only
    Python objects: the graph's nodes; :func:`torch_graph_bytes` counts the saved tensors).
    ImportError without torch."""
    return [point[0] for point in _torch_run(steps, keep_graph, seed)]


def torch_graph_bytes(steps: int, keep_graph: bool = True, seed: int = 0) -> list[int]:
    """The bytes of tensors kept alive by ``total_loss``'s graph after each step: every tensor
    the graph saved for backward, found by walking it from ``total_loss.grad_fn`` (each
    storage once)."""
    return [point[1] for point in _torch_run(steps, keep_graph, seed)]


def _torch_run(steps: int, keep_graph: bool, seed: int) -> list[tuple[int, int]]:
    import tracemalloc

    import torch

    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Tanh(),
                                torch.nn.Linear(HIDDEN, FEATURES))
    data = torch.rand(BATCHES, BATCH, FEATURES)
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    total_loss, points = 0.0, []
    try:
        for step in range(steps):
            x = data[step % BATCHES]
            loss = torch.nn.functional.mse_loss(model(x), x)
            optimizer.zero_grad()
            loss.backward(retain_graph=keep_graph)
            optimizer.step()
            total_loss += loss if keep_graph else loss.item()
            points.append((tracemalloc.get_traced_memory()[0], _graph_bytes(total_loss)))
    finally:
        if started:
            tracemalloc.stop()
    return points


def _graph_bytes(value) -> int:
    """Bytes of the distinct tensors saved in the autograd graph behind ``value``."""
    node = getattr(value, "grad_fn", None)
    seen_nodes, storages, todo = set(), {}, [node] if node is not None else []
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        for name in dir(node):
            if name.startswith("_saved_"):
                try:
                    saved = getattr(node, name)
                except RuntimeError:   # freed after backward
                    continue
                if hasattr(saved, "untyped_storage"):
                    storage = saved.untyped_storage()
                    storages[storage.data_ptr()] = storage.nbytes()
        todo += [parent for parent, _ in node.next_functions]
    return sum(storages.values())


__all__ = ["BATCH", "BATCHES", "FEATURES", "FLOAT_IN_LIST", "HIDDEN", "LEAKS", "LEARNING_RATE",
           "Trainer", "check_leaks", "collector_off", "leak_bytes_per_step", "make_data",
           "normalise", "torch_graph_bytes", "torch_total_loss", "train"]
