"""Embedding lookup: row ``i`` of the table for token id ``i``."""

from __future__ import annotations

import numpy as np

from .checks import positive_int
from .module import Module, new_parameter


class Embedding(Module):
    """y[..., :] = W[ids[...], :], W of shape (num_embeddings, embedding_dim).

    No multiplies: backward scatters dy back into the rows that were read (dW[id] += dy).
    Token ids have no gradient, so backward returns None.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, *,
                 dtype=np.float32, shape_only: bool = False, rng=None, std: float = 0.02):
        self.num_embeddings = positive_int("Embedding", "num_embeddings", num_embeddings)
        self.embedding_dim = positive_int("Embedding", "embedding_dim", embedding_dim)
        self.weight = new_parameter((num_embeddings, embedding_dim), dtype, shape_only, rng,
                                    scale=std * np.sqrt(3.0))

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        """Token ids (...) → vectors (..., embedding_dim)."""
        return (*input_shape, self.embedding_dim)

    def forward(self, ids: np.ndarray) -> np.ndarray:
        self.check_runnable()
        ids = np.asarray(ids)
        if not np.issubdtype(ids.dtype, np.integer):
            raise TypeError(f"{self.describe()} looks up integer token ids; got dtype {ids.dtype} "
                            "(convert whole-number ids with ids.astype(np.int64))")
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_embeddings):
            raise IndexError(
                f"{self.describe()} has {self.num_embeddings} rows; got token ids from "
                f"{ids.min()} to {ids.max()}")
        self._ids = ids
        return self.weight.data[ids]

    def backward(self, grad: np.ndarray) -> None:
        dweight = np.zeros(self.weight.shape, dtype=self.weight.dtype)
        (ids,) = self.pop_saved("_ids")
        np.add.at(dweight, ids.reshape(-1), grad.reshape(-1, self.embedding_dim))
        self.weight.accumulate_grad(dweight)
        return None

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"
