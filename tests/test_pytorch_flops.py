"""tinyprof's FLOP formulas on torch modules against torch's own counter, FlopCounterMode.

Every configuration runs one forward (and one forward + backward) under
``torch.utils.flop_counter.FlopCounterMode`` and compares its total with tinyprof's count from
the traced operators. Where the two differ, the test states the difference exactly (see
tinyprof/flops/torch_counter.py): torch counts a grouped convolution's weight gradient as if
groups = 1, and counts nothing for the CPU kernels of scaled_dot_product_attention and of the
LSTM. Hugging Face models are in tests/test_pytorch_hf.py.
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


class Block(nn.Module):
    """ResNet's basic block: two 3×3 convs with batch norm, a 1×1 projection when it strides."""

    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1, self.relu = nn.BatchNorm2d(c_out), nn.ReLU(inplace=True)
        self.conv2, self.bn2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False), nn.BatchNorm2d(c_out)
        self.down = nn.Identity() if stride == 1 and c_in == c_out else nn.Sequential(
            nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x):
        y = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
        return self.relu(y + self.down(x))


def resnet18(width: int = 8, classes: int = 10) -> nn.Sequential:
    """ResNet-18's shape (stem, 4 stages of 2 blocks, pooled head) at 1/8 of its width."""
    layers = [nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width),
              nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
    c_in = width
    for stage, c_out in enumerate((width, 2 * width, 4 * width, 8 * width)):
        layers += [Block(c_in, c_out, 1 if stage == 0 else 2), Block(c_out, c_out, 1)]
        c_in = c_out
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c_in, classes))


def decoder(groups: int = 1) -> nn.Sequential:
    """Transposed convolutions that upsample 8×8 to 64×64, as in a segmentation decoder."""
    return nn.Sequential(nn.ConvTranspose2d(16, 8, 4, 2, 1), nn.ReLU(),
                         nn.ConvTranspose2d(8, 4, 3, 2, 1, output_padding=1, groups=groups),
                         nn.Upsample(scale_factor=2), nn.Conv2d(4, 3, 3, padding=1))


