"""``python -m autograder demo``: the whole grading flow on the sample cohort, in one command.

The sample submissions (autograder/samples) are written as a Canvas-style zip to
OUT/submissions.zip, then graded exactly as ``python -m autograder grade`` would, into
OUT/graded with its own gradebook. The grades then go back into a Canvas gradebook export of
the cohort (OUT/canvas_gradebook.csv) exactly as ``python -m autograder export`` would, into
OUT/export. OUT defaults to grading/demo in the repository, which git ignores.
"""

from __future__ import annotations

from pathlib import Path

from . import course, samples
from .grade import Settings, grade

#: The start of the sample gradebook's column for the chapter (samples.write_canvas_gradebook).
ASSIGNMENT = "Parameters"


def demo(out: Path | None = None, jobs: int = 1, settings: Settings | None = None,
         scheduler: str | None = None) -> Path:
    """Write the sample cohort, grade it and export it; return the folder holding the grades
    (its sibling ``export`` holds the filled gradebook and export_summary.txt)."""
    out = Path(out or course.REPO_ROOT / "grading" / "demo").resolve()
    cohort = samples.write_zip(out / "submissions.zip")
    graded = out / "graded"
    print(f"sample cohort of chapter {samples.CHAPTER}: {cohort}")
    for sample in samples.SAMPLES:
        print(f"  {sample.filename}: {sample.shows}")
    print(f"grading into {graded}", flush=True)
    grade(cohort, graded, jobs=jobs, settings=settings, scheduler=scheduler)
    export_sample(out, graded)
    return graded


def export_sample(out: Path, graded: Path):
    """Export the graded sample cohort into a Canvas gradebook export of it (OUT/export)."""
    from .results.export import export

    gradebook = samples.write_canvas_gradebook(out / "canvas_gradebook.csv")
    return export(graded, samples.CHAPTER, out / "export", canvas=gradebook,
                  assignment=ASSIGNMENT)
