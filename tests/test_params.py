"""Parameter counting: exact counts and bytes for layers and GPT-2 sizes, shape-only models that
allocate nothing, tied weights counted once, and the parameter table."""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest

from tinyprof import count_parameters, models, parameter_bytes, parameter_table
from tinyprof.nn import (
    Conv2d,
    Embedding,
    LayerNorm,
    Linear,
    MultiHeadAttention,
    ShapeOnly,
    TransformerBlock,
)

TINY_GPT = dict(vocab_size=11, n_ctx=6, d_model=8, n_layer=2, n_head=2)


def gpt2_formula(vocab: int, n_ctx: int, d: int, n_layer: int) -> int:
    """V·d + n_ctx·d + L·(12d² + 13d) + 2d."""
    return vocab * d + n_ctx * d + n_layer * (12 * d * d + 13 * d) + 2 * d


# -- single layers --------------------------------------------------------------------------------
@pytest.mark.parametrize("fan_in, fan_out, expected", [
    (128, 64, 8_256), (256, 128, 32_896), (768, 3072, 2_362_368)])
def test_linear_counts(fan_in, fan_out, expected):
    assert count_parameters(Linear(fan_in, fan_out)) == expected
    assert count_parameters(Linear(fan_in, fan_out, bias=False)) == expected - fan_out


def test_linear_768_3072_bytes_per_dtype():
    fp32 = Linear(768, 3072)
    assert parameter_bytes(fp32) == 9_449_472
    for dtype, expected in [(np.float16, 4_724_736), (np.float32, 9_449_472),
                            (np.float64, 18_898_944)]:
        built = Linear(768, 3072, dtype=dtype)
        assert built.weight.data.dtype == dtype
        assert built.weight.data.nbytes + built.bias.data.nbytes == expected
        assert parameter_bytes(built) == expected
        assert parameter_bytes(fp32, dtype) == expected
        assert parameter_bytes(fp32, np.dtype(dtype).name) == expected


def test_other_layer_counts():
    d = 48
    assert count_parameters(Conv2d(3, 16, 3)) == 16 * 3 * 9 + 16
    assert count_parameters(Conv2d(4, 6, 3, groups=2)) == 6 * 2 * 9 + 6
    assert count_parameters(Conv2d(32, 32, 3, groups=32, bias=False)) == 32 * 9
    assert count_parameters(Conv2d(3, 8, (1, 5))) == 8 * 3 * 5 + 8
    assert count_parameters(Embedding(1000, d)) == 48_000
    assert count_parameters(LayerNorm(d)) == 2 * d
    assert count_parameters(MultiHeadAttention(d, 4)) == 4 * d * d + 4 * d
    assert count_parameters(TransformerBlock(d, 4)) == 12 * d * d + 13 * d


def test_builder_counts():
    # Σ (sizes[i] + 1)·sizes[i+1] = 785·256 + 257·128 + 129·10
    assert count_parameters(models.mlp()) == 235_146
    # three 3×3 convs (3→16→32→64) and a Linear from 64·8·8 to 10
    cnn = 16 * 27 + 16 + 32 * 16 * 9 + 32 + 64 * 32 * 9 + 64 + 64 * 8 * 8 * 10 + 10
    assert cnn == 64_554
    assert count_parameters(models.small_cnn()) == cnn
    assert count_parameters(models.small_cnn(shape_only=True)) == cnn


# -- GPT-2 ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("size, expected", [
    ("small", 124_439_808), ("medium", 354_823_168), ("large", 774_030_080),
    ("xl", 1_557_611_200)])
def test_gpt2_sizes(size, expected):
    model = models.gpt2(size, shape_only=True)
    assert count_parameters(model) == expected
    c = model.config
    assert gpt2_formula(c.vocab_size, c.n_ctx, c.d_model, c.n_layer) == expected
    assert parameter_bytes(model) == 4 * expected


def test_gpt2_small_bytes():
    model = models.gpt2("small", shape_only=True)
    assert parameter_bytes(model) == 497_759_232
    assert parameter_bytes(model, np.float16) == 248_879_616
    assert parameter_bytes(models.gpt2("small", shape_only=True, dtype=np.float16)) == 248_879_616


