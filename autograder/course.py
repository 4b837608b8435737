"""Where the course lives and how nbgrader is configured for it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

REPO_ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = REPO_ROOT / "solutions"
NOTEBOOKS = REPO_ROOT / "notebooks"
CONFIG_FILE = Path(__file__).resolve().parent / "nbgrader_config.py"


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
