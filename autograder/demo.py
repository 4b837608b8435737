"""``python -m autograder demo``: the whole grading flow on the sample cohort, in one command.

The sample submissions (autograder/samples) are written as a Canvas-style zip to
OUT/submissions.zip, then graded exactly as ``python -m autograder grade`` would, into
OUT/graded with its own gradebook. OUT defaults to grading/demo in the repository, which git
ignores.
"""

from __future__ import annotations

from pathlib import Path

from . import course, samples
from .grade import Settings, grade


def demo(out: Path | None = None, jobs: int = 1, settings: Settings | None = None,
         scheduler: str | None = None) -> Path:
    """Write the sample cohort and grade it; return the folder holding the results."""
    out = Path(out or course.REPO_ROOT / "grading" / "demo").resolve()
    cohort = samples.write_zip(out / "submissions.zip")
    graded = out / "graded"
    print(f"sample cohort of chapter {samples.CHAPTER}: {cohort}")
    for sample in samples.SAMPLES:
        print(f"  {sample.filename}: {sample.shows}")
    print(f"grading into {graded}", flush=True)
    grade(cohort, graded, jobs=jobs, settings=settings, scheduler=scheduler)
    return graded
