"""tinyprof: measure where the parameters, FLOPs, memory and time of a numpy model go."""

from . import models, nn, ops, optim
from .params import count_parameters, parameter_bytes, parameter_table
from .table import Table

__version__ = "0.1.0"

__all__ = ["Table", "count_parameters", "models", "nn", "ops", "optim", "parameter_bytes",
           "parameter_table"]
