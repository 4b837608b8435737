"""The real Jupyter Book build: every chapter page executed, launch buttons, no solutions leaked."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from chapters import REPO, SOLUTIONS, build_book, solution_notebooks

from autograder.release.home import read_home
from autograder.release.notebooks import BOOK_FOLD_TAG, is_test_cell, solution_lines

TEXT_SUFFIXES = {".html", ".txt", ".ipynb", ".md", ".js", ".json", ".py"}


def _chapters_in_toc() -> list[str]:
    toc = yaml.safe_load((REPO / "_toc.yml").read_text())
    files = [c["file"] for part in toc["parts"] for c in part["chapters"]]
    return [f for f in files if f.startswith("notebooks/")]


def test_every_chapter_is_in_the_toc():
    in_toc = {f.split("/")[1] for f in _chapters_in_toc()}
    assert in_toc == {p.parent.name for p in solution_notebooks()}


@pytest.mark.parametrize("page", _chapters_in_toc())
@pytest.mark.kernel
@pytest.mark.book
def test_chapter_page_has_launch_buttons_figures_and_no_traceback(site, page):
    html = (site / f"{page}.html").read_text(encoding="utf-8")
    home = read_home(REPO)
    binder, colab = home.binder(f"{page}.ipynb"), home.colab(f"{page}.ipynb")
    assert binder in html, "Binder (JupyterLab) launch link missing"
    assert colab in html, "Colab launch link missing"
    assert "Traceback" not in html and "NotImplementedError</span>:" not in html
    assert "<img" in html, "the chapter's figures did not render"
    assert "application/vnd.jupyter.widget-state+json" in html, "widget state was not saved"


@pytest.mark.parametrize("page", _chapters_in_toc())
@pytest.mark.kernel
@pytest.mark.book
def test_the_book_folds_exactly_the_test_cells(site, page):
    """The release tags every autograded test cell (and nothing else) hide-input, so the page
    folds each one behind a "Show the tests" toggle; the notebook shows them as always."""
    cells = json.loads((REPO / f"{page}.ipynb").read_text(encoding="utf-8"))["cells"]
    tests = [cell for cell in cells if is_test_cell(cell)]
    tagged = [cell for cell in cells if BOOK_FOLD_TAG in cell["metadata"].get("tags", [])]
    assert tests and tagged == tests, "run `python -m autograder release`"
    text = (site / f"{page}.html").read_text(encoding="utf-8")
    folds = re.findall(r'<details class="admonition hide above-input">\s*<summary>\s*'
                       r'<p class="collapsed admonition-title">Show the tests</p>', text)
    assert len(folds) == len(tests)


def _visible_lines(path: Path, text: str) -> set[str]:
    """The lines a reader of ``path`` sees: cell sources of a notebook, the text of a page."""
    if path.suffix == ".ipynb":
        cells = json.loads(text)["cells"]
        text = "\n".join("".join(cell["source"]) for cell in cells)
    elif path.suffix == ".html":
        text = html.unescape(re.sub(r"<[^>]+>", "", text))
    return {line.strip() for line in text.splitlines()}


@pytest.mark.kernel
@pytest.mark.book
def test_no_solution_or_hidden_test_reaches_the_site(site):
    secrets = set().union(*(solution_lines(p) for p in solution_notebooks()))
    assert secrets, "no solution lines found to look for"
    for path in site.rglob("*"):
        if path.is_file() and path.suffix in TEXT_SUFFIXES:
            text = path.read_text(encoding="utf-8", errors="replace")
            for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
                assert marker not in text, f"{path.relative_to(site)} contains {marker!r}"
            leaked = secrets & _visible_lines(path, text)
            assert not leaked, f"{path.relative_to(site)} shows solution code: {leaked.pop()!r}"
    assert not (site / "solutions").exists()
    assert not any(site.rglob("*.db"))


@pytest.mark.kernel
@pytest.mark.book
def test_the_build_fails_when_a_notebook_fails(tmp_path):
    book = tmp_path / "broken"
    book.mkdir()
    shutil.copy(REPO / "_config.yml", book / "_config.yml")
    for folder in ("_ext", "_static"):            # what the configuration refers to
        shutil.copytree(REPO / "book" / folder, book / "book" / folder)
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: bad\n")
    (book / "intro.md").write_text("# Intro\n")
    cells = [{"cell_type": "markdown", "metadata": {}, "source": "# Bad"},
             {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
              "source": "1 / 0"}]
    notebook = {"cells": cells, "nbformat": 4, "nbformat_minor": 5,
                "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                            "language": "python"}}}
    (book / "bad.ipynb").write_text(json.dumps(notebook))
    result = build_book(book, tmp_path / "out")
    assert result.returncode != 0, "a failing notebook must fail the build"
    assert "ZeroDivisionError" in result.stdout + result.stderr


def test_solutions_folder_is_not_in_the_book_sources():
    assert SOLUTIONS.exists()
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    assert config["only_build_toc_files"] is True
    assert config["execute"]["raise_on_error"] is True
    assert "launch_buttons" in config and "html" in config  # top level, not under html


@pytest.mark.kernel
@pytest.mark.book
def test_the_api_reference_has_a_page_per_public_module(site):
    import pkgutil

    import tinyprof

    modules: dict[str, list[str]] = {}
    for info in pkgutil.walk_packages(tinyprof.__path__, "tinyprof."):
        modules.setdefault(info.name.split(".")[1], []).append(info.name)
    for top, names in modules.items():
        page = site / "book" / "api" / f"tinyprof.{top}.html"
        assert page.exists(), f"no API page for tinyprof.{top}"
        text = page.read_text(encoding="utf-8")
        for name in names:
            assert f'id="module-{name}"' in text, f"{page.name} does not document {name}"
    flops = (site / "book" / "api" / "tinyprof.flops.html").read_text(encoding="utf-8")
    assert 'id="tinyprof.flops.counter.count_flops"' in flops
    assert "2 per multiply-accumulate" in flops          # the docstrings' formulas are there
