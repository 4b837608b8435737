"""`python -m autograder publish OUT`: the student repository, and its leak check (issue 14); the
student side as published: its pages, README, pyproject.toml, .gitignore and lean environment
(issue 26)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile

import pytest
import yaml
from chapters import REPO

from autograder.release.home import read_home
from autograder.release.publish import (
    CHAPTER_OUTPUTS,
    INSTRUCTOR_PACKAGES,
    TORCH_CPU_INDEX,
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
    shipped = sorted(p.relative_to(REPO) for p in (REPO / "tinyprof").rglob("*")
                     if p.is_file() and "__pycache__" not in p.parts)
    assert sorted(p.relative_to(published) for p in (published / "tinyprof").rglob("*")
                  if p.is_file()) == shipped, "tinyprof/ must be published whole (with its data)"
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
    for needed in ("numpy", "matplotlib", "ipywidgets", "ipykernel", "jupyterlab"):
        assert needed in requirements
    # the digits ship inside tinyprof: scikit-learn and its scipy are not needed
    assert "scikit-learn" not in requirements and "scipy" not in requirements
    # chapter 07's torch: the course's exact pin, from the CPU build's index (Binder has no GPU)
    lines = requirements.splitlines()
    pinned = [line for line in (REPO / "requirements.txt").read_text().splitlines()
              if line.startswith("torch")]
    assert pinned == ["torch==2.13.0"] and pinned[0] in lines
    assert f"--extra-index-url {TORCH_CPU_INDEX}" in lines
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


def _fenced(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, re.S)


def test_how_to_run_and_the_student_readme_give_the_same_local_set_up(published):
    page = (published / "book" / "how_to_run.md").read_text()
    readme = (published / "README.md").read_text()
    local = page[page.index("## On your own machine"):page.index("## Working through")]
    assert local.strip() in readme, "the README's local set-up differs from How to run a chapter"
    (commands,) = _fenced(local)
    assert not (published / "Makefile").exists() and not re.search(r"^\s*make\b", commands, re.M)
    # every file and folder the commands name is in the student repository
    named = re.findall(r"(requirements\.txt|notebooks/[\w/.]*)", commands)
    assert "requirements.txt" in named and "notebooks/" in named
    assert all((published / name).exists() for name in named), named
    home = read_home(REPO)
    assert f"git clone {home.url}.git\ncd {home.name}\n" in commands


def test_the_published_pyproject_has_no_instructor_tooling_and_ships_the_digits(published):
    text = (published / "pyproject.toml").read_text()
    for word in ("solutions", "nbval", "[tool.pytest", "[tool.ruff", "testpaths", "addopts"):
        assert word not in text, f"the student pyproject.toml mentions {word}"
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from 3.11")
    config = tomllib.loads(text)
    original = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert config["project"] == original["project"]
    assert config["build-system"] == original["build-system"]
    assert config["tool"] == {"setuptools": original["tool"]["setuptools"]}
    assert "data/digits.npz" in config["tool"]["setuptools"]["package-data"]["tinyprof"]


@pytest.mark.slow
def test_pip_install_of_the_student_repository_includes_the_digits(published, tmp_path):
    """A real wheel built from the published folder holds the data and its licence."""
    source = tmp_path / "src"
    shutil.copytree(published, source)
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
                            "--wheel-dir", str(tmp_path / "wheels"), str(source)],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = (tmp_path / "wheels").glob("tinyprof-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "tinyprof/data/digits.npz" in names and "tinyprof/data/README.md" in names
    assert "BuildBackendWarning" not in build.stderr, build.stderr


def test_git_in_the_student_repository_ignores_builds_and_what_chapters_write(published,
                                                                                tmp_path):
    ignored = (REPO / ".gitignore").read_text().split()
    assert set(CHAPTER_OUTPUTS) <= set(ignored), "this repository's .gitignore must agree"
    repo = tmp_path / "students"
    shutil.copytree(published, repo)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    written = ["build/lib/tinyprof/__init__.py", "dist/tinyprof-0.1.0.tar.gz",
               ".venv/bin/python", "tinyprof.egg-info/PKG-INFO", "_build/html/index.html",
               "notebooks/05_bottlenecks/gpt_step_trace.json",
               "notebooks/06_benchmarking/baseline.json", "notebooks/06_benchmarking/current.json",
               "notebooks/06_benchmarking/benchmark_report.md",
               "notebooks/07_pytorch/gpt_torch_trace.json",
               "notebooks/09_pipeline/digits_png/3/0879.png",
               "notebooks/09_pipeline/pipeline_trace.json",
               "notebooks/09_pipeline/profiler_trace.json",
               "notebooks/01_parameters/.ipynb_checkpoints/parameters-checkpoint.ipynb"]
    for name in written:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("written by a student's machine")
    status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain",
                             "--untracked-files=all"], capture_output=True, text=True, check=True)
    shown = {line[3:] for line in status.stdout.splitlines()}
    assert not [name for name in written if name in shown]
    assert {"tinyprof/data/digits.npz", "notebooks/01_parameters/parameters.ipynb"} <= shown
