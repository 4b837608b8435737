"""Fixtures shared by test modules: the course site, built once per test session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from chapters import REPO, build_book


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """The real book build of the repository (tests/test_book.py, tests/test_browser.py).

    ``TINYPROF_SITE=_build/html`` reuses a site built with ``make book`` instead (quicker when
    working on the browser tests)."""
    if os.environ.get("TINYPROF_SITE"):
        built = Path(os.environ["TINYPROF_SITE"]).resolve()
        assert (built / "index.html").exists(), f"TINYPROF_SITE={built} holds no built site"
        return built
    output = tmp_path_factory.mktemp("book")
    result = build_book(REPO, output)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "build succeeded" in result.stdout
    return output / "_build" / "html"
