"""nbgrader configuration of the tinyprof course.

Instructor notebooks live in ``solutions/`` (nbgrader's source step) and the generated student
notebooks in ``notebooks/`` (its release step), both at the repository root. Grading runs in a
separate working folder (see ``python -m autograder grade``), so submissions, graded copies and
the gradebook never land inside the repository.
"""

import os

c = get_config()  # noqa: F821  (provided by traitlets when this file is loaded)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

c.CourseDirectory.course_id = "tinyprof"
c.CourseDirectory.root = REPO_ROOT
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
# Files a chapter writes next to itself when it runs (traces, baselines, reports, chapter 09's
# data set of 1,797 PNG files) stay out of the release, students get only the notebook; and out
# of each graded copy's feedback folder, which nbgrader would otherwise walk file by file (2 s
# a notebook for the PNG files alone).
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.db",
                            "*.json", "*.md", "digits_png"]

# Warnings printed to stderr by libraries (numpy, matplotlib, ...) must not zero a passing test
# cell: nbgrader scores any stderr output as a failure unless it is removed first.
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = r"Warning"

# A finite per-cell timeout: an infinite loop costs that cell, not the whole cohort.
c.Execute.timeout = 60
c.Execute.interrupt_on_timeout = True
