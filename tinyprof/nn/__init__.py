"""Layers with a forward and a real backward, built on numpy (``tinyprof.nn``)."""

from .activations import GELU, ReLU
from .attention import MultiHeadAttention, softmax
from .containers import Flatten, Residual, Sequential
from .conv import Conv2d, conv_output_size
from .embedding import Embedding
from .gpt import GPT, GPTConfig
from .inference import FusedLinearReLU, QuantizedLinear
from .linear import Linear
from .losses import CrossEntropyLoss, MSELoss
from .module import Module, Parameter, ShapeError, ShapeOnly, ShapeOnlyError
from .norm import LayerNorm
from .state import KeptState
from .transformer import TiedLMHead, TransformerBlock

__all__ = [
    "Conv2d", "CrossEntropyLoss", "Embedding", "Flatten", "FusedLinearReLU", "GELU", "GPT",
    "GPTConfig", "KeptState", "LayerNorm", "Linear", "QuantizedLinear",
    "MSELoss", "Module", "MultiHeadAttention", "Parameter", "ReLU", "Residual", "Sequential",
    "ShapeError", "ShapeOnly", "ShapeOnlyError", "TiedLMHead", "TransformerBlock",
    "conv_output_size", "softmax",
]
