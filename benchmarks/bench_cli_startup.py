"""How long ``import tinyprof`` and the instructor's command take to start.

``import tinyprof`` should cost little more than the numpy it needs: goal ≤ 1.2× ``import numpy``
(issue 21), so the standard library's heavier modules (subprocess, statistics with decimal and
fractions, argparse, tracemalloc, threading, hashlib, json, html) are imported where they are
used, not at import. ``python -m autograder --help`` (and a mistyped command) should answer at
once: it imports no nbgrader, no Jupyter client and no notebook machinery. Each command runs
ROUNDS times in a fresh interpreter, all interleaved; the median wall time of each is printed,
with its ratio to a bare ``python -c pass`` and to ``import numpy``, and the modules that
``import tinyprof`` loads beyond numpy's. ``import tinyprof`` loads its submodules on first use,
so two more rows show what using it costs: the layers and the timing harness (a chapter's first
cells), and everything the package used to load at import.

The children run with bytecode caches (``PYTHONDONTWRITEBYTECODE`` unset, one untimed run first
to write them), as after ``pip install``, which compiles every module: numpy's caches were
written when it was installed, and comparing it with tinyprof compiled from source at every
start would measure the compiler.

Run: ``python benchmarks/bench_cli_startup.py [ROUNDS]``
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NUMPY = 'python -c "import numpy"'
TINYPROF = 'python -c "import tinyprof"'
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    NUMPY: [sys.executable, "-c", "import numpy"],
    TINYPROF: [sys.executable, "-c", "import tinyprof"],
    "tinyprof: nn, models, measure_latency": [
        sys.executable, "-c", "import tinyprof as tp; from tinyprof import models, nn; "
                              "tp.measure_latency"],
    "tinyprof: all that import used to load": [
        sys.executable, "-c", "import tinyprof; tinyprof._load_all()"],
    "python -m autograder --help": [sys.executable, "-m", "autograder", "--help"],
    "python -m autograder grade --help": [sys.executable, "-m", "autograder", "grade", "--help"],
}


ENV = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}


def extra_modules() -> list[str]:
    """The modules that loading all of tinyprof adds to numpy's (tinyprof's own aside)."""
    code = ("import sys; import numpy; before = set(sys.modules); import tinyprof; "
            "tinyprof._load_all(); "
            "print(' '.join(sorted(m for m in set(sys.modules) - before "
            "if not m.startswith('tinyprof'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True,
                         capture_output=True, text=True, env=ENV).stdout
    return out.split()


def main(rounds: int = 21) -> None:
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for command in COMMANDS.values():   # writes the bytecode caches
        subprocess.run(command, cwd=REPO, check=True, capture_output=True, env=ENV)
    for _ in range(rounds):
        for name, command in COMMANDS.items():
            start = time.perf_counter()
            subprocess.run(command, cwd=REPO, check=True, capture_output=True, env=ENV)
            times[name].append(time.perf_counter() - start)
    base = statistics.median(times["python -c pass"])
    numpy = statistics.median(times[NUMPY])
    print(f"median of {rounds} interleaved runs each:")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:40s} {median:6.3f} s   {median / base:5.1f}× python -c pass   "
              f"{median / numpy:5.2f}× import numpy")
    ratios = [t / n for t, n in zip(times[TINYPROF], times[NUMPY])]
    print(f"import tinyprof / import numpy, median of the {rounds} per-round ratios: "
          f"{statistics.median(ratios):.2f} (goal ≤ 1.2)")
    extra = extra_modules()
    print(f"modules all of tinyprof adds to numpy's, its own aside ({len(extra)}): "
          f"{' '.join(extra)}")
    print("goal: python -m autograder --help under 1 s")


if __name__ == "__main__":
    numbers = [a for a in sys.argv[1:] if a.isdigit()]
    main(int(numbers[0]) if numbers else (2 if "--quick" in sys.argv else 21))
