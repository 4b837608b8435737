"""Every chapter: the instructor notebook passes its own tests under nbgrader, the generated
student notebook fails them, matches a fresh release byte for byte, and leaks nothing.

(That the instructor notebooks execute top to bottom is checked by nbval: pytest collects
solutions/ with --nbval-lax, see pyproject.toml.)
"""

from __future__ import annotations

import json
import shutil

import pytest
from chapters import chapter_id, solution_notebooks, student_notebook

from autograder import course
from autograder.release.notebooks import LeakError, check_no_leaks, release

CHAPTERS = solution_notebooks()


@pytest.fixture(scope="module", autouse=True)
def nbgrader_tools_on_path():
    course.ensure_tools_on_path()


def test_there_are_chapters():
    assert [chapter_id(p) for p in CHAPTERS][:1] == ["01_parameters"]


@pytest.mark.parametrize("solution", CHAPTERS, ids=chapter_id)
@pytest.mark.kernel
def test_solution_passes_nbgrader_validation(solution):
    from nbgrader.validator import Validator

    result = Validator().validate(str(solution))
    assert result == {}, f"{solution.name}: nbgrader validation failed: {json.dumps(result)[:2000]}"


@pytest.mark.parametrize("solution", CHAPTERS, ids=chapter_id)
@pytest.mark.kernel
def test_student_version_fails_its_tests(solution):
    from nbgrader.validator import Validator

    result = Validator(invert=True).validate(str(student_notebook(solution)))
    assert result == {}, (f"{solution.name}: these test cells pass without any student code: "
                          f"{json.dumps(result)[:2000]}")


@pytest.mark.parametrize("solution", CHAPTERS, ids=chapter_id)
def test_solution_has_graded_parts_of_every_kind(solution):
    cells = json.loads(solution.read_text())["cells"]
    meta = [c["metadata"].get("nbgrader", {}) for c in cells]
    tests = [c for c, m in zip(cells, meta) if m.get("grade") and not m.get("solution")]
    exercises = [m for m in meta if m.get("solution") and not m.get("grade")]
    reflections = [c for c, m in zip(cells, meta)
                   if m.get("grade") and m.get("solution") and c["cell_type"] == "markdown"]
    assert len(exercises) >= 3 and len(tests) >= 3 and reflections
    for cell in tests:
        source = "".join(cell["source"])
        assert "BEGIN HIDDEN TESTS" in source, f"{cell['id']} has no hidden tests"
        assert "hints=" in source or "otherwise=" in source, f"{cell['id']} names no mistakes"
    assert not any(c.get("outputs") for c in cells if c["cell_type"] == "code"), \
        "commit instructor notebooks with their outputs cleared"


@pytest.mark.slow
def test_release_reproduces_notebooks_byte_for_byte(tmp_path):
    written = release(release_dir=tmp_path)
    assert written, "release produced no notebooks"
    for path in written:
        committed = student_notebook(course.SOLUTIONS / path.parent.name / path.name)
        assert committed.exists(), f"{committed} is missing: run `python -m autograder release`"
        assert path.read_bytes() == committed.read_bytes(), (
            f"{committed} differs from a fresh release: run `python -m autograder release` "
            "and commit the result (never edit notebooks/ by hand)")
    assert sorted(p.relative_to(tmp_path) for p in written) == sorted(
        p.relative_to(course.NOTEBOOKS) for p in course.NOTEBOOKS.glob("*/*.ipynb"))


def test_what_a_chapter_writes_next_to_itself_is_never_released(tmp_path):
    """An instructor who ran chapter 09 in solutions/ has its data set (1,797 PNG files) and
    traces beside it: nbgrader's release leaves them out (and so does each graded copy's
    feedback folder, which nbgrader would otherwise walk file by file)."""
    source = tmp_path / "solutions" / "09_pipeline"
    source.mkdir(parents=True)
    shutil.copy(course.SOLUTIONS / "09_pipeline" / "pipeline.ipynb", source)
    written = ["digits_png/3/0879.png", "pipeline_trace.json", "profiler_trace.json",
               "benchmark_report.md", ".ipynb_checkpoints/pipeline-checkpoint.ipynb"]
    for name in written:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_bytes(b"written by a run of the chapter")
    config = course.load_config(root=str(tmp_path), source_directory="solutions",
                                release_directory="release",
                                db_url=f"sqlite:///{tmp_path / 'gradebook.db'}")
    result = course.api(config).generate_assignment("09_pipeline", force=True, create=True)
    assert result["success"], result["log"]
    released = tmp_path / "release" / "09_pipeline"
    assert sorted(p.relative_to(released).as_posix() for p in released.rglob("*")
                  if p.is_file()) == ["pipeline.ipynb"]


@pytest.mark.parametrize("solution", CHAPTERS, ids=chapter_id)
def test_student_notebook_has_no_solution_or_hidden_test(solution):
    check_no_leaks(student_notebook(solution), solution)


def test_leak_check_names_the_cell(tmp_path):
    solution = CHAPTERS[0]
    leaked = json.loads(solution.read_text())
    target = tmp_path / solution.name
    target.write_text(json.dumps(leaked))
    with pytest.raises(LeakError, match=r"cell \d+ \(\w+\)"):
        check_no_leaks(target, solution)


@pytest.mark.parametrize("solution", CHAPTERS, ids=chapter_id)
def test_every_test_cell_may_fail_in_the_book_without_showing_its_output(solution):
    """The book executes the student notebooks, whose test cells fail until the exercises are
    done: each is tagged for myst-nb to expect the exception and hide the output."""
    cells = json.loads(solution.read_text(encoding="utf-8"))["cells"]
    wanted = {"raises-exception", "remove-output"}
    untagged = [cell["metadata"]["nbgrader"]["grade_id"] for cell in cells
                if cell["cell_type"] == "code" and cell["metadata"].get("nbgrader", {}).get("grade")
                and not wanted <= set(cell["metadata"].get("tags", []))]
    assert not untagged, f"{solution.name}: test cells not tagged {sorted(wanted)}: {untagged}"
