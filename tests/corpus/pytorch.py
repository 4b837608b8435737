"""Chapter 07 (pytorch): hard-coded answers, classic mistakes, and answers delegated to tinyprof."""

CHAPTER = "07_pytorch"

HARD_CODED = {
    "count_params": '''
def count_params(module):
    n = sum(p.numel() for p in module.parameters())
    return {8256: (8256, 0), 816: (816, 0), 478720: (478720, 0)}.get(n, (800, 16))
''',
    "conv2d_flops": '''
def conv2d_flops(x_shape, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 needs_input_grad=False):
    return {(2, 3, 10, 10): (55296, 0, 55296), (2, 3, 11, 9): (25920, 25920, 25920),
            (1, 4, 12, 12): (62208, 0, 62208),
            (2, 8, 10, 10): (115200, 115200, 115200)}.get(tuple(x_shape), (0, 0, 0))
''',
    "adam_state_bytes": '''
def adam_state_bytes(module):
    n = sum(p.numel() for p in module.parameters() if p.requires_grad)
    half = next(module.parameters()).element_size() == 2
    return {44: 184 if half else 360, 816: 6540, 800: 6404}.get(n, 0)
''',
    "backward_segments": '''
def backward_segments(events, end):
    known = {9: {"head": 0.004, "ln_f": 0.001, "blocks.1.mlp": 0.006, "blocks.1.attn": 0.005,
                 "wte": 0.002},
             6: {"attn": 0.003, "attn.proj": 0.002, "ln_1": 0.001}
             if events[0][2] == "attn" else {"lm_head": 0.003, "block": 0.003},
             4: {"head": 0.001, "wte": 0.001}}
    return known.get(len(events), {"only": 0.25})
''',
    "device_time": '''
def device_time(fn, synchronize, clock):
    synchronize()
    fn()
    synchronize()
    return 0.003005
''',
}

MISTAKES = {
    "count_params": ('''
def count_params(module):
    return sum(t.numel() for t in module.state_dict().values()), 0
''', "The tied head weight was counted twice"),
    "conv2d_flops": ('''
def conv2d_flops(x_shape, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 needs_input_grad=False):
    n, c, h, w = x_shape
    reach = dilation * (kernel_size - 1) + 1
    h_out = (h + 2 * padding - reach) // stride + 1
    w_out = (w + 2 * padding - reach) // stride + 1
    flops = 2 * n * out_channels * h_out * w_out * c * kernel_size * kernel_size
    return flops, (flops if needs_input_grad else 0), flops
''', "Each output channel sees only C/groups"),
    "adam_state_bytes": ('''
def adam_state_bytes(module):
    return sum(2 * p.numel() * p.element_size() for p in module.parameters() if p.requires_grad)
''', "Adam also keeps a step counter per parameter tensor"),
    "backward_segments": ('''
def backward_segments(events, end):
    totals, current, since = {}, None, 0.0
    for time, kind, name in events + [(end, "open", None)]:
        if kind == "open":
            if current is not None:
                totals[current] = totals.get(current, 0.0) + time - since
            current, since = name, time
            if name is not None:
                totals.setdefault(name, 0.0)
    return totals
''', "the innermost open module"),
    "device_time": ('''
def device_time(fn, synchronize, clock):
    start = clock()
    fn()
    synchronize()
    return clock() - start
''', "That includes the 7 ms of earlier work still in the queue"),
}

DELEGATED = {
    "count_params": ('''
def count_params(module):
    from tinyprof.pytorch import parameter_counts
    return tuple(parameter_counts(module))
''', "is switched off while your function is checked"),
    "conv2d_flops": ('''
def conv2d_flops(x_shape, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 needs_input_grad=False):
    conv = nn.Conv2d(x_shape[1], out_channels, kernel_size, stride=stride, padding=padding,
                     dilation=dilation, groups=groups)
    x = torch.zeros(x_shape, requires_grad=needs_input_grad)
    [row] = tp.pytorch.flops_by_module(conv, inputs=x, backward=True)
    return row.matmul, row.grad_input, row.grad_weight
''', "is switched off while your function is checked"),
}
