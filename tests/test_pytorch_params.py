"""Parameters of torch modules: each tensor once (tied weights once), trainable and frozen apart,
through tinyprof.pytorch and through the numpy entry points that dispatch to it."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import tinyprof as tp  # noqa: E402
from tinyprof.pytorch import count_parameters, parameter_counts, parameter_table  # noqa: E402


def tied_lm(vocab: int = 100, d: int = 8) -> nn.Module:
    model = nn.ModuleDict({"wte": nn.Embedding(vocab, d), "ln": nn.LayerNorm(d),
                           "head": nn.Linear(d, vocab, bias=False)})
    model["head"].weight = model["wte"].weight
    return model


def test_linear_counts_weight_and_bias():
    assert count_parameters(nn.Linear(128, 64)) == 128 * 64 + 64 == 8_256
    assert tp.count_parameters(nn.Linear(128, 64, bias=False)) == 8_192


def test_tied_weights_count_once_and_match_torch():
    model = tied_lm()
    assert count_parameters(model) == 100 * 8 + 2 * 8 == 816
    assert count_parameters(model) == sum(p.numel() for p in model.parameters())
    table = parameter_table(model)
    assert "tied to wte.weight" in " ".join(table.column("shape"))
    assert table.footer[3] == 816 and table.footer[5] == 816 * 4


def test_frozen_and_trainable_are_counted_apart():
    model = nn.Sequential(nn.Linear(10, 20), nn.Linear(20, 3))
    model[0].requires_grad_(False)
    assert parameter_counts(model) == (20 * 3 + 3, 10 * 20 + 20)
    assert count_parameters(model, trainable=True) == 63
    assert count_parameters(model, trainable=False) == 220
    table = tp.parameter_table(model)
    assert [row["frozen"] for row in table] == [220, 0]
    assert "frozen" in table[0]["shape"]


def test_bytes_follow_the_dtype():
    model = nn.Linear(4, 4).to(torch.bfloat16)
    assert parameter_table(model).footer[5] == 20 * 2
    assert parameter_table(model, dtype=torch.float32).footer[5] == 20 * 4


def test_a_numpy_model_is_refused_by_the_wing():
    from tinyprof import models

    with pytest.raises(TypeError, match="needs a torch.nn.Module, got Sequential"):
        count_parameters(models.mlp())
