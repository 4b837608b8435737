"""The models every chapter profiles, and what runs them.

- :mod:`.builders`: an MLP, a small CNN and GPT-style transformers (GPT-2 small to XL, or any
  configuration), and :func:`random_input` for any model. Every builder takes ``dtype``
  (float32 by default) and ``shape_only=True``, which allocates no weight arrays;
- :mod:`.optim`: optimizers with real state arrays; :mod:`.vocabulary`: the names a caller may
  give a loss or an optimizer ("cross_entropy", "adam", ...) and the state each keeps;
- :mod:`.training`: training a small classifier and scoring it;
- :mod:`.variants`: float16, int8, pruned and fused copies of a trained model;
- :mod:`.datasets`: the 8×8 digits, shipped inside the package.

:class:`GPT` itself is a layer (:mod:`tinyprof.nn.gpt`); it is re-exported here.
"""

from .builders import GPT, GPT2_SIZES, GPTConfig, gpt2, gpt_part, mlp, random_input, small_cnn

__all__ = ["GPT", "GPT2_SIZES", "GPTConfig", "gpt2", "gpt_part", "mlp", "random_input",
           "small_cnn"]
