"""How long the instructor's command takes to start, beside ``import tinyprof``.

``python -m autograder --help`` (and a mistyped command) should answer at once: it imports no
nbgrader, no Jupyter client and no notebook machinery. Each command runs ROUNDS times in a fresh
interpreter, the three interleaved; the median wall time of each is printed, with its ratio to
a bare ``python -c pass``.

Run: ``python benchmarks/bench_cli_startup.py [ROUNDS]``
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    'python -c "import tinyprof"': [sys.executable, "-c", "import tinyprof"],
    "python -m autograder --help": [sys.executable, "-m", "autograder", "--help"],
    "python -m autograder grade --help": [sys.executable, "-m", "autograder", "grade", "--help"],
}


def main(rounds: int = 7) -> None:
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(rounds):
        for name, command in COMMANDS.items():
            start = time.perf_counter()
            subprocess.run(command, cwd=REPO, check=True, capture_output=True)
            times[name].append(time.perf_counter() - start)
    base = statistics.median(times["python -c pass"])
    print(f"median of {rounds} interleaved runs each:")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:36s} {median:6.3f} s   {median / base:5.1f}× python -c pass")
    print("goal: python -m autograder --help under 1 s")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
