"""The widgets also work on ipywidgets 7.7, the major version Colab ships.

ipywidgets 7.7 (and the two small packages it needs that 8 does not) is installed into a scratch
folder that shadows the environment's ipywidgets 8 in a subprocess, which then builds every
explorer with its initial state and moves a control.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

IPYWIDGETS_7 = ["ipywidgets==7.7.5", "ipython_genutils==0.2.0", "widgetsnbextension==3.6.10",
                "jupyterlab_widgets==1.1.11"]

SCRIPT = textwrap.dedent("""
    import matplotlib
    matplotlib.use("Agg")
    import ipywidgets
    import numpy as np
    import tinyprof as tp
    from tinyprof import models

    assert ipywidgets.__version__.startswith("7.7"), ipywidgets.__version__
    samples = np.random.default_rng(0).lognormal(0, 0.2, 300) * 1e-3
    explorers = [
        tp.widgets.amdahl_explorer(quantity="memory"),
        tp.widgets.transformer_explorer(),
        tp.widgets.attention_share_explorer(),
        tp.widgets.latency_ci_explorer(samples),
        tp.widgets.batch_scaling_explorer(lambda b: 2.0 * b, [1, 2, 4, 8], quantity="FLOPs"),
        tp.widgets.ab_explorer(lambda: None, lambda: None, rounds=10),
        tp.widgets.roofline_explorer(models.gpt2(vocab_size=100, n_ctx=32, d_model=16, n_layer=1,
                                                 n_head=2), batch=2, seq_len=8,
                                     batch_options=(1, 2), seq_options=(8, 16)),
        tp.widgets.memory_breakdown_explorer(
            lambda dtype: models.mlp((64, 32, 10), dtype=dtype), (64,), batch_sizes=(1, 4),
            optimizers=("sgd", "adam"), dtypes=("float32",)),
        tp.widgets.fixes_explorer(("float32",), steps=1),
    ]
    for explorer in explorers:
        assert type(explorer.children[-1]).__name__ == "Output"
        control = explorer.children[0]
        options = getattr(control, "options", None)
        if isinstance(control.value, bool):
            control.value = not control.value
        else:
            control.value = options[0] if options else control.min
    print("ok", ipywidgets.__version__, len(explorers))
""")


@pytest.fixture(scope="module")
def ipywidgets7(tmp_path_factory):
    target = tmp_path_factory.mktemp("ipywidgets7")
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                              "--target", str(target), *IPYWIDGETS_7],
                             capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr[-2000:]
    return target


@pytest.mark.slow
def test_every_explorer_builds_and_redraws_on_ipywidgets_7(ipywidgets7):
    env = dict(os.environ, PYTHONPATH=str(ipywidgets7), MPLBACKEND="Agg")
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         env=env, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert run.stdout.strip().splitlines()[-1] == "ok 7.7.5 9"
