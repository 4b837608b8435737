"""One setting for the course's home: change the repository in _config.yml, release, and every
launch link and install line follows (issue 14)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.home import CourseHome, point_at, read_home

REPO = Path(__file__).resolve().parent.parent
OLD, NEW = "tinyprof/tinyprof", "someuni/prof-course"


@pytest.fixture(scope="module")
def forked(tmp_path_factory) -> Path:
    """A copy of the course whose _config.yml names another home, released once."""
    copy = tmp_path_factory.mktemp("fork") / "course"
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    for name in files:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, copy / name)
    config = copy / "_config.yml"
    text = config.read_text().replace(f"https://github.com/{OLD}", f"https://github.com/{NEW}")
    config.write_text(text.replace("branch: main", "branch: spring-2027"))
    run = subprocess.run([sys.executable, "-m", "autograder", "release"], cwd=copy,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    return copy


def test_the_home_is_read_from_the_book_configuration(forked):
    assert read_home(forked) == CourseHome("someuni", "prof-course", "spring-2027")
    assert read_home(REPO).url.startswith("https://github.com/")


def test_nothing_points_at_the_old_home_after_a_release(forked):
    stale = [str(path.relative_to(forked)) for pattern in ("README.md", "book/**/*",
                                                          "solutions/**/*", "notebooks/**/*")
             for path in forked.glob(pattern)
             if path.is_file() and OLD in path.read_text(encoding="utf-8", errors="ignore")]
    assert stale == []


@pytest.mark.parametrize("chapter", sorted(p.parent.name for p in REPO.glob("notebooks/*/*.ipynb")))
def test_each_chapter_launches_and_installs_from_the_new_home(forked, chapter):
    (path,) = (forked / "notebooks" / chapter).glob("*.ipynb")
    relative = f"notebooks/{chapter}/{path.name}"
    cells = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]]
    launch, setup = cells[0], cells[1]
    assert (f"https://mybinder.org/v2/gh/{NEW}/spring-2027?urlpath=lab/tree/{relative}"
            in launch)
    assert f"https://colab.research.google.com/github/{NEW}/blob/spring-2027/{relative}" in launch
    assert f'"tinyprof @ git+https://github.com/{NEW}@spring-2027"' in setup


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
