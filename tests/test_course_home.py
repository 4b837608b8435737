"""One setting for the course's home: change the repository in _config.yml, release, and every
launch link and install line follows (issue 14); while the home is the repository with the
solutions or a placeholder, make book, release and publish say so (issue 26)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.release.home import CourseHome, count_links, home_warning, point_at, read_home

REPO = Path(__file__).resolve().parent.parent
OLD, NEW = "tinyprof/tinyprof", "someuni/prof-course"


def _copy_course(copy: Path) -> Path:
    """The files git tracks in this checkout, copied to ``copy`` (no .git: no remotes)."""
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    for name in files:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, copy / name)
    return copy


@pytest.fixture(scope="module")
def forked(tmp_path_factory) -> Path:
    """A copy of the course whose _config.yml names another home, released once (the release's
    stderr is kept beside it in release.stderr)."""
    copy = _copy_course(tmp_path_factory.mktemp("fork") / "course")
    config = copy / "_config.yml"
    text = config.read_text().replace(f"https://github.com/{OLD}", f"https://github.com/{NEW}")
    config.write_text(text.replace("branch: main", "branch: spring-2027"))
    run = subprocess.run([sys.executable, "-m", "autograder", "release"], cwd=copy,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    (copy.parent / "release.stderr").write_text(run.stderr)
    return copy


@pytest.mark.slow
def test_the_home_is_read_from_the_book_configuration(forked):
    assert read_home(forked) == CourseHome("someuni", "prof-course", "spring-2027")
    assert read_home(REPO).url.startswith("https://github.com/")


@pytest.mark.slow
def test_nothing_points_at_the_old_home_after_a_release(forked):
    stale = [str(path.relative_to(forked)) for pattern in ("README.md", "book/**/*",
                                                          "solutions/**/*", "notebooks/**/*")
             for path in forked.glob(pattern)
             if path.is_file() and OLD in path.read_text(encoding="utf-8", errors="ignore")]
    assert stale == []


@pytest.mark.parametrize("chapter", sorted(p.parent.name for p in REPO.glob("notebooks/*/*.ipynb")))
@pytest.mark.slow
def test_each_chapter_launches_and_installs_from_the_new_home(forked, chapter):
    (path,) = (forked / "notebooks" / chapter).glob("*.ipynb")
    relative = f"notebooks/{chapter}/{path.name}"
    cells = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]]
    launch, setup = cells[0], cells[1]
    assert (f"https://mybinder.org/v2/gh/{NEW}/spring-2027?urlpath=lab/tree/{relative}"
            in launch)
    assert f"https://colab.research.google.com/github/{NEW}/blob/spring-2027/{relative}" in launch
    assert f'"tinyprof @ git+https://github.com/{NEW}@spring-2027"' in setup


@pytest.mark.slow
def test_readme_and_how_to_run_follow_too(forked):
    how_to_run = (forked / "book" / "how_to_run.md").read_text()
    assert f"git clone https://github.com/{NEW}.git\ncd prof-course" in how_to_run
    assert f"pip install git+https://github.com/{NEW}.git" in how_to_run
    readme = (forked / "README.md").read_text()
    assert f"https://mybinder.org/v2/gh/{NEW}/spring-2027?urlpath=lab/tree/notebooks/" in readme


def test_links_to_other_projects_are_left_alone():
    home = CourseHome("someuni", "prof-course", "main")
    text = ("see https://github.com/containers/bubblewrap and "
            "[Binder](https://mybinder.org/v2/gh/a/b/main?urlpath=lab/tree/notebooks/x/x.ipynb)")
    pointed = point_at(text, home)
    assert "https://github.com/containers/bubblewrap" in pointed
    assert re.search(r"v2/gh/someuni/prof-course/main\?urlpath=lab/tree/notebooks/x/x.ipynb",
                     pointed)


def test_a_home_that_is_not_a_github_repository_is_refused(tmp_path):
    (tmp_path / "_config.yml").write_text("repository:\n  url: https://example.org/x\n")
    with pytest.raises(ValueError, match=r"_config.yml: repository.url must be"):
        read_home(tmp_path)


# -- the home warning (issue 26) -----------------------------------------------------------------

def _course_at(root: Path, url: str, *, solutions: bool = True, remote: str | None = None) -> Path:
    """A minimal course folder: _config.yml naming ``url``, maybe solutions/ and a git remote."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "_config.yml").write_text(f"repository:\n  url: {url}\n  branch: main\n")
    if solutions:
        (root / "solutions" / "01_parameters").mkdir(parents=True)
    if remote:
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        subprocess.run(["git", "-C", str(root), "remote", "add", "origin", remote], check=True)
    return root


