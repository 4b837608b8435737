"""Work every kernel would repeat, done once per grading run and shared read-only.

A sandboxed kernel starts with an empty private ``/tmp`` (its HOME), so matplotlib, finding no
font cache in its cache folder (``~/.cache/matplotlib``), scans every font of the system (about
3 s of CPU in every kernel, more than the whole set-up cell of a chapter takes otherwise). The
grader builds the cache once, in a child process with the same environment as a kernel, into
``DIR/work/cache/matplotlib``; each sandbox gets the cache file bound read-only into its own
writable cache folder, where matplotlib looks by default (no ``MPLCONFIGDIR`` variable tells
the kernel it is graded).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

#: matplotlib's cache folder inside the sandbox: its default, ``$XDG_CACHE_HOME`` unset and
#: HOME=/tmp (isolation.py).
SANDBOX_MPLCONFIGDIR = "/tmp/.cache/matplotlib"


def matplotlib_cache(folder: Path) -> list[Path]:
    """Build matplotlib's font cache in ``folder`` (unless it is there already) and return its
    files (``fontlist-v*.json``); an empty list where matplotlib is not installed."""
    folder.mkdir(parents=True, exist_ok=True)
    found = sorted(folder.glob("fontlist-v*.json"))
    if found:
        return found
    env = dict(os.environ, MPLCONFIGDIR=str(folder))
    subprocess.run([sys.executable, "-c", "import matplotlib.font_manager"], env=env,
                   capture_output=True, timeout=300, check=False)
    return sorted(folder.glob("fontlist-v*.json"))


__all__ = ["SANDBOX_MPLCONFIGDIR", "matplotlib_cache"]
