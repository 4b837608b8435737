"""tinyprof's FLOP formulas on torch modules against torch's own counter, FlopCounterMode.

Every configuration runs one forward (and one forward + backward) under
``torch.utils.flop_counter.FlopCounterMode`` and compares its total with tinyprof's count from
the traced shapes. Where the two differ, the test states the difference exactly (see
tinyprof/pytorch/flops.py): torch counts a grouped convolution's weight gradient as if
groups = 1, and counts nothing for the CPU kernel of scaled_dot_product_attention.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

import tinyprof as tp  # noqa: E402
from tinyprof.flops import MissingFlopFormulaError  # noqa: E402
from tinyprof.pytorch import count_flops, flops_by_module  # noqa: E402


def _scalar(output) -> torch.Tensor:
    first = output[0] if isinstance(output, tuple) else output
    return first.float().sum()


def torch_counts(module, inputs: tuple, kwargs: dict | None = None) -> tuple[int, int]:
    """(forward, backward) FLOPs as FlopCounterMode counts them (backward = step − forward)."""
    kwargs = kwargs or {}
    with FlopCounterMode(display=False) as counter:
        module(*inputs, **kwargs)
    forward = counter.get_total_flops()
    with FlopCounterMode(display=False) as counter:
        _scalar(module(*inputs, **kwargs)).backward()
    return forward, counter.get_total_flops() - forward


def ours(module, inputs: tuple, kwargs: dict | None = None) -> tuple[int, int]:
    return (count_flops(module, inputs=inputs, kwargs=kwargs),
            count_flops(module, inputs=inputs, kwargs=kwargs, backward=True))


def _x(*shape, grad=False, seed=0):
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    return x.requires_grad_(grad)


class SelfAttention(nn.Module):
    """Causal self-attention of a GPT block, by F.scaled_dot_product_attention or by hand."""

    def __init__(self, d: int, heads: int, by_hand: bool = False, causal: bool = True):
        super().__init__()
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.heads, self.by_hand, self.causal = heads, by_hand, causal

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2)
                   for t in self.qkv(x).split(d, dim=-1))
        if self.by_hand:
            scores = q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5
            if self.causal:
                mask = torch.ones(s, s, dtype=torch.bool).triu(1)
                scores = scores.masked_fill(mask, float("-inf"))
            out = scores.softmax(-1) @ v
        else:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.proj(out.transpose(1, 2).reshape(b, s, d))


class CrossSDPA(nn.Module):
    """F.scaled_dot_product_attention on given q, k, v (lengths and widths may differ)."""

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)


class TinyGPT(nn.Module):
    def __init__(self, vocab=50, d=16, heads=2, seq=8, by_hand=False):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.ln1, self.attn = nn.LayerNorm(d), SelfAttention(d, heads, by_hand)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)
        self.head.weight = self.wte.weight   # tied

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return self.head(self.ln_f(x))


#: (id, build the module, its inputs, keyword arguments): torch and tinyprof agree exactly.
AGREE = [
    ("linear-128-64", lambda: nn.Linear(128, 64), lambda: (_x(1, 128),), {}),
    ("linear-nobias-dx", lambda: nn.Linear(16, 32, bias=False), lambda: (_x(4, 16, grad=True),),
     {}),
    ("linear-3d-dx", lambda: nn.Linear(16, 24), lambda: (_x(2, 5, 16, grad=True),), {}),
    ("linear-frozen", lambda: nn.Linear(16, 8).requires_grad_(False),
     lambda: (_x(3, 16, grad=True),), {}),
    ("conv2d-3x3", lambda: nn.Conv2d(3, 8, 3), lambda: (_x(2, 3, 10, 10),), {}),
    ("conv2d-stride-pad", lambda: nn.Conv2d(3, 8, 3, stride=2, padding=1),
     lambda: (_x(2, 3, 11, 9, grad=True),), {}),
    ("conv2d-dilation-rect", lambda: nn.Conv2d(4, 6, (3, 5), dilation=2, padding=(2, 1),
                                               bias=False),
     lambda: (_x(1, 4, 12, 12, grad=True),), {}),
    ("conv2d-1x1-stride3", lambda: nn.Conv2d(4, 6, 1, stride=3), lambda: (_x(2, 4, 9, 7),), {}),
    ("conv1d-pad", lambda: nn.Conv1d(4, 8, 5, padding=2), lambda: (_x(2, 4, 20, grad=True),),
     {}),
    ("conv1d-stride-dilation", lambda: nn.Conv1d(6, 12, 3, stride=2, dilation=3),
     lambda: (_x(3, 6, 25),), {}),
    ("mha-self-batch-first", lambda: nn.MultiheadAttention(16, 4, batch_first=True),
     lambda: (_x(2, 6, 16, grad=True),) * 3, {}),
    ("mha-seq-first-nodx", lambda: nn.MultiheadAttention(16, 2), lambda: (_x(5, 3, 16),) * 3,
     {}),
    ("mha-cross-kdim-vdim", lambda: nn.MultiheadAttention(12, 3, kdim=8, vdim=10,
                                                          batch_first=True),
     lambda: (_x(2, 4, 12, grad=True), _x(2, 7, 8, seed=1), _x(2, 7, 10, seed=2)), {}),
    ("sdpa-math-causal", lambda: SelfAttention(16, 4), lambda: (_x(2, 8, 16),), {}),
    ("sdpa-math-full-dx", lambda: SelfAttention(16, 2, causal=False),
     lambda: (_x(2, 6, 16, grad=True),), {}),
    ("sdpa-math-cross", lambda: CrossSDPA(),
     lambda: (_x(2, 3, 5, 8, grad=True), _x(2, 3, 7, 8, seed=1, grad=True),
              _x(2, 3, 7, 4, seed=2)), {}),
    ("attention-by-hand", lambda: SelfAttention(16, 4, by_hand=True), lambda: (_x(2, 8, 16),),
     {}),
    ("mlp-gelu", lambda: nn.Sequential(nn.Linear(10, 20), nn.GELU(), nn.Linear(20, 5),
                                       nn.ReLU()), lambda: (_x(7, 10),), {}),
    ("norm-embedding-activations", lambda: nn.Sequential(nn.LayerNorm(8), nn.SiLU(), nn.Tanh(),
                                                         nn.Sigmoid(), nn.Dropout(0.1)),
     lambda: (_x(4, 8, grad=True),), {}),
    ("tiny-gpt-tied", lambda: TinyGPT(), lambda: (torch.randint(0, 50, (2, 8)),), {}),
    ("tiny-gpt-by-hand", lambda: TinyGPT(by_hand=True), lambda: (torch.randint(0, 50, (3, 8)),),
     {}),
]


@pytest.mark.parametrize("build, make_inputs, kwargs", [c[1:] for c in AGREE],
                         ids=[c[0] for c in AGREE])
def test_forward_and_backward_flops_equal_flop_counter_mode(build, make_inputs, kwargs):
    torch.manual_seed(0)
    module, inputs = build(), make_inputs()
    with sdpa_kernel(SDPBackend.MATH):   # the backend whose matmuls torch's counter sees
        assert ours(module, inputs, kwargs) == torch_counts(module, inputs, kwargs)


@pytest.mark.parametrize("groups, dx", [(4, False), (4, True), (8, True), (2, False)])
def test_grouped_conv_weight_gradient_is_counted_as_if_ungrouped_by_torch(groups, dx):
    """dW of a grouped conv multiplies each group's (C/g)-channel input with its own O/g
    output channels: 2·N·O·Ho·Wo·(C/g)·k FLOPs, what tinyprof counts. FlopCounterMode reuses
    the ungrouped formula, 2·N·O·Ho·Wo·C·k: g times as much. Forward and dX agree."""
    module = nn.Conv2d(8, 16, 3, groups=groups, padding=1)
    inputs = (_x(2, 8, 10, 10, grad=dx),)
    forward, backward = ours(module, inputs)
    [row] = flops_by_module(module, inputs=inputs, backward=True)
    torch_forward, torch_backward = torch_counts(module, inputs)
    assert forward == torch_forward == 2 * 2 * 16 * 10 * 10 * (8 // groups) * 9
    assert row.grad_weight == forward and row.grad_input == (forward if dx else 0)
    assert torch_backward == backward + (groups - 1) * row.grad_weight


@pytest.mark.parametrize("build, make_inputs, kwargs, attention", [
    (lambda: SelfAttention(16, 4), lambda: (_x(2, 8, 16),), {}, (4, 8)),
    (lambda: nn.MultiheadAttention(16, 4, batch_first=True), lambda: (_x(2, 8, 16),) * 3,
     {"need_weights": False}, (4, 8)),
], ids=["sdpa-cpu-kernel", "mha-need-weights-false"])
def test_torch_counts_nothing_for_the_cpu_attention_kernel(build, make_inputs, kwargs,
                                                           attention):
    """On CPU, scaled_dot_product_attention runs a fused (flash) kernel that FlopCounterMode
    has no formula for: its 4·B·S²·d forward and 8·B·S²·d backward matmuls count as 0 there."""
    module, inputs = build(), make_inputs()
    batch, seq, d = 2, 8, 16
    forward_factor, backward_factor = attention
    forward, backward = ours(module, inputs, kwargs)
    torch_forward, torch_backward = torch_counts(module, inputs, kwargs)
    assert torch_forward == forward - forward_factor * batch * seq * seq * d
    assert torch_backward == backward - backward_factor * batch * seq * seq * d


def test_the_facade_dispatches_and_matches_the_documented_example():
    linear = nn.Linear(128, 64)
    assert tp.count_flops(linear, (1, 128)) == 16_384
    assert tp.count_flops(linear, (1, 128), backward=True) == 16_384   # dW only
    report = tp.flop_report(TinyGPT(), (2, 8))
    assert report.footer[3] == count_flops(TinyGPT(), (2, 8))
    assert "scaled_dot_product_attention" in report.column("type")


def test_an_unknown_module_is_named_not_counted_as_zero():
    class Scale(nn.Module):
        def forward(self, x):
            return 2 * x

    model = nn.Sequential(nn.Linear(4, 4), Scale())
    with pytest.raises(MissingFlopFormulaError, match=r"(?s)no FLOP formula for Scale '1'.*"
                                                      r"register_flops\(Scale\)"):
        count_flops(model, (2, 4))
    for module in (nn.GRU(4, 4), nn.ConvTranspose2d(2, 2, 3)):
        shape = (3, 2, 4) if isinstance(module, nn.GRU) else (1, 2, 5, 5)
        with pytest.raises(MissingFlopFormulaError, match=type(module).__name__):
            count_flops(module, shape)


def test_a_matmul_like_function_without_formula_is_named():
    class Mixer(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(4, 4)

        def forward(self, x):
            return torch.einsum("bi,bj->bij", self.linear(x), x)

    with pytest.raises(MissingFlopFormulaError, match="einsum, called by '\\(model\\)'"):
        count_flops(Mixer(), (2, 4))


def test_a_registered_formula_counts_a_module_of_your_own():
    from tinyprof.flops import LayerFlops
    from tinyprof.pytorch import register_flops
    from tinyprof.pytorch.flops import MODULE_FLOPS

    class Doubler(nn.Module):
        def forward(self, x):
            return 2 * x

    @register_flops(Doubler)
    def doubler_flops(module, call):
        return LayerFlops(elementwise=call.x[0] * call.x[1], grad_input=0, grad_weight=0)

    try:
        [row] = flops_by_module(Doubler(), (3, 5))
        assert (row.name, row.type, row.elementwise, row.matmul) == ("(model)", "Doubler", 15, 0)
    finally:
        MODULE_FLOPS.unregister(Doubler)
