"""Chapter 03 (memory): hard-coded answers and classic mistakes."""

CHAPTER = "03_memory"

HARD_CODED = {
    "peak_memory_bytes": '''
def peak_memory_bytes(fn, *args, **kwargs):
    return 16_000_000 if fn.__name__ == "make_temporary" else 8_000_000
''',
    "stack_activation_bytes": '''
def stack_activation_bytes(layers, input_shape, dtype="float32"):
    return {(64, 784): 323_584, (2, 16, 64): 229_632}[tuple(input_shape)]
''',
    "training_memory_bytes": '''
def training_memory_bytes(n_params, activation_bytes, optimizer="adam", dtype="float32"):
    return {"adam": 4_088_992, "sgd": 2_207_824, "momentum": 6_271_728}[optimizer]
''',
}

MISTAKES = {
    # the classic profiler's bug: it always starts and stops tracing, ending the caller's trace
    "peak_memory_bytes": ('''
def peak_memory_bytes(fn, *args, **kwargs):
    import tracemalloc
    tracemalloc.start()
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    fn(*args, **kwargs)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak - before
''', "You stopped a trace you did not start"),
    # float32's 4 bytes for every dtype
    "stack_activation_bytes": ('''
def stack_activation_bytes(layers, input_shape, dtype="float32"):
    import numpy as np
    from tinyprof import nn
    shape, total = tuple(input_shape), 0
    for layer in layers:
        n = int(np.prod(shape))
        if isinstance(layer, nn.Linear):
            total += 4 * n
            shape = (*shape[:-1], layer.out_features)
        elif isinstance(layer, nn.ReLU):
            total += n
        elif isinstance(layer, nn.GELU):
            total += 8 * n
        else:
            total += 4 * (n + n // shape[-1])
    return total
''', "this block computes in float64 (8 bytes)"),
    # Adam without its two moment arrays
    "training_memory_bytes": ('''
def training_memory_bytes(n_params, activation_bytes, optimizer="adam", dtype="float32"):
    import numpy as np
    return 2 * n_params * np.dtype(dtype).itemsize + activation_bytes
''', "Did you forget the optimizer state?"),
}

#: Honest idioms (see parameters.py).
HONEST = {
    "gc.collect before a measurement": """
import gc

gc.collect()
print(gc.isenabled(), gc.get_count())
""",
    "gc off around a timing": """
import gc as garbage

garbage.disable()
try:
    total = sum(range(1000))
finally:
    garbage.enable()
""",
    "tracemalloc": """
import tracemalloc

was_tracing = tracemalloc.is_tracing()
if not was_tracing:
    tracemalloc.start()
snapshot = tracemalloc.take_snapshot()
if not was_tracing:
    tracemalloc.stop()
""",
    "copy and weakref": """
import copy
import weakref

import numpy as np

class Cache:
    pass

weights = {"w": np.ones((4, 4), dtype=np.float32)}
backup = copy.deepcopy(weights)
cache = Cache()
watched = weakref.ref(cache)
print(backup["w"].nbytes, watched() is cache)
""",
    "sys.getsizeof": """
import sys

print(sys.getsizeof([1, 2, 3]), sys.version_info >= (3, 10))
""",
}
