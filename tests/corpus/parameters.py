"""Chapter 01 (parameters): hard-coded answers and classic mistakes."""

CHAPTER = "01_parameters"

HARD_CODED = {
    "linear_params": '''
def linear_params(in_features, out_features, bias=True):
    return {(128, 64, True): 8_256, (768, 3072, True): 2_362_368,
            (128, 64, False): 8_192}[(in_features, out_features, bias)]
''',
    "conv2d_params": '''
def conv2d_params(in_channels, out_channels, kernel_size, groups=1, bias=True):
    return {3: 448, 64: 24_704, 32: 320}[in_channels]
''',
    "attention_params": '''
def attention_params(d_model, bias=True):
    return {768: 2_362_368, 512: 1_048_576}[d_model]
''',
    "count_model_parameters": '''
def count_model_parameters(model):
    return 235_146 if type(model).__name__ == "Sequential" else 168_192
''',
    "parameter_memory_bytes": '''
def parameter_memory_bytes(n_params, dtype):
    return 497_759_232 if str(dtype) == "float32" else 248_879_616
''',
}

MISTAKES = {
    "linear_params": ('''
def linear_params(in_features, out_features, bias=True):
    return in_features * out_features
''', "did you forget the bias"),
    "conv2d_params": ('''
def conv2d_params(in_channels, out_channels, kernel_size, groups=1, bias=True):
    k = kernel_size if isinstance(kernel_size, int) else kernel_size[0]
    return out_channels * in_channels * k * k + out_channels
''', "(3, 1) is a 3×1 kernel"),
    "attention_params": ('''
def attention_params(d_model, bias=True):
    return 3 * d_model * d_model + (3 * d_model if bias else 0)
''', "did you forget the output projection"),
    "count_model_parameters": ('''
def count_model_parameters(model):
    return sum(p.size for _, m in model.named_modules() for _, p in m.own_parameters())
''', "You counted the tied embedding twice"),
    "parameter_memory_bytes": ('''
def parameter_memory_bytes(n_params, dtype):
    import numpy as np
    return n_params * np.dtype(dtype).itemsize * 8
''', "That is bits: a byte is 8 bits"),
}

# Answers handed to tinyprof, although the exercises say to use the formula: the hidden tests
# switch every public route off, so these lose their points with a message saying why.
DELEGATED = {
    "linear_params": ('''
def linear_params(in_features, out_features, bias=True):
    return sum(p.size for p in nn.Linear(in_features, out_features, bias=bias).parameters())
''', "building a tinyprof.nn.Linear is switched off while your function is checked"),
    "count_model_parameters": ('''
def count_model_parameters(model):
    return tp.Profiler().count_parameters(model)
''', "building a tinyprof.Profiler is switched off while your function is checked"),
}

#: Honest idioms a student may write in this chapter, each as a cell of its own: none may be
#: flagged by the static review (autograder/intake/review.py).
HONEST = {
    "autoreload": "%load_ext autoreload\n%autoreload 2\n",
    "setattr in __init__": """
class Config:
    def __init__(self, /, **fields):
        for name, value in fields.items():
            setattr(self, name, value)

    def __repr__(self):
        return f"Config({vars(self)})"

small = Config(d_model=768, n_layers=12, vocab=50257)
print(small, getattr(small, "d_model"))
""",
    "getattr with a default": """
def weight_count(layer):
    total = 0
    for name in ("weight", "bias"):
        part = getattr(layer, name, None)
        if part is not None and hasattr(part, "data"):
            total += part.data.size
    return total
""",
    "dict update in __init__": """
class Row:
    def __init__(self, **columns):
        self.__dict__.update(columns)

print(Row(name="Linear", params=8256).__dict__)
""",
}
