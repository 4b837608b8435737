"""A quiet first run (issue 26): `make setup` prints no setuptools warnings, and the book's
kernels are started with CurveZMQ keys, so ipykernel 7 has no plain-TCP warning to print."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from chapters import REPO

BIN = Path(sys.executable).parent
LICENSE_TABLE = 'license = { text = "MIT" }'


def _package_copy(where: Path) -> Path:
    """What building tinyprof needs (pyproject.toml, README.md, tinyprof/), copied."""
    where.mkdir(parents=True)
    shutil.copy(REPO / "pyproject.toml", where)
    shutil.copy(REPO / "README.md", where)
    shutil.copytree(REPO / "tinyprof", where / "tinyprof",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return where


def _wheel(source: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "python"), "-m", "pip", "wheel", "--no-deps", "--quiet",
                           "--wheel-dir", str(out), str(source)],
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_the_package_metadata_builds_without_warnings_and_the_old_table_would_not(tmp_path):
    pyproject = (REPO / "pyproject.toml").read_text()
    assert 'license = "MIT"' in pyproject and LICENSE_TABLE not in pyproject
    assert 'requires = ["setuptools>=77"]' in pyproject   # the first to take an SPDX string
    quiet = _wheel(_package_copy(tmp_path / "now"), tmp_path / "wheels")
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    assert "BuildBackendWarning" not in quiet.stderr, quiet.stderr
    # the same pip and setuptools do show the warning for the table this replaced
    old = _package_copy(tmp_path / "old")
    (old / "pyproject.toml").write_text(pyproject.replace('license = "MIT"', LICENSE_TABLE))
    noisy = _wheel(old, tmp_path / "wheels-old")
    assert noisy.returncode == 0, noisy.stderr[-3000:]
    assert "`project.license` as a TOML table is deprecated" in noisy.stderr


@pytest.mark.slow
def test_make_setup_prints_no_build_backend_warning(tmp_path):
    """The Makefile's own set-up (a new venv, pip upgraded, an editable install) on a copy whose
    requirements are tinyprof alone."""
    copy = _package_copy(tmp_path / "course")
    shutil.copy(REPO / "Makefile", copy)
    (copy / "book").mkdir(exist_ok=True)
    for name in ("package.json", "package-lock.json"):   # the book's pinned npm packages
        shutil.copy(REPO / "book" / name, copy / "book" / name)
    (copy / "requirements.txt").write_text("-e .\n")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONWARNINGS")}
    run = subprocess.run(["make", "setup"], cwd=copy, capture_output=True, text=True, env=env,
                         timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    said = run.stdout + run.stderr
    assert "BuildBackendWarning" not in said and "deprecated" not in said, said[-3000:]
    check = subprocess.run([str(copy / ".venv/bin/python"), "-c",
                            "import tinyprof, sys; print(tinyprof.__file__)"],
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert check.stdout.strip() == str(copy / "tinyprof" / "__init__.py"), "not editable"


ENCRYPTION_CHECK = """
import sys
sys.path.insert(0, {ext!r})
import nbformat
from myst_nb.core.execute import direct
import kernel_encryption
if sys.argv[1] == "book":
    kernel_encryption.setup(None)          # what the book build does when it loads it
nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
    "from ipykernel.kernelapp import IPKernelApp; app = IPKernelApp.instance(); "
    "print(app.transport, app.curve_secretkey is not None)")])
nb.metadata["kernelspec"] = {{"name": "python3", "display_name": "Python 3",
                              "language": "python"}}
result = direct.single_nb_execution(nb, cwd=".", timeout=120, allow_errors=False)
assert result.err is None, result.exc_string
print("kernel:", nb.cells[0].outputs[0]["text"].strip())
"""


def _execute(mode: str, tmp_path: Path) -> subprocess.CompletedProcess:
    code = ENCRYPTION_CHECK.format(ext=str(REPO / "book" / "_ext"))
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run([str(BIN / "python"), "-c", code, mode], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path, env=env)


@pytest.mark.kernel
def test_the_books_kernels_run_with_curve_keys_and_print_no_tcp_warning(tmp_path):
    sys.path.insert(0, str(REPO / "book" / "_ext"))
    try:
        import kernel_encryption
    finally:
        sys.path.pop(0)
    if not kernel_encryption.encryption_available():
        pytest.skip("this jupyter_client or pyzmq cannot provision CurveZMQ keys")
    book = _execute("book", tmp_path)
    assert book.returncode == 0, book.stderr[-3000:]
    assert "kernel: tcp True" in book.stdout, "the kernel got no CurveZMQ secret key"
    assert "without encryption" not in book.stderr, book.stderr
    # without the extension, the same kernel runs in plain text (and ipykernel 7 says so)
    import ipykernel

    plain = _execute("plain", tmp_path)
    assert plain.returncode == 0 and "kernel: tcp False" in plain.stdout, plain.stderr[-3000:]
    if int(ipykernel.__version__.split(".")[0]) >= 7:
        assert "Kernel is running over TCP without encryption" in plain.stderr
