"""Chapter 05 (bottlenecks): hard-coded answers and classic mistakes."""

CHAPTER = "05_bottlenecks"

HARD_CODED = {
    "linear_intensity": '''
def linear_intensity(batch, in_features, out_features, bias=True, bytes_per_element=4):
    return {(1, 1024): 0.49878286270691335, (512, 1024): 128.0,
            (64, 256): 8.366013071895425}.get((batch, in_features), 1.0)
''',
    "elementwise_intensity": '''
def elementwise_intensity(flops_per_element, inputs=1, bytes_per_element=4):
    return {(1, 1): 0.125, (1, 2): 1 / 12, (8, 1): 2.0}[(flops_per_element, inputs)]
''',
    "attainable_flops": '''
def attainable_flops(intensity, peak_flops, bandwidth):
    return {2.0: 40e9}.get(intensity, 100e9)
''',
    "bound": '''
def bound(flops, nbytes, seconds, peak_flops, bandwidth, call_overhead):
    return {0.03: "compute", 5e-6: "overhead", 1e-5: "overhead"}.get(seconds, "memory")
''',
    "top_operations": '''
def top_operations(rows, n=10):
    if n == 3:
        order = ["head", "h.0.mlp.1", "h.0.attn"]
        return sorted([r for r in rows if r["name"] in order], key=lambda r: order.index(r["name"]))
    return list(rows)
''',
    "step_speedup": '''
def step_speedup(seconds_by_part, improved, factor):
    return {2: 1 / 0.65, 4: 2.5}[factor]
''',
}

MISTAKES = {
    "linear_intensity": ('''
def linear_intensity(batch, in_features, out_features, bias=True, bytes_per_element=4):
    flops = 2 * batch * in_features * out_features + (batch * out_features if bias else 0)
    read = batch * in_features + in_features * out_features + (out_features if bias else 0)
    return flops / (read * bytes_per_element)
''', "You left the output out of the bytes"),
    "elementwise_intensity": ('''
def elementwise_intensity(flops_per_element, inputs=1, bytes_per_element=4):
    return flops_per_element / (inputs * bytes_per_element)
''', "You counted only the bytes read"),
    "attainable_flops": ('''
def attainable_flops(intensity, peak_flops, bandwidth):
    return max(peak_flops, intensity * bandwidth)
''', "Take the min, not the max"),
    "bound": ('''
def bound(flops, nbytes, seconds, peak_flops, bandwidth, call_overhead):
    roof = max(flops / peak_flops, nbytes / bandwidth)
    if seconds < 50 * call_overhead and roof < 0.1 * seconds:
        return "overhead"
    return "compute" if flops / nbytes >= bandwidth / peak_flops else "memory"
''', "Did you invert the ridge"),
    "top_operations": ('''
def top_operations(rows, n=10):
    return sorted(rows, key=lambda row: row["total_s"], reverse=True)[:n]
''', "Sorted by TOTAL time"),
    "step_speedup": ('''
def step_speedup(seconds_by_part, improved, factor):
    total = sum(seconds_by_part.values())
    p = sum(seconds_by_part[part] for part in improved) / total
    return 1 / (p + (1 - p) / factor)
''', "The fractions are swapped"),
}

#: Honest idioms (see parameters.py).
HONEST = {
    "dataclasses": """
import dataclasses
from dataclasses import dataclass, field

@dataclass
class Layer:
    name: str
    flops: float
    bytes_moved: float
    notes: list = field(default_factory=list)

    @property
    def intensity(self):
        return self.flops / self.bytes_moved

row = Layer("fc1", 2e9, 4e7)
print(dataclasses.asdict(row), dataclasses.replace(row, name="fc2").intensity)
""",
    "frozen dataclass post-init": """
from dataclasses import dataclass

@dataclass(frozen=True)
class Roof:
    peak_flops: float
    bandwidth: float
    ridge: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, "ridge", self.peak_flops / self.bandwidth)

print(Roof(1e11, 1e10).ridge)
""",
    "matplotlib settings": """
%matplotlib inline
import matplotlib.pyplot as plt

plt.rcParams["figure.figsize"] = (8, 4)
""",
}
