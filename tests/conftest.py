"""Fixtures shared by test modules (the course site, built once per test session), and the
test tiers (tiers.py): the fast tier's guard, and the ``kernel`` marker on solutions/' nbval
items, each of which runs a notebook's cell in a real kernel."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest
from chapters import REPO, build_book
from tiers import (  # noqa: F401 (hooks: pytest finds them in this module's names)
    pytest_configure,
    pytest_runtest_makereport,
    pytest_unconfigure,
)


def pytest_collection_modifyitems(items) -> None:
    """Every cell nbval collects from a notebook runs in a kernel."""
    from nbval.plugin import IPyNbCell

    for item in items:
        if isinstance(item, IPyNbCell):
            item.add_marker(pytest.mark.kernel)


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """The real book build of the repository (tests/test_book.py, tests/test_browser.py).

    ``TINYPROF_SITE=_build/html`` reuses a site built with ``make book`` instead (quicker when
    working on the browser tests)."""
    if os.environ.get("TINYPROF_SITE"):
        built = Path(os.environ["TINYPROF_SITE"]).resolve()
        assert (built / "index.html").exists(), f"TINYPROF_SITE={built} holds no built site"
        return built
    # With pytest-xdist every worker process asks for the site: the first builds it under a
    # lock in the run's shared temporary folder, the others wait and take the same build.
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "book-site"
    shared.mkdir(parents=True, exist_ok=True)
    with open(shared / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        html = shared / "_build" / "html"
        failed = shared / "failed.txt"
        if failed.exists():
            pytest.fail(failed.read_text(encoding="utf-8"))
        if not (html / "index.html").exists():
            result = build_book(REPO, shared)
            if result.returncode != 0 or "build succeeded" not in result.stdout:
                failed.write_text(result.stdout[-3000:] + result.stderr[-3000:],
                                  encoding="utf-8")
                pytest.fail(failed.read_text(encoding="utf-8"))
    return html
