"""`python -m autograder publish OUT`: the student repository, and its leak check (issue 14)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from chapters import REPO

from autograder.publish import (
    INSTRUCTOR_PACKAGES,
    PublishLeakError,
    check_no_leaks,
    publish,
    secret_lines,
)


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    out = tmp_path_factory.mktemp("student") / "repo"
    publish(out, REPO, release_first=False)
    return out


def test_the_student_repository_holds_what_students_need_and_nothing_else(published):
    assert {p.name for p in published.iterdir()} == {
        ".gitignore", ".tinyprof-published", "README.md", "_config.yml", "_toc.yml", "book",
        "notebooks", "pyproject.toml", "requirements.txt", "runtime.txt", "tinyprof"}
    chapters = sorted(p.relative_to(published) for p in published.glob("notebooks/*/*.ipynb"))
    assert chapters == sorted(p.relative_to(REPO) for p in REPO.glob("notebooks/*/*.ipynb"))
    assert (published / "tinyprof" / "__init__.py").exists()
    assert not list(published.rglob("__pycache__")) and not list(published.rglob("*.db"))
    assert not (published / "book" / "instructors.md").exists()
    assert "instructors" not in (published / "_toc.yml").read_text()
    assert "instructors" not in (published / "book" / "intro.md").read_text()
    toc = yaml.safe_load((published / "_toc.yml").read_text())
    pages = [toc["root"]] + [c["file"] for part in toc["parts"] for c in part["chapters"]]
    missing = [page for page in pages if not list(published.glob(f"{page}.*"))]
    assert missing == [], "the published table of contents names pages that are not there"


def test_binder_gets_a_lean_environment(published):
    requirements = (published / "requirements.txt").read_text().lower()
    assert not [name for name in INSTRUCTOR_PACKAGES if name in requirements]
    for needed in ("numpy", "matplotlib", "ipywidgets", "scikit-learn", "jupyterlab"):
        assert needed in requirements
    assert (published / "runtime.txt").read_text().strip().startswith("python-3.")
    readme = (published / "README.md").read_text()
    chapters = list(REPO.glob("notebooks/*/*.ipynb"))
    assert readme.count("https://mybinder.org/v2/gh/") == len(chapters)


def test_the_published_notebooks_hold_no_solution(published):
    secrets, generic = secret_lines(REPO)
    assert len(secrets) > 300 and len(generic) < 0.05 * len(secrets)
    for notebook in published.glob("notebooks/*/*.ipynb"):
        text = "\n".join("".join(c["source"]) for c in json.loads(notebook.read_text())["cells"])
        assert not [s for s in secrets if s in text]


@pytest.mark.parametrize("where", ["_build/html/searchindex.js", "notebooks/extra.ipynb",
                                   "book/notes.md"])
def test_a_planted_solution_line_stops_the_publication(published, where):
    secret = sorted(secret_lines(REPO)[0])[0]
    planted = published / where
    planted.parent.mkdir(parents=True, exist_ok=True)
    if where.endswith(".js"):   # the search index of a built site is one long line
        planted.write_text('Search.setIndex({"docs":["' + secret.replace('"', '\\"') + '"]})')
    elif where.endswith(".ipynb"):
        cell = {"cell_type": "code", "metadata": {}, "outputs": [], "source": secret}
        planted.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4,
                                       "nbformat_minor": 5}))
    else:
        planted.write_text(f"Some notes.\n\n    ### BEGIN SOLUTION\n    {secret}\n")
    try:
        with pytest.raises(PublishLeakError, match=where.split("/")[-1]):
            check_no_leaks(published, REPO)
    finally:
        planted.unlink()
    check_no_leaks(published, REPO)


def test_publish_refuses_a_folder_it_did_not_write_and_keeps_git_on_republish(tmp_path):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("mine")
    with pytest.raises(FileExistsError, match="not empty"):
        publish(foreign, REPO, release_first=False)
    assert (foreign / "thesis.tex").read_text() == "mine"
    out = tmp_path / "student"
    publish(out, REPO, release_first=False)
    (out / ".git").mkdir()
    (out / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (out / "stale.txt").write_text("from an old publish")
    publish(out, REPO, release_first=False)
    assert (out / ".git" / "HEAD").exists() and not (out / "stale.txt").exists()


def test_the_command_line_publishes(tmp_path):
    run = subprocess.run([sys.executable, "-m", "autograder", "publish", "--help"], cwd=REPO,
                         capture_output=True, text=True)
    assert run.returncode == 0 and "OUT" in run.stdout.upper()
