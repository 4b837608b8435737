"""Each chapter's budget: wall time to execute it top to bottom and the kernel's peak memory.

Budget (COURSE.md): well under 30 s and well under 700 MB on a 2-core machine, so that every
chapter also runs within the 1 GB that Binder guarantees (2 GB at most). Runs every instructor
notebook in a fresh kernel with nbclient and reads the kernel process's high-water mark (VmHWM,
Linux) before shutting it down, and the largest peak of the processes the kernel started and
waited for (``RUSAGE_CHILDREN``: chapter 05's roofline child). Kernel + child is an upper bound
of the two together: the child runs while the kernel is still small, but Binder counts both.
A thread also samples, every 50 ms, what the kernel and every process below it hold at once
(``/proc/PID/smaps_rollup``): the kernel's resident set plus each other process's private pages.
Forked loader workers share most of the kernel's pages (and every process shares its
libraries'), so adding their resident sets counts those pages again for each; counting a
worker's private pages only counts each page once (the shared ones are the kernel's, or
libraries the kernel maps too). Its peak, "at once", is what the budgets are read against.

Where this runs as root on a machine with control groups, the kernel also starts inside a control
group of its own (its first process joins it, then becomes the kernel; its workers are born
inside), and the group's high-water mark is printed, "group MB": what Binder's container limit
counts (each resident page once, page cache and tmpfs files too), kept by Linux, not sampled.

    .venv/bin/python benchmarks/bench_chapters.py [chapter ...]   (e.g. 05_bottlenecks; default all)
    .venv/bin/python benchmarks/bench_chapters.py --quick         (01_parameters only: CI's check)
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import nbformat
from jupyter_client import AsyncKernelManager
from nbclient import NotebookClient
from traitlets.config import Config

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from autograder.kernel import resources  # noqa: E402  (the checkout's, not an installed copy)

BUDGET_SECONDS, BUDGET_MB, BINDER_MB = 30.0, 700.0, 1000.0
QUICK_CHAPTER = "01_parameters"

#: CurveZMQ keys for the kernel, as the book's build uses (book/_ext/kernel_encryption.py):
#: without them ipykernel 7 warns on every start that it runs over TCP without encryption.
ENCRYPTED = Config({"KernelManager": {"transport_encryption": "auto"}})


def kernel_peak_mb(client: NotebookClient) -> float:
    pid = client.km.provisioner.process.pid
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024 * 1.048576  # kB → MB (10^6 bytes)
    return float("nan")


def children_peak_mb(client: NotebookClient, index: int) -> float:
    """The largest peak RSS of the processes the kernel waited for, asked of the kernel in one
    extra cell appended to the notebook (``index``)."""
    probe = nbformat.v4.new_code_cell("import resource as _r\n"
                                      "print(_r.getrusage(_r.RUSAGE_CHILDREN).ru_maxrss)")
    client.nb.cells.append(probe)
    client.execute_cell(probe, index)
    return int(probe.outputs[0]["text"]) / 1024 * 1.048576  # kB → MB (10^6 bytes)


def tree_pids(root: int) -> list[int]:
    """``root`` and every process below it, from /proc's children lists."""
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                todo += [int(child) for child in (task / "children").read_text().split()]
            except OSError:
                continue
    return found


def resident_mb(pid: int, shared: bool) -> float:
    """A process's private resident pages, and its shared ones too when ``shared``, in MB."""
    fields = ("Private_Clean:", "Private_Dirty:") + (("Shared_Clean:", "Shared_Dirty:")
                                                     if shared else ())
    try:
        lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
    except OSError:
        return 0.0
    kb = sum(int(line.split()[1]) for line in lines if line.startswith(fields))
    return kb / 1024 * 1.048576  # kB → MB (10^6 bytes)


class TreeSampler(threading.Thread):
    """The peak, over samples every ``gap`` seconds, of what ``root``'s tree holds at once: its
    resident set, and the private pages of every process below it."""

    def __init__(self, root: int, gap: float = 0.05):
        super().__init__(daemon=True)
        self.root, self.gap, self.peak = root, gap, 0.0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            held = sum(resident_mb(pid, shared=pid == self.root) for pid in tree_pids(self.root))
            self.peak = max(self.peak, held)
            self.stop.wait(self.gap)


#: Run by the kernel's first process: join the groups named on the command line, then become the
#: kernel (exec), so that every page the kernel and its workers touch is charged to the group.
JOIN_THEN_EXEC = ("import os, sys\n"
                  "split = sys.argv.index('--')\n"
                  "for procs in sys.argv[1:split]:\n"
                  "    open(procs, 'w').write(str(os.getpid()))\n"
                  "os.execvp(sys.argv[split + 1], sys.argv[split + 1:])\n")


def kernel_manager_in(group: resources.KernelGroup | None) -> type[AsyncKernelManager]:
    """A kernel manager whose kernels start inside ``group`` (a plain one without a group)."""
    if group is None:
        return AsyncKernelManager
    files = [str(procs) for procs in group.procs_files]

    class GroupedKernelManager(AsyncKernelManager):
        def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
            kernel = super().format_kernel_cmd(extra_arguments)
            return [sys.executable, "-c", JOIN_THEN_EXEC, *files, "--", *kernel]

    return GroupedKernelManager


def run(path: Path) -> tuple[float, float, float, float, float]:
    notebook = nbformat.read(path, as_version=4)
    group = resources.create(memory_mb=0, processes=0)
    client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}},
                            config=ENCRYPTED, kernel_manager_class=kernel_manager_in(group))
    with client.setup_kernel():
        sampler = TreeSampler(client.km.provisioner.process.pid)
        sampler.start()
        start = time.perf_counter()
        for index, cell in enumerate(notebook.cells):
            client.execute_cell(cell, index)
        seconds = time.perf_counter() - start
        sampler.stop.set()
        sampler.join()
        peak = kernel_peak_mb(client)
        children = children_peak_mb(client, len(notebook.cells))
        grouped = group.memory_peak_bytes() / 1e6 if group else float("nan")
    if group:
        group.remove()
    return seconds, peak, children, sampler.peak, grouped


def main() -> None:
    chosen = {a for a in sys.argv[1:] if not a.startswith("--")}
    if "--quick" in sys.argv and not chosen:
        chosen = {QUICK_CHAPTER}
    print(f"{'chapter':<16} {'seconds':>8} {'of 30 s':>8} {'peak MB':>8} {'child MB':>9} "
          f"{'together':>9} {'at once':>8} {'of 700 MB':>10} {'of Binder 1 GB':>15} "
          f"{'group MB':>9}")
    for path in sorted((REPO / "solutions").glob("*/*.ipynb")):
        if chosen and path.parent.name not in chosen:
            continue
        seconds, peak, children, at_once, grouped = run(path)
        both = peak + children
        print(f"{path.parent.name:<16} {seconds:8.1f} {seconds / BUDGET_SECONDS:8.0%} "
              f"{peak:8.0f} {children:9.0f} {both:9.0f} {at_once:8.0f} "
              f"{at_once / BUDGET_MB:10.0%} {at_once / BINDER_MB:15.0%} {grouped:9.0f}")


if __name__ == "__main__":
    main()