def test_the_shipped_home_is_named_as_the_repository_with_solutions_and_its_links_counted():
    notebooks = sorted(REPO.glob("notebooks/*/*.ipynb"))
    student_facing = [*notebooks, REPO / "README.md", *REPO.glob("book/*.md")]
    texts = [p.read_text(encoding="utf-8") for p in student_facing]
    launch = sum(t.count("https://mybinder.org/v2/gh/tinyprof/tinyprof/main?urlpath=lab/tree/")
                 + t.count("https://colab.research.google.com/github/tinyprof/tinyprof/blob/main/")
                 for t in texts)
    clone = sum(t.count("git clone https://github.com/tinyprof/tinyprof.git")
                + t.count("git+https://github.com/tinyprof/tinyprof.git") for t in texts)
    assert launch >= 2 * len(notebooks) and clone >= 1
    counts = count_links(REPO, read_home(REPO))
    assert counts == {"Binder and Colab links": launch, "Colab install cells": len(notebooks),
                      "clone or install lines": clone}
    warning = home_warning(REPO)
    assert warning is not None, "out of the box the home is tinyprof/tinyprof: it must warn"
    assert "github.com/tinyprof/tinyprof" in warning and "holds solutions/" in warning
    assert f"{launch} Binder and Colab links, {len(notebooks)} Colab install cells" in warning
    assert "repository.url in _config.yml" in warning and "autograder publish" in warning


@pytest.mark.parametrize("url", ["https://github.com/your-university/profiling-course",
                                 "https://github.com/OWNER/NAME",
                                 "https://github.com/someuni/your-course"])
def test_a_placeholder_home_is_named_as_one(tmp_path, url):
    warning = home_warning(_course_at(tmp_path / "course", url))
    assert warning is not None and "a placeholder" in warning
    assert url.removeprefix("https://") in warning


@pytest.mark.parametrize("remote", ["git@github.com:SomeUni/prof-course.git",
                                    "https://github.com/someuni/prof-course"])
def test_a_home_that_is_this_checkouts_own_repository_is_named(tmp_path, remote):
    """A fork that points the home at itself sends students to its own solutions/."""
    root = _course_at(tmp_path / "course", f"https://github.com/{NEW}", remote=remote)
    warning = home_warning(root)
    assert warning is not None and "git remote origin" in warning and "solutions/" in warning


def test_the_student_repository_as_home_draws_no_warning(tmp_path):
    fork = _course_at(tmp_path / "fork", f"https://github.com/{NEW}-students",
                      remote=f"git@github.com:{NEW}.git")
    assert home_warning(fork) is None
    # the published student repository points at itself, and holds no solutions
    students = _course_at(tmp_path / "students", f"https://github.com/{NEW}", solutions=False,
                          remote=f"https://github.com/{NEW}.git")
    assert home_warning(students) is None
    # tinyprof/tinyprof without solutions/ is a student repository too
    assert home_warning(_course_at(tmp_path / "upstream", f"https://github.com/{OLD}",
                                   solutions=False)) is None


@pytest.mark.slow
def test_release_and_publish_warn_on_the_shipped_home_and_still_succeed(tmp_path):
    copy = _copy_course(tmp_path / "course")
    release = subprocess.run([sys.executable, "-m", "autograder", "release", "01_parameters"],
                             cwd=copy, capture_output=True, text=True, timeout=900)
    publish = subprocess.run([sys.executable, "-m", "autograder", "publish", str(tmp_path / "out")],
                             cwd=copy, capture_output=True, text=True, timeout=900)
    for run in (release, publish):
        assert run.returncode == 0, run.stderr[-3000:]
        said = " ".join(run.stderr.split())
        assert said.startswith("WARNING: the course's home is github.com/tinyprof/tinyprof")
        assert "which holds solutions/" in said
    assert "released notebooks/01_parameters/parameters.ipynb" in release.stdout
    assert (tmp_path / "out" / "README.md").exists()


@pytest.mark.slow
def test_a_release_for_the_forks_own_student_home_is_quiet(forked):
    assert "WARNING" not in (forked.parent / "release.stderr").read_text()


def test_make_book_ends_with_the_home_check_which_warns_without_failing():
    # Under `make test` this is a nested make, which would announce the directory it enters.
    dry = subprocess.run(["make", "--no-print-directory", "-n", "book"], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    commands = dry.stdout.strip().splitlines()
    assert "jupyter-book build ." in commands[-2] and commands[-1].endswith("-m autograder home")
    home = subprocess.run([sys.executable, "-m", "autograder", "home"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert home.returncode == 0, "a wrong home must not fail make book (CI builds the book)"
    assert home.stdout.startswith(f"course home: {read_home(REPO).url}")
    assert " ".join(home.stderr.split()) == f"WARNING: {home_warning(REPO)}"
