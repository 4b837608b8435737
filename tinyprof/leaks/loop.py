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
bytes per step exactly, from the shapes. With torch installed, :func:`torch_kept` shows the
fifth classic, ``total_loss += loss``, beside the habits that do and do not keep activations.
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


#: PyTorch habits that keep, or do not keep, something from every step (:func:`torch_kept`).
TORCH_HABITS = {
    "total_loss += loss.item()": "a float: nothing of the graph",
    "total_loss += loss": "every step's graph nodes; backward() already freed their saved tensors",
    "total_loss += loss, backward(retain_graph=True)": "every step's graph with its saved tensors",
    "eval losses kept, gradients on": "every evaluation's graph with its saved activations: no "
                                      "backward ever frees them",
}


def torch_kept(steps: int, habit: str, seed: int = 0) -> list[tuple[int, int]]:
    """After each step of a small PyTorch training loop written with ``habit`` (a key of
    :data:`TORCH_HABITS`): the bytes of tensors still saved for backward in the graphs the loop
    keeps (each storage once), and the number of graph nodes it keeps. ImportError without
    torch."""
    import torch

    if habit not in TORCH_HABITS:
        raise ValueError(f"unknown habit {habit!r}: one of {', '.join(TORCH_HABITS)}")
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Tanh(),
                                torch.nn.Linear(HIDDEN, FEATURES))
    data = torch.rand(BATCHES, BATCH, FEATURES)
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    total_loss, evaluations, points = 0.0, [], []
    for step in range(steps):
        x = data[step % BATCHES]
        loss = torch.nn.functional.mse_loss(model(x), x)
        optimizer.zero_grad()
        loss.backward(retain_graph=habit.endswith("retain_graph=True)"))
        optimizer.step()
        if habit == "eval losses kept, gradients on":
            evaluations.append(torch.nn.functional.mse_loss(model(x), x))   # no torch.no_grad()
            total_loss += loss.item()
        else:
            total_loss += loss.item() if habit.endswith(".item()") else loss
        kept = [total_loss, *evaluations]
        points.append((_graph_bytes(kept), _graph_nodes(kept)))
    return points


def torch_graph_bytes(steps: int, keep_graph: bool = True, seed: int = 0) -> list[int]:
    """The bytes of saved tensors behind ``total_loss`` after each step, written as
    ``total_loss += loss`` with ``backward(retain_graph=True)`` (``keep_graph``) or as
    ``total_loss += loss.item()``: :func:`torch_kept` for those two habits."""
    habit = ("total_loss += loss, backward(retain_graph=True)" if keep_graph
             else "total_loss += loss.item()")
    return [saved for saved, _ in torch_kept(steps, habit, seed)]


def _graph_walk(values) -> list:
    """The distinct autograd nodes behind ``values`` (tensors, or anything else: skipped)."""
    todo = [getattr(value, "grad_fn", None) for value in values]
    seen, nodes = set(), []
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        nodes.append(node)
        todo += [parent for parent, _ in node.next_functions]
    return nodes


def _graph_nodes(values) -> int:
    return len(_graph_walk(values))


def _graph_bytes(values) -> int:
    """Bytes of the distinct tensors still saved in the autograd graphs behind ``values``
    (a saved tensor that backward freed raises on access and counts nothing)."""
    storages = {}
    for node in _graph_walk(values):
        for name in dir(node):
            if name.startswith("_saved_"):
                try:
                    saved = getattr(node, name)
                except RuntimeError:   # freed after backward
                    continue
                if hasattr(saved, "untyped_storage"):
                    storage = saved.untyped_storage()
                    storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values())


__all__ = ["BATCH", "BATCHES", "FEATURES", "FLOAT_IN_LIST", "HIDDEN", "LEAKS", "LEARNING_RATE",
           "Trainer", "check_leaks", "collector_off", "leak_bytes_per_step", "make_data",
           "normalise", "TORCH_HABITS", "torch_graph_bytes", "torch_kept", "train"]