class Mixer(nn.Module):
    """einsum as a matmul (ij,jk), as a batched one (bi,bj->bij) and as a contraction."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 6))

    def forward(self, x):
        h = torch.einsum("ij,jk->ik", x, self.w)
        outer = torch.einsum("bi,bj->bij", h, h)
        return torch.einsum("bij,bj->bi", outer, h)


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
    ("resnet18-shaped", lambda: resnet18(), lambda: (_x(2, 3, 64, 64),), {}),
    ("resnet18-shaped-dx", lambda: resnet18(), lambda: (_x(2, 3, 32, 32, grad=True),), {}),
    ("conv-transpose-decoder", lambda: decoder(), lambda: (_x(2, 16, 8, 8, grad=True),), {}),
    ("gru-2-layers", lambda: nn.GRU(8, 16, num_layers=2, batch_first=True),
     lambda: (_x(3, 5, 8),), {}),
    ("lstm-cell-dx", lambda: nn.LSTMCell(8, 16), lambda: (_x(3, 8, grad=True),), {}),
    ("einsum-matmuls", lambda: Mixer(), lambda: (_x(3, 4, grad=True),), {}),
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
    assert tp.count_flops(linear, (1, 128), backward=True) == 32_768     # dX + dW
    assert tp.count_flops(linear, (1, 128), backward=True, skip_first_input_grad=True) == 16_384
    report = tp.flop_report(TinyGPT(), (2, 8))
    assert report.footer[3] == count_flops(TinyGPT(), (2, 8))
    assert report.column("name")[report.column("type").index("SelfAttention")] == "attn"
    [attention] = [r for r in flops_by_module(TinyGPT(), (2, 8)) if r.name == "attn"]
    assert attention.note == "_scaled_dot_product_flash_attention_for_cpu"
    assert attention.matmul == 4 * 2 * 8 * 8 * 16     # only the fused kernel: Linears are rows


@pytest.mark.parametrize("skip", [False, True])
def test_one_call_gives_one_number_on_both_wings(skip):
    """The same call on tinyprof.nn.Linear and torch.nn.Linear: a shape's input needs a
    gradient (dX counted: 69,120 = 2 × 34,560) unless skip_first_input_grad=True."""
    call = {"backward": True, "skip_first_input_grad": skip}
    numpy_count = tp.count_flops(tp.nn.Linear(72, 40), (6, 72), **call)
    torch_count = tp.count_flops(nn.Linear(72, 40), (6, 72), **call)
    assert numpy_count == torch_count == (34_560 if skip else 69_120)
    x = _x(6, 72, grad=not skip)        # a tensor is taken as it is: its requires_grad decides
    assert count_flops(nn.Linear(72, 40), x, backward=True) == torch_counts(nn.Linear(72, 40),
                                                                             (x,))[1]


@pytest.mark.parametrize("backward", [False, True])
def test_both_wings_fill_one_record_and_print_one_table(backward):
    """A torch module's rows are the numpy counter's LayerCount (ModuleFlops is that class),
    and Linear(72, 40) prints the same row and footer in both wings but for its type name."""
    from tinyprof.flops import LayerCount
    from tinyprof.pytorch import ModuleFlops

    assert ModuleFlops is LayerCount
    [row] = flops_by_module(nn.Linear(72, 40), (6, 72), backward=backward)
    assert type(row) is LayerCount and (row.matmul, row.macs) == (34_560, 17_280)
    numpy_report = tp.flop_report(tp.nn.Linear(72, 40), (6, 72), backward)
    torch_report = tp.flop_report(nn.Linear(72, 40), (6, 72), backward)
    assert numpy_report.columns == torch_report.columns
    assert numpy_report.footer == torch_report.footer
    assert numpy_report.rows[0][2:] == torch_report.rows[0][2:]
    assert str(numpy_report).splitlines()[-1] == str(torch_report).splitlines()[-1]


def test_the_lstm_fused_kernel_is_counted_where_torch_counts_zero():
    """On CPU nn.LSTM runs one mkldnn_rnn_layer per layer and direction, which FlopCounterMode
    has no formula for (0, 0); with oneDNN off the same LSTM runs as addmm/mm cells, which it
    counts, and tinyprof's formula for the fused kernel equals that count exactly."""
    for lstm, x in ((nn.LSTM(8, 16, num_layers=2, batch_first=True), _x(3, 5, 8)),
                    (nn.LSTM(8, 16, bidirectional=True), _x(5, 3, 8, grad=True))):
        fused = ours(lstm, (x,))
        assert torch_counts(lstm, (x,)) == (0, 0)
        with torch.backends.mkldnn.flags(enabled=False):
            assert ours(lstm, (x,)) == torch_counts(lstm, (x,)) == fused
    one_layer = ours(nn.LSTM(8, 16), (_x(5, 3, 8),))
    steps, batch, gates = 5, 3, 4 * 16
    assert one_layer[0] == steps * 2 * batch * (8 + 16) * gates


