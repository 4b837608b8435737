"""Chapter 04 (latency): hard-coded answers and classic mistakes."""

CHAPTER = "04_latency"

HARD_CODED = {
    "median_latency": '''
def median_latency(fn, warmup=5, iterations=20, clock=time.perf_counter):
    for _ in range(warmup + iterations):
        fn()
    return {(3, 5): 0.0052, (5, 20): 0.002}[(warmup, iterations)]
''',
    "percentile": '''
def percentile(samples, q):
    return {(5, 50): 5.2, (5, 95): 41.06, (4, 25): 1.75, (5, 0): 5.0,
            (5, 100): 50.0}[(len(samples), q)]
''',
    "bootstrap_ci": '''
def bootstrap_ci(samples, resamples=2000, confidence=0.95, seed=0):
    return (5.1, 5.45)
''',
}

MISTAKES = {
    "median_latency": ('''
def median_latency(fn, warmup=5, iterations=20, clock=time.perf_counter):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iterations):
        start = time.time()
        fn()
        times.append(time.time() - start)
    return float(np.median(times))
''', "you read time.time(), the wall clock"),
    "percentile": ('''
def percentile(samples, q):
    x = list(samples)
    h = (len(x) - 1) * q / 100
    low = int(h)
    if low + 1 >= len(x):
        return x[-1]
    return x[low] + (h - low) * (x[low + 1] - x[low])
''', "sort them first"),
    "bootstrap_ci": ('''
def bootstrap_ci(samples, resamples=2000, confidence=0.95, seed=0):
    x = np.asarray(samples, dtype=float)
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(resamples, x.size))].mean(axis=1)
    tail = 100 * (1 - confidence) / 2
    return tuple(np.percentile(means, [tail, 100 - tail]))
''', "You bootstrapped the mean, not the median"),
}

#: Honest idioms (see parameters.py).
HONEST = {
    "perf_counter and statistics": """
import statistics
import time

samples = []
for _ in range(5):
    start = time.perf_counter()
    sum(range(10_000))
    samples.append(time.perf_counter() - start)
print(statistics.median(samples))
""",
    "timeit magics": "%timeit -n 3 -r 2 sum(range(1000))\n",
    "time cell magic": "%%time\ntotal = sum(range(100_000))\n",
    "inspect.signature": """
import inspect

def median_of(fn, *args, warmup=3):
    return fn(*args)

print(list(inspect.signature(median_of).parameters))
""",
}
