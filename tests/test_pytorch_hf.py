"""tinyprof.pytorch on Hugging Face models, built from their configs (no weights, no network):
FLOPs against FlopCounterMode, forward and backward, inputs as HF users pass them, and one
training step's memory by component.

transformers is a test dependency (requirements.txt), never a student one, and ``import
tinyprof`` imports neither it nor torch (checked at the end).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

import tinyprof as tp  # noqa: E402
from tinyprof.pytorch import count_flops, flops_by_module, training_memory  # noqa: E402

VOCAB, BATCH, SEQ, WIDTH, HEADS = 500, 2, 16, 64, 4


def build(name: str, attention: str):
    """A 2-layer, 64-wide GPT-2, BERT or Llama (grouped-query attention: 2 key/value heads)."""
    t = transformers
    small = {"gpt2": (t.GPT2LMHeadModel, t.GPT2Config(
                 n_layer=2, n_embd=WIDTH, n_head=HEADS, vocab_size=VOCAB, n_positions=64,
                 bos_token_id=0, eos_token_id=0)),
             "bert": (t.BertForMaskedLM, t.BertConfig(
                 num_hidden_layers=2, hidden_size=WIDTH, num_attention_heads=HEADS,
                 intermediate_size=2 * WIDTH, vocab_size=VOCAB, max_position_embeddings=64)),
             "llama": (t.LlamaForCausalLM, t.LlamaConfig(
                 num_hidden_layers=2, hidden_size=WIDTH, num_attention_heads=HEADS,
                 num_key_value_heads=2, intermediate_size=2 * WIDTH, vocab_size=VOCAB,
                 max_position_embeddings=64, bos_token_id=0, eos_token_id=0))}
    cls, config = small[name]
    config._attn_implementation = attention
    torch.manual_seed(0)
    return cls(config)


def batch() -> dict:
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(0))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def torch_counts(model, kwargs: dict) -> tuple[int, int]:
    """(forward, backward) FLOPs as FlopCounterMode counts them (backward = step − forward)."""
    with FlopCounterMode(display=False) as counter:
        model(**kwargs)
    forward = counter.get_total_flops()
    with FlopCounterMode(display=False) as counter:
        model(**kwargs).logits.sum().backward()
    return forward, counter.get_total_flops() - forward


def ours(model, kwargs: dict) -> tuple[int, int]:
    return count_flops(model, kwargs), count_flops(model, kwargs, backward=True)


#: (forward, backward) FLOPs of each model on a (2, 16) batch: what both counters print.
EXPECTED = {"gpt2": (8_601_600, 17_203_200), "bert": (6_766_592, 13_533_184),
            "llama": (7_028_736, 14_057_472)}


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
@pytest.mark.parametrize("name", ["gpt2", "bert", "llama"])
def test_hf_models_count_as_flop_counter_mode_forward_and_backward(name, attention):
    model, kwargs = build(name, attention), batch()
    with sdpa_kernel(SDPBackend.MATH):    # attention as matmuls, which torch's counter sees
        theirs = torch_counts(model, kwargs)
    assert ours(model, kwargs) == theirs == EXPECTED[name]


def test_llama_on_the_cpu_attention_kernel_is_counted_where_torch_counts_zero():
    """HF Llama with sdpa runs the CPU flash kernel, which FlopCounterMode counts as 0: its
    Q·Kᵀ and A·V, 4·B·H·L·S·(d/H) per layer, are missing from torch's forward, and twice
    that from its backward (the ids need no gradient, but every Q, K and V does)."""
    model, kwargs = build("llama", "sdpa"), batch()
    attention = 2 * 4 * BATCH * SEQ * SEQ * WIDTH          # 2 layers
    assert ours(model, kwargs) == EXPECTED["llama"]
    assert torch_counts(model, kwargs) == (EXPECTED["llama"][0] - attention,
                                           EXPECTED["llama"][1] - 2 * attention)


def test_gpt2_rows_are_its_modules_and_its_conv1d_is_an_addmm():
    rows = {r.name: r for r in flops_by_module(build("gpt2", "eager"), batch())}
    c_attn = rows["transformer.h.0.attn.c_attn"]
    assert (c_attn.type, c_attn.note) == ("Conv1D", "addmm")
    assert c_attn.matmul == 2 * BATCH * SEQ * WIDTH * 3 * WIDTH
    gelu = rows["transformer.h.0.mlp.act"]
    assert (gelu.type, gelu.matmul) == ("NewGELUActivation", 0) and gelu.elementwise > 0
    assert sum(r.matmul for r in rows.values()) == EXPECTED["gpt2"][0]


@pytest.mark.parametrize("given", ["dict", "tensor", "shape"])
def test_hf_inputs_as_users_have_them(given):
    model, kwargs = build("bert", "eager"), batch()
    inputs = {"dict": kwargs, "tensor": kwargs["input_ids"], "shape": (BATCH, SEQ)}[given]
    assert tp.count_flops(model, inputs) == EXPECTED["bert"][0]
    assert tp.Profiler().count_flops(model, inputs) == EXPECTED["bert"][0]
    report = tp.flop_report(model, inputs, backward=True)
    assert report.footer[5] == EXPECTED["bert"][1]
    assert report.title.startswith("BertForMaskedLM on " + {
        "dict": "input_ids=(2, 16), attention_mask=(2, 16)", "tensor": "(2, 16)",
        "shape": "(2, 16)"}[given])


def test_training_memory_of_an_hf_gpt2_step_sums_to_its_measured_peak():
    """Two measurements of one step agree byte for byte: the storages of each component (saved
    tensors, .grad, optimizer.state) and the live tensors the step created (LiveStorages), at
    each mark. The peak is then parameters + optimizer state + the highest phase peak."""
    model, kwargs = build("gpt2", "eager"), batch()
    params = sum(p.numel() for p in model.parameters())     # wte and lm_head tied: once
    ids_bytes = BATCH * SEQ * 8
    for inputs, made_targets in (({**kwargs, "labels": kwargs["input_ids"]}, 0), (kwargs, 1)):
        memory = training_memory(model, inputs, optimizer="adamw")
        forward, backward, step = memory.timeline
        assert memory.parameters.measured_bytes == memory.parameters.predicted_bytes == 4 * params
        # alive after forward: what autograd saved, less the ids (they existed before the
        # step), plus the loss (alive, not saved)
        assert forward.traced_bytes == memory.activations.measured_bytes - ids_bytes + 4
        # after backward only the gradients are new (and targets made for the logits)
        assert backward.traced_bytes == memory.gradients.measured_bytes + made_targets * ids_bytes
        assert memory.gradients.measured_bytes == 4 * params
        assert step.delta_bytes == memory.optimizer_state.measured_bytes == \
            memory.optimizer_state.predicted_bytes
        assert memory.peak_bytes == memory.parameters.measured_bytes + step.delta_bytes + max(
            forward.peak_bytes, backward.peak_bytes)
        assert memory.peak_bytes > memory.parameters.measured_bytes + \
            memory.optimizer_state.measured_bytes + memory.activations.measured_bytes - ids_bytes
    made = training_memory(model, (BATCH, SEQ), optimizer="sgd")
    assert made.parameters.measured_bytes == 4 * params and made.optimizer_state.measured_bytes == 0


def test_the_profiler_times_an_hf_model_forward_and_backward_to_its_root():
    """The HF model returns a ModelOutput (a dict of tensors): its loss's node opens the root's
    backward, so the loss's backward is the model's own time (0 before: the dict was not
    looked into), as for a module returning a tensor."""
    model, kwargs = build("gpt2", "eager"), batch()
    step = lambda: model(**kwargs, labels=kwargs["input_ids"]).loss.backward()   # noqa: E731
    step()
    with tp.Profiler() as prof:
        step()
    rows = {(r["name"], r["phase"]): r for r in prof.layers.rows()}
    for name in ("GPT2LMHeadModel", "transformer.h.0.attn.c_attn", "transformer.h.1.mlp"):
        assert rows[name, "forward"]["calls"] == 1 and rows[name, "backward"]["calls"] == 1
    # the loss (computed inside the model) opens the root's backward: its own time, not 0
    assert rows["GPT2LMHeadModel", "backward"]["self_s"] > 0
    assert prof.layers.coverage > 0.5


def test_hf_gpt2_small_on_the_meta_device_counts_as_tinyprofs_numpy_gpt2_small():
    """No weights at all (the meta device): HF's GPT-2 small on 1,024 tokens counts what the
    numpy wing's shape-only GPT-2 small counts, forward and backward, and its dW (every
    product but attention's two) is told from dX by following the views of the weights."""
    with torch.device("meta"):
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config())
    numpy_gpt2 = tp.models.gpt2("small", shape_only=True)
    rows = flops_by_module(model, (1, 1024), backward=True)
    forward, attention = 291_648_307_200, 38_654_705_664       # chapter 02's numbers
    assert sum(r.matmul for r in rows) == tp.count_flops(numpy_gpt2, (1, 1024)) == forward
    assert sum(r.backward for r in rows) == tp.count_flops(numpy_gpt2, (1, 1024), backward=True)
    assert sum(r.grad_weight for r in rows) == forward - attention
    assert sum(r.grad_input for r in rows) == forward + attention


def test_import_tinyprof_loads_neither_torch_nor_transformers():
    code = ("import sys, tinyprof as tp, tinyprof.pytorch\n"
            "tp.count_flops(tp.models.mlp(), (1, 784))\n"
            "assert 'torch' not in sys.modules and 'transformers' not in sys.modules, "
            "sorted(m for m in sys.modules if m.startswith(('torch', 'transformers')))\n")
    subprocess.run([sys.executable, "-c", code], check=True)
