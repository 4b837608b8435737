"""``import tinyprof`` loads nothing until a name is used (PEP 562), every public name still
resolves to the object its module defines, and importing tinyprof.testing binds them all (it
names routes from the package's namespace). How long it takes is measured, not asserted:
benchmarks/bench_cli_startup.py."""

import subprocess
import sys

import pytest


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_import_tinyprof_loads_no_submodule_and_no_numpy():
    loaded = _run("import sys, tinyprof; print(sorted(m for m in sys.modules "
                  "if m.startswith(('tinyprof.', 'numpy', 'subprocess', 'statistics', "
                  "'argparse', 'tracemalloc', 'threading', 'decimal', 'json'))))")
    assert loaded == "[]"


def test_a_name_is_loaded_on_first_use_and_kept():
    out = _run("import sys, tinyprof as tp\n"
               "print('tinyprof.params' in sys.modules, 'count_parameters' in vars(tp))\n"
               "from tinyprof.params import count_parameters\n"
               "print(tp.count_parameters is count_parameters, 'count_parameters' in vars(tp))\n"
               "print('tinyprof.suite' in sys.modules, 'matplotlib' in sys.modules)")
    assert out.splitlines() == ["False False", "True True", "False False"]


def test_importing_testing_binds_every_public_name():
    """Only the plotting names stay lazy: they would import matplotlib."""
    out = _run("import tinyprof, tinyprof.testing\n"
               "print(sorted(n for n in tinyprof.__all__ if n not in vars(tinyprof)))")
    assert out == str(sorted(["plot_ab", "plot_latency", "plot_performance_comparison",
                              "plot_roofline"]))


def test_every_public_name_and_submodule_resolves():
    import tinyprof

    for name in tinyprof.__all__ + ["roofline", "regression", "abtest", "training", "datasets"]:
        assert getattr(tinyprof, name) is not None, name
    assert set(tinyprof.__all__) <= set(dir(tinyprof))
    with pytest.raises(AttributeError, match="no attribute 'count_flop'"):
        _ = tinyprof.count_flop


def test_tinyprof_never_loads_dask():
    """dask is the grader's (autograder/dispatch/): not the library's, nor the students'."""
    out = _run("import sys, tinyprof, tinyprof.testing\n"
               "for name in tinyprof.__all__: getattr(tinyprof, name)\n"
               "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', "
               "'distributed')))")
    assert out == "[]"
