"""Chapter 06 (benchmarking): hard-coded answers and classic mistakes."""

CHAPTER = "06_benchmarking"

HARD_CODED = {
    "time_interleaved": '''
def time_interleaved(a, b, rounds, rng, clock=time.perf_counter):
    clock()
    return [0.002] * rounds, [0.002] * rounds
''',
    "speedup_ci": '''
def speedup_ci(baseline, candidate, resamples=2000, confidence=0.95, seed=0):
    return 1.3125, (1.25, 1.4333333333333336)
''',
    "ab_verdict": '''
def ab_verdict(low, high, p_value, noise_band=0.05, alpha=0.01):
    return {(1.30, 1.45): "faster", (0.70, 0.80): "slower"}.get((low, high), "no change")
''',
    "choose_variant": '''
def choose_variant(rows, max_accuracy_drop=0.01):
    if len(rows) == 2:
        return "edge"
    return {0.01: "int8", 0.001: "fused"}[max_accuracy_drop] if len(rows) == 5 else "float32"
''',
    "check_against_baseline": '''
def check_against_baseline(current_median_s, machine, baseline, tolerance=0.05):
    return {0.0025: "regressed", 0.0016: "ok", 0.00204: "ok"}.get(current_median_s, "incomparable")
''',
}

MISTAKES = {
    "time_interleaved": ('''
def time_interleaved(a, b, rounds, rng, clock=time.perf_counter):
    times_a, times_b = [], []
    for _ in range(rounds):
        start = clock()
        a()
        times_a.append(clock() - start)
    for _ in range(rounds):
        start = clock()
        b()
        times_b.append(clock() - start)
    return times_a, times_b
''', "(sequential blocks)"),
    "speedup_ci": ('''
def speedup_ci(baseline, candidate, resamples=2000, confidence=0.95, seed=0):
    a, b = np.asarray(baseline), np.asarray(candidate)
    rng = np.random.default_rng(seed)
    ra = a[rng.integers(0, a.size, size=(resamples, a.size))].mean(axis=1)
    rb = b[rng.integers(0, b.size, size=(resamples, b.size))].mean(axis=1)
    low, high = np.percentile(ra / rb, [2.5, 97.5])
    return float(a.mean() / b.mean()), (float(low), float(high))
''', "That is a ratio of MEANS"),
    "ab_verdict": ('''
def ab_verdict(low, high, p_value, noise_band=0.05, alpha=0.01):
    if p_value >= alpha:
        return "no change"
    return "faster" if (low + high) / 2 > 1 else "slower"
''', "Significant is not the same as worth anything"),
    "choose_variant": ('''
def choose_variant(rows, max_accuracy_drop=0.01):
    return max(rows, key=lambda r: r["speedup"])["name"]
''', "filter by accuracy_delta"),
    "check_against_baseline": ('''
def check_against_baseline(current_median_s, machine, baseline, tolerance=0.05):
    change = current_median_s / baseline["median_s"] - 1
    return "regressed" if change > tolerance else "ok"
''', "The baseline was measured on another machine"),
}

#: Honest idioms (see parameters.py).
HONEST = {
    "IPython.display": """
from IPython.display import Markdown, display

display(Markdown("**fp16** is *slower* here"))
""",
    "collections": """
from collections import Counter, defaultdict, namedtuple

Result = namedtuple("Result", "name median_ms")
by_verdict = defaultdict(list)
by_verdict["faster"].append(Result("fused", 1.2))
print(Counter(["faster", "slower", "faster"]).most_common(1), dict(by_verdict))
""",
    "vars of an argparse-like object": """
import types

options = types.SimpleNamespace(rounds=20, warmup=3)
print(vars(options), sorted(vars(options).items()))
""",
    "environment variables": """
import os

os.environ["OMP_NUM_THREADS"] = "1"
print(os.environ.get("OMP_NUM_THREADS"), os.path.join("results", "ab.json"))
""",
    "thread settings set and read back, the resident set from /proc/self/statm": """
import os

for variable in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(variable, "1")
threads = int(os.getenv("OMP_NUM_THREADS", "1"))
with open("/proc/self/statm") as statm:
    resident = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
print(threads, os.cpu_count(), f"{resident / 1e6:.1f} MB", "see /proc/self/statm")
""",
}
