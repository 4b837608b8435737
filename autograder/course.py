"""Where the course lives, how nbgrader is configured for it, and what each chapter grades."""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from .cells import nbgrader_meta

REPO_ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = REPO_ROOT / "solutions"
NOTEBOOKS = REPO_ROOT / "notebooks"
CONFIG_FILE = Path(__file__).resolve().parent / "nbgrader_config.py"
COURSE_ID = "tinyprof"


def ensure_tools_on_path() -> None:
    """nbgrader shells out to ``alembic``: put this interpreter's ``bin`` first on PATH."""
    bindir = str(Path(sys.executable).parent)
    if os.environ.get("PATH", "").split(os.pathsep)[0] != bindir:
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")


def load_config(**course_directory: str) -> Config:
    """The course's nbgrader config, with CourseDirectory traits overridden by keyword."""
    config = PyFileConfigLoader(CONFIG_FILE.name, path=str(CONFIG_FILE.parent)).load_config()
    for key, value in course_directory.items():
        setattr(config.CourseDirectory, key, value)
    return config


def assignments() -> list[str]:
    """Assignment ids: the ``NN_topic`` folders of solutions/, in order."""
    return sorted(p.name for p in SOLUTIONS.iterdir()
                  if p.is_dir() and any(p.glob("*.ipynb")))


def api(config: Config):
    """An NbGraderAPI for ``config`` (imported lazily: nbgrader is slow to import)."""
    ensure_tools_on_path()
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    coursedir = CourseDirectory(config=config)
    return NbGraderAPI(coursedir=coursedir, config=config)


@contextmanager
def preserve_cwd() -> Iterator[None]:
    """nbgrader's apps ``chdir`` into the course root; put the caller's cwd back afterwards."""
    cwd = os.getcwd()
    try:
        yield
    finally:
        os.chdir(cwd)


@dataclass(frozen=True)
class NotebookSpec:
    """One graded notebook of a chapter, as the instructor wrote it in solutions/.

    ``points`` maps each graded cell's grade id to its points; ``auto`` holds the grade ids
    nbgrader scores by running tests (code cells), the rest are graded by hand.
    """

    assignment: str
    name: str
    source: Path
    grade_ids: frozenset[str]
    points: dict[str, float]
    auto: frozenset[str]

    @property
    def max_score(self) -> float:
        """Σ points over the graded cells."""
        return sum(self.points.values())

    @property
    def max_auto_score(self) -> float:
        """Σ points over the autograded (code) cells."""
        return sum(p for gid, p in self.points.items() if gid in self.auto)


def notebook_spec(source: Path) -> NotebookSpec:
    """Read the grade ids and points of one instructor notebook."""
    cells = json.loads(Path(source).read_text(encoding="utf-8"))["cells"]
    meta = [(c, nbgrader_meta(c)) for c in cells]
    graded = [(c, m) for c, m in meta if m.get("grade")]
    return NotebookSpec(
        assignment=source.parent.name, name=source.name, source=source,
        grade_ids=frozenset(m["grade_id"] for _, m in meta if m.get("grade_id")),
        points={m["grade_id"]: float(m.get("points", 0)) for _, m in graded},
        auto=frozenset(m["grade_id"] for c, m in graded if c["cell_type"] == "code"))


def notebook_specs() -> list[NotebookSpec]:
    """Every graded notebook of every chapter in solutions/, in chapter order."""
    return [notebook_spec(path) for aid in assignments()
            for path in sorted((SOLUTIONS / aid).glob("*.ipynb"))]
