"""Each chapter's budget: wall time to execute it top to bottom and the kernel's peak memory.

Budget (COURSE.md): well under 30 s and well under 700 MB on a 2-core machine, so that every
chapter also runs within the 1 GB that Binder guarantees (2 GB at most). Runs every instructor
notebook in a fresh kernel with nbclient and reads the kernel process's high-water mark (VmHWM,
Linux) before shutting it down.

    .venv/bin/python benchmarks/bench_chapters.py
"""

from __future__ import annotations

import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parent.parent
BUDGET_SECONDS, BUDGET_MB, BINDER_MB = 30.0, 700.0, 1000.0


def kernel_peak_mb(client: NotebookClient) -> float:
    pid = client.km.provisioner.process.pid
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024 * 1.048576  # kB → MB (10^6 bytes)
    return float("nan")


def run(path: Path) -> tuple[float, float]:
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    with client.setup_kernel():
        start = time.perf_counter()
        for index, cell in enumerate(notebook.cells):
            client.execute_cell(cell, index)
        seconds = time.perf_counter() - start
        peak = kernel_peak_mb(client)
    return seconds, peak


def main() -> None:
    print(f"{'chapter':<16} {'seconds':>8} {'of 30 s':>8} {'peak MB':>8} {'of 700 MB':>10} "
          f"{'of Binder 1 GB':>15}")
    for path in sorted((REPO / "solutions").glob("*/*.ipynb")):
        seconds, peak = run(path)
        print(f"{path.parent.name:<16} {seconds:8.1f} {seconds / BUDGET_SECONDS:8.0%} "
              f"{peak:8.0f} {peak / BUDGET_MB:10.0%} {peak / BINDER_MB:15.0%}")


if __name__ == "__main__":
    main()
