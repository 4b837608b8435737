"""Stock nbgrader still grades every chapter (formgrader on JupyterHub, ``nbgrader autograde``):
its own Execute preprocessor runs the test cells in the kernel, the way a student runs the
visible tests. tinyprof's grader decides hidden tests outside the kernel (autograder/run/judge.py)
from the same test cells, so the cells must work both ways: the instructor's solution scores
full marks and the untouched release scores 0, through nbgrader's defaults alone."""

from __future__ import annotations

import json
import shutil

import pytest
from chapters import NOTEBOOKS, SOLUTIONS

from autograder import course
from autograder.dispatch.worker import scores
from autograder.results.gradebook import prepare

pytestmark = pytest.mark.kernel

CHAPTERS = course.assignments()


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    out = tmp_path_factory.mktemp("stock")
    prepare(out, CHAPTERS)
    for chapter in CHAPTERS:
        for student, source in (("sol", SOLUTIONS), ("blank", NOTEBOOKS)):
            folder = out / "submitted" / student / chapter
            folder.mkdir(parents=True)
            for notebook in (source / chapter).glob("*.ipynb"):
                shutil.copy(notebook, folder / notebook.name)
    config = course.load_config(root=str(out), source_directory=str(SOLUTIONS),
                                db_url=f"sqlite:///{out / 'gradebook.db'}")
    config.Execute.timeout = 300
    found = {}
    with course.preserve_cwd():
        nbgrader = course.api(config)   # nbgrader's default preprocessors: its own Execute
        for chapter in CHAPTERS:
            for student in ("sol", "blank"):
                result = nbgrader.autograde(chapter, student, force=True, create=True)
                assert result["success"], (chapter, student, (result.get("log") or "")[-2000:])
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{out / 'gradebook.db'}", course.COURSE_ID) as gradebook:
        for chapter in CHAPTERS:
            for student in ("sol", "blank"):
                found[chapter, student] = scores(gradebook, student, chapter)
    return out, found


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_stock_nbgrader_gives_the_solution_full_marks_and_the_blank_notebook_zero(graded,
                                                                                 chapter):
    out, found = graded
    solution, blank = found[chapter, "sol"], found[chapter, "blank"]
    assert solution["auto_score"] == solution["max_auto_score"] > 0, solution["questions"]
    assert blank["auto_score"] == 0, blank["questions"]
    autograded = next((out / "autograded" / "sol" / chapter).glob("*.ipynb"))
    cells = json.loads(autograded.read_text(encoding="utf-8"))["cells"]
    assert not any("tinyprof" in c.get("metadata", {}) for c in cells), \
        "stock nbgrader ran tinyprof's judge"