def test_a_grouped_transposed_conv_weight_gradient_is_pinned_like_a_grouped_conv():
    module, x = decoder(groups=2), _x(2, 16, 8, 8, grad=True)
    rows = {r.name: r for r in flops_by_module(module, x, backward=True)}
    forward, backward = ours(module, (x,))
    torch_forward, torch_backward = torch_counts(module, (x,))
    grouped = rows["2"]
    assert grouped.matmul == 2 * 2 * 8 * (4 // 2) * 9 * 16 * 16    # 2·N·C·(O/g)·k·H_in·W_in
    assert forward == torch_forward
    assert torch_backward == backward + (2 - 1) * grouped.grad_weight


def test_a_module_without_products_counts_zero_matmul_and_its_elementwise_work():
    class Scale(nn.Module):
        def forward(self, x):
            return 2 * x

    rows = flops_by_module(nn.Sequential(nn.Linear(4, 4), Scale(), nn.MaxPool1d(2)), (3, 2, 4))
    scale, pool = rows[1], rows[2]
    assert (scale.name, scale.type, scale.matmul, scale.elementwise) == ("1", "Scale", 0, 24)
    assert (pool.type, pool.matmul, pool.elementwise, pool.output_shape) == \
        ("MaxPool1d", 0, 2 * 12, (3, 2, 2))


class Uncounted(nn.Module):
    """A module whose forward multiplies matrices with an operator that has no formula."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        return torch.addmv(x[0], self.linear(x), x[1])


def test_a_product_without_formula_is_refused_by_name():
    with pytest.raises(MissingFlopFormulaError,
                       match=r"(?s)no FLOP formula for the aten operator addmv, called by "
                             r"'\(model\)' \(Uncounted\).*register_function_flops\(torch.ops."
                             r"aten.addmv\)"):
        count_flops(Uncounted(), (4, 4))


def test_register_function_flops_and_formulas_count_an_operator_alike():
    from tinyprof.flops import LayerFlops
    from tinyprof.flops.torch_counter import OP_FLOPS, UNCOUNTED
    from tinyprof.pytorch import register_function_flops

    def addmv(call):
        (m, n) = call.inputs[1]
        return LayerFlops(matmul=2 * m * n, grad_input=0, grad_weight=0)

    linear = 2 * 4 * 4 * 4
    assert count_flops(Uncounted(), (4, 4), formulas={torch.ops.aten.addmv: addmv}) == \
        linear + 2 * 4 * 4
    assert torch.ops.aten.addmv not in OP_FLOPS         # the overlay changed no registry
    register_function_flops(torch.ops.aten.addmv.default)(addmv)
    try:
        assert count_flops(Uncounted(), (4, 4)) == linear + 2 * 4 * 4
    finally:
        del OP_FLOPS[torch.ops.aten.addmv]
        UNCOUNTED[torch.ops.aten.addmv] = "addmv"
    with pytest.raises(TypeError, match="einsum is not an aten operator"):
        register_function_flops(torch.einsum)
    with pytest.raises(TypeError, match="formulas: 'Linear' is not an aten operator"):
        count_flops(nn.Linear(2, 2), (1, 2), formulas={"Linear": addmv})


def test_a_registered_or_given_module_formula_counts_the_module_as_one():
    from tinyprof.flops import LayerFlops
    from tinyprof.flops.torch_counter import MODULE_FLOPS
    from tinyprof.pytorch import register_flops

    class Doubler(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Linear(5, 5)

        def forward(self, x):
            return 2 * self.inner(x)

    def doubler_flops(module, call):
        return LayerFlops(matmul=7, elementwise=call.x[0] * call.x[1], grad_input=0,
                          grad_weight=1)

    [row] = flops_by_module(Doubler(), (3, 5), backward=True, formulas={Doubler: doubler_flops})
    assert (row.name, row.type, row.elementwise, row.matmul, row.backward) == \
        ("(model)", "Doubler", 15, 7, 1)
    register_flops(Doubler)(doubler_flops)
    try:
        assert tp.count_flops(nn.Sequential(Doubler()), (3, 5)) == 7
    finally:
        MODULE_FLOPS.unregister(Doubler)
    assert tp.count_flops(nn.Sequential(Doubler()), (3, 5)) == 2 * 3 * 5 * 5


def test_the_numpy_entry_points_take_a_torch_module_or_refuse_it_by_name():
    rows = tp.flops_by_layer(nn.Linear(72, 40), (6, 72), backward=True, skip_first_input_grad=True)
    assert [(r.name, r.grad_input, r.grad_weight) for r in rows] == [("(model)", 0, 34_560)]
    with pytest.raises(TypeError, match=r"Block is a torch.nn.Module: register its formula "
                                        r"\(module, call\) -> LayerFlops with tinyprof.pytorch"):
        tp.flops.register_flops(Block)


@pytest.mark.parametrize("given", ["tensor", "tuple", "dict", "list-shape", "torch-size"])
def test_inputs_as_a_pytorch_user_has_them(given):
    model = TinyGPT()
    ids = torch.randint(0, 50, (2, 8))
    inputs = {"tensor": ids, "tuple": (ids,), "dict": {"ids": ids}, "list-shape": [2, 8],
              "torch-size": ids.shape}[given]
    with sdpa_kernel(SDPBackend.MATH):
        theirs = torch_counts(model, (ids,))[0]
    assert count_flops(model, inputs) == count_flops(model, (2, 8)) == theirs


def test_a_shape_that_does_not_fit_the_model_is_a_named_error():
    with pytest.raises(TypeError, match=r"CrossSDPA failed on the input made for the shape "
                                        r"\(2, 3, 4, 8\) \(torch.float32 values\): .*missing.*"
                                        r"Give it its inputs as it takes them"):
        count_flops(CrossSDPA(), (2, 3, 4, 8))
    q = _x(2, 3, 4, 8)
    assert count_flops(CrossSDPA(), (q, q, q)) == 2 * 2 * 2 * 3 * 4 * 4 * 8


@pytest.mark.parametrize("bad, message", [
    ("ids", r"give TinyGPT its input as a shape such as \(2, 8\), a tensor"),
    (__import__("numpy").zeros((2, 8)), r"pass torch.from_numpy\(x\) or its shape \(2, 8\)"),
    ({1: 2}, "its keys names; got 1"),
])
def test_an_input_that_is_none_of_those_is_refused_by_name(bad, message):
    with pytest.raises(TypeError, match=message):
        count_flops(TinyGPT(), bad)
