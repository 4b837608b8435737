"""The fast tier's guard: while ``make test-fast`` runs, no process starts a Jupyter kernel,
bubblewrap, Chromium or a book build.

Threat: ``make test-fast`` runs the tests that carry none of the markers ``kernel``,
``sandbox``, ``cohort``, ``book`` and ``browser`` (pyproject.toml). The markers are put on by
hand, so they drift: a test that starts a kernel without its marker still runs in the fast
tier, which then takes minutes and no longer says what it is. Such a start may also sit two
processes down (``python -m autograder grade`` starts its kernels in its own process, a
benchmark's quick run in its own).

Defence: every one of those starts is a new process (jupyter_client's launcher for a kernel,
which nbclient and the grader's ``SandboxedKernelManager`` go through; selenium's
chromedriver; ``jupyter-book``; the grader's ``bwrap``), so the guard sits at that one door:
``subprocess.Popen`` refuses such a command, in the test process and, through
``sitecustomize.py`` beside this file, in every Python process started under it. A refusal
raises :class:`NeedsMarker` and also leaves a note in the folder named by
``TINYPROF_TIER_TRIPWIRE``, so that a refusal caught and swallowed by the code under test, or
made in a child whose exit status nobody reads, still fails the test (tests/tiers.py reads the
notes after each phase of a test).

Only ``os`` and ``sys`` are imported here, and ``subprocess`` is patched when something else
imports it: a child's ``sys.modules`` stays what the test in it looks at (tests/test_import.py
checks that ``import tinyprof`` loads no ``subprocess``).
"""

from __future__ import annotations

import os
import sys

#: Set to "fast" by ``make test-fast``: the guard is on.
TIER_VARIABLE = "TINYPROF_TEST_TIER"
#: The folder where each refusal leaves a note (made per test process by tests/tiers.py).
TRIPWIRE_VARIABLE = "TINYPROF_TIER_TRIPWIRE"

#: What each marker's process looks like, and what it is called in the refusal.
WHAT = {"kernel": "a Jupyter kernel", "sandbox": "bubblewrap", "browser": "Chromium",
        "book": "a book build"}


class NeedsMarker(RuntimeError):
    """A process refused in the fast tier: the test that asked for it needs a marker."""


def fast_tier_on() -> bool:
    return os.environ.get(TIER_VARIABLE) == "fast"


def markers_needed(command) -> list[str]:
    """The markers a test needs to start ``command`` (an argv list, or a shell string):
    ``kernel`` for ipykernel, ``sandbox`` for bwrap, ``browser`` for chromium or chromedriver,
    ``book`` for jupyter-book. [] for anything else."""
    names = [os.path.basename(word) for word in _words(command)]
    needed = []
    if any(name in ("ipykernel", "ipykernel_launcher", "ipykernel_launcher.py")
           for name in names):
        needed.append("kernel")
    if "bwrap" in names:
        needed.append("sandbox")
    if any(name.startswith(("chromium", "chromedriver", "chrome", "google-chrome"))
           for name in names):
        needed.append("browser")
    if "jupyter-book" in names or "jupyter_book" in names or _jupyter_book(names):
        needed.append("book")
    return needed


def _words(command) -> list[str]:
    """A command's words, each argument split at blanks and its quotes dropped (a shell
    string, or ``["sh", "-c", "bwrap ..."]``, names its programs inside an argument)."""
    if isinstance(command, (str, bytes, os.PathLike)):
        command = [command]
    return [word.strip("'\"") for argument in command for word in os.fsdecode(argument).split()]


def _jupyter_book(names: list[str]) -> bool:
    """``jupyter book build ...``: jupyter's own dispatch to jupyter-book."""
    return any(first == "jupyter" and second == "book" for first, second in zip(names, names[1:]))


def refusal(command, needed: list[str]) -> str:
    """The message of a refused start: which markers, what was started, and what to do."""
    markers = " and ".join(f"`{name}`" for name in needed)
    started = ", ".join(WHAT[name] for name in needed)
    shown = " ".join(_words(command))
    return (f"this test needs the {markers} marker{'s' if len(needed) > 1 else ''}: it started "
            f"{started} (process {os.getpid()} ran: {shown[:300]}) while the fast tier "
            f"({TIER_VARIABLE}=fast, make test-fast) runs only tests that start no kernel, "
            f"sandbox, browser or book build. Mark the test or its module (pytestmark = "
            f"pytest.mark.{needed[0]}) so that make test-fast leaves it to make test.")


def leave_note(message: str) -> None:
    """Write ``message`` into the tripwire folder, if there is one (a refusal the code under
    test swallows still reaches the test report)."""
    folder = os.environ.get(TRIPWIRE_VARIABLE)
    if not folder:
        return
    path = os.path.join(folder, f"{os.getpid()}-{os.urandom(6).hex()}.txt")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError:   # the folder went with its test session: the raise still tells
        return
    with os.fdopen(fd, "w", encoding="utf-8") as note:
        note.write(message)


def guard_popen(subprocess_module) -> None:
    """Make ``subprocess_module.Popen`` refuse, while the fast tier is on, what a fast test
    must not start. Guarding twice changes nothing."""
    popen = subprocess_module.Popen
    if getattr(popen.__init__, "tier_guard", False):
        return
    unguarded = popen.__init__

    def __init__(self, args, *more, **options):
        if fast_tier_on():
            needed = markers_needed(args)
            if needed:
                message = refusal(args, needed)
                leave_note(message)
                # what __del__ and repr() read of a Popen that started nothing
                self.args, self._child_created, self.returncode = args, False, None
                raise NeedsMarker(message)
        unguarded(self, args, *more, **options)

    __init__.tier_guard = True
    __init__.__wrapped__ = unguarded
    popen.__init__ = __init__


class _GuardOnImport:
    """A finder placed first in ``sys.meta_path``: when ``subprocess`` is first imported, the
    module the other finders find is loaded as usual and then guarded."""

    def find_spec(self, name, path=None, target=None):
        if name != "subprocess":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                spec.loader = _GuardingLoader(spec.loader)
                return spec
        return None


class _GuardingLoader:
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        guard_popen(module)


def install() -> None:
    """Guard ``subprocess.Popen`` now if it is loaded, else as soon as it is imported."""
    if "subprocess" in sys.modules:
        guard_popen(sys.modules["subprocess"])
    elif not any(type(finder).__name__ == "_GuardOnImport" for finder in sys.meta_path):
        sys.meta_path.insert(0, _GuardOnImport())
