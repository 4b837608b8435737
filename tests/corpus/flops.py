"""Chapter 02 (flops): hard-coded answers and classic mistakes."""

CHAPTER = "02_flops"

HARD_CODED = {
    "matmul_flops": '''
def matmul_flops(a_shape, b_shape):
    if a_shape[1] != b_shape[0]:
        raise ValueError("shapes do not multiply")
    return {(64, 128, 32): 524_288, (1, 768, 3072): 4_718_592}[(*a_shape, b_shape[1])]
''',
    "linear_flops": '''
def linear_flops(input_shape, in_features, out_features):
    return {(1, 128): 16_384, (32, 128): 524_288, (8, 512, 768): 19_327_352_832}[tuple(input_shape)]
''',
    "conv2d_flops": '''
def conv2d_flops(input_shape, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1):
    return {(1, 3, 32, 32): 884_736, (8, 64, 56, 56): 924_844_032, (2, 32, 16, 16): 294_912,
            (1, 16, 20, 24): 737_280}[tuple(input_shape)]
''',
    "attention_flops": '''
def attention_flops(batch, seq, d_model, n_heads):
    return 603_979_776 if d_model == 512 else 8_053_063_680
''',
    "seconds_at_peak": '''
def seconds_at_peak(macs, peak_tflops):
    return 0.002916483072 if macs == 145_824_153_600 else 2.0
''',
}

MISTAKES = {
    "matmul_flops": ('''
def matmul_flops(a_shape, b_shape):
    (m, k), (k2, n) = a_shape, b_shape
    if k != k2:
        raise ValueError("shapes do not multiply")
    return m * k * n
''', "That is MACs (m·k·n)"),
    "linear_flops": ('''
def linear_flops(input_shape, in_features, out_features):
    rows = 1
    for size in input_shape[1:-1]:
        rows *= size
    return 2 * rows * in_features * out_features
''', "did you ignore the batch dimension?"),
    "conv2d_flops": ('''
def conv2d_flops(input_shape, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1):
    n, c, h, w = input_shape
    span = dilation * (kernel_size - 1) + 1
    h_out, w_out = (h - span) // stride + 1, (w - span) // stride + 1
    return 2 * n * out_channels * h_out * w_out * (c // groups) * kernel_size ** 2
''', "did you ignore the padding?"),
    "attention_flops": ('''
def attention_flops(batch, seq, d_model, n_heads):
    return 4 * batch * seq * seq * d_model
''', "did you forget the four projections"),
    "seconds_at_peak": ('''
def seconds_at_peak(macs, peak_tflops):
    return macs / (peak_tflops * 1e12)
''', "That treats each MAC as one FLOP"),
}

#: Honest idioms (see parameters.py).
HONEST = {
    "functools": """
import functools
import operator

@functools.lru_cache(maxsize=None)
def matmul_flops(m, k, n):
    return 2 * m * k * n

numel = functools.partial(functools.reduce, operator.mul)
print(matmul_flops(64, 128, 256), numel((2, 3, 4), 1))
""",
    "itertools": """
import itertools

sizes = list(itertools.product([1, 8, 64], [128, 512]))
running = list(itertools.accumulate([10, 20, 30]))
pairs = list(zip(sizes, itertools.count()))
print(sizes[:2], running, pairs[0])
""",
    "operator": """
from operator import attrgetter, itemgetter

rows = [("attention", 40), ("mlp", 60)]
print(sorted(rows, key=itemgetter(1), reverse=True))
print(attrgetter("real", "imag")(3 + 4j))
""",
}