def test_gpt2_xl_shape_only_allocates_nothing():
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        model = models.gpt2("xl", shape_only=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        if not was_tracing:
            tracemalloc.stop()
    assert peak - before < 10 * 2**20, f"building shape-only XL peaked at {peak - before:,} bytes"
    params = list(model.parameters())
    assert len(params) == 2 + 48 * 16 + 2          # wte, wpe; 16 per block; ln_f
    assert all(isinstance(p.data, ShapeOnly) and p.shape_only for p in params)
    for _, module in model.named_modules():
        arrays = [k for k, v in vars(module).items() if isinstance(v, np.ndarray)]
        assert not arrays, f"{module.describe()} holds numpy arrays {arrays}"
    assert model.h[47].mlp[0].weight.shape == (1600, 6400)
    assert parameter_bytes(model) == 4 * 1_557_611_200


@pytest.mark.parametrize("vocab, n_ctx, d, layers, heads", [
    (1000, 64, 48, 3, 4), (257, 128, 96, 1, 8), (50257, 2048, 128, 2, 2)])
def test_custom_gpt2_count_matches_formula(vocab, n_ctx, d, layers, heads):
    model = models.gpt2(vocab_size=vocab, n_ctx=n_ctx, d_model=d, n_layer=layers, n_head=heads,
                        shape_only=True)
    assert count_parameters(model) == gpt2_formula(vocab, n_ctx, d, layers)


def test_shape_only_and_real_models_count_the_same():
    real, shapes = models.gpt2(**TINY_GPT), models.gpt2(**TINY_GPT, shape_only=True)
    assert count_parameters(real) == count_parameters(shapes) == gpt2_formula(11, 6, 8, 2) == 1_896
    assert parameter_bytes(real) == parameter_bytes(shapes) == 4 * 1_896
    assert not real.shape_only and shapes.shape_only


# -- tied weights ---------------------------------------------------------------------------------
def test_tied_weight_counted_once():
    model = models.gpt2(**TINY_GPT)
    assert model.head.weight is model.wte.weight
    names = [name for name, _ in model.named_parameters()]
    assert "wte.weight" in names and "head.weight" not in names
    assert len(names) == len(set(id(p) for p in model.parameters()))
    untied = sum(p.size for _, m in model.named_modules() for _, p in m.own_parameters())
    assert untied - count_parameters(model) == 11 * 8      # the head would add V·d again
    assert parameter_table(model).footer[3] == count_parameters(model)


# -- the parameter table --------------------------------------------------------------------------
def test_parameter_table_rows_and_plain_records():
    model = models.gpt2(**TINY_GPT)
    table = parameter_table(model)
    records = table.to_records()
    names = [r["name"] for r in records]
    assert names[:4] == ["wte", "wpe", "h.0.ln_1", "h.0.attn.q_proj"]
    assert names[-2:] == ["ln_f", "head"] and len(records) == 2 + 2 * 8 + 2
    by_name = {r["name"]: r for r in records}
    assert by_name["wte"] == {"name": "wte", "type": "Embedding", "shape": "weight (11, 8)",
                              "parameters": 88, "bytes": 352}
    assert by_name["h.1.mlp.layers.0"]["parameters"] == 8 * 32 + 32
    head = by_name["head"]
    assert head["type"] == "TiedLMHead" and head["parameters"] == 0 and head["bytes"] == 0
    assert "tied to wte.weight" in head["shape"]
    assert sum(r["parameters"] for r in records) == count_parameters(model) == 1_896
    assert sum(r["bytes"] for r in records) == parameter_bytes(model) == 7_584
    assert json.loads(json.dumps(records)) == records            # plain data, no numpy types
    assert all(type(r["parameters"]) is int and type(r["bytes"]) is int for r in records)


def test_parameter_table_text_and_html():
    model = models.gpt2(**TINY_GPT)
    table = parameter_table(model)
    text, html = str(table), table._repr_html_()
    for shown in (text, html):
        for name in ("wte", "h.1.attn.out_proj", "h.0.mlp.layers.2", "ln_f", "head", "total",
                     "1,896"):
            assert name in shown, f"{name!r} missing from the table"
    assert text.splitlines()[0] == "GPT: 1,896 parameters, 7.6 KB"
    assert html.startswith("<table") and "<caption>GPT: 1,896 parameters" in html


def test_parameter_table_with_dtype_and_shape_only():
    model = models.gpt2("small", shape_only=True)
    table = parameter_table(model, np.float16)
    assert table.footer[3] == 124_439_808 and table.footer[4] == 248_879_616
    assert table[0]["bytes"] == 50257 * 768 * 2


def test_count_parameters_rejects_non_models():
    with pytest.raises(TypeError, match="count_parameters needs a model with .parameters"):
        count_parameters(np.zeros(3))


def test_modules_held_in_a_dict_are_named_and_counted_and_deeper_ones_refused():
    from tinyprof import nn

    class Heads(nn.Module):
        def __init__(self, nested=False):
            self.heads = {"q": nn.Linear(4, 2), "k": nn.Linear(4, 3, bias=False)}
            if nested:
                self.more = {"v": [nn.Linear(4, 4)]}

    model = Heads()
    assert [name for name, _ in model.named_modules()] == ["", "heads.q", "heads.k"]
    assert count_parameters(model) == (4 * 2 + 2) + 4 * 3
    with pytest.raises(TypeError, match=r"Heads\.more\['v'\].*string keys and modules"):
        count_parameters(Heads(nested=True))
