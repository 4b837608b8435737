"""Where the chapters live, for the notebook, autograder and book tests."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOLUTIONS = REPO / "solutions"
NOTEBOOKS = REPO / "notebooks"


def solution_notebooks() -> list[Path]:
    return sorted(SOLUTIONS.glob("*/*.ipynb"))


def student_notebook(solution: Path) -> Path:
    return NOTEBOOKS / solution.parent.name / solution.name


def chapter_id(path: Path) -> str:
    return path.parent.name
