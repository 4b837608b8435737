"""How long ``python -m autograder report DIR`` takes for a large cohort (issue 49: at most 30 s
for 300 students).

A handful of chapter-01 submissions (solved, partly solved and untouched in turn:
``samples.mixed_cohort``) is graded for real (``grade``: nbgrader, the sandbox); their rows in
grades.csv and their graded, handed-in and feedback folders are then copied into N students,
each handed-in copy given an answer line of its own so that no two students' answers are
byte-identical, and the report of the N is built and timed, whole (reading DIR, statistics,
mistakes, copydetect over every pair, figures, pages) and by part.

Run: ``.venv/bin/python benchmarks/bench_cohort_report.py [--students 300] [--handful 6]``;
``--quick``: 30 students made from 3 (CI's check that it runs).
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autograder import samples  # noqa: E402
from autograder.grade import Settings, grade  # noqa: E402
from autograder.results.cohort_report.assemble import assignment_report  # noqa: E402
from autograder.results.cohort_report.build import write_report  # noqa: E402
from autograder.results.cohort_report.graded import read_graded  # noqa: E402

TARGET_S = 30.0
STEPS = ("autograded", "submitted", "feedback")


def graded_handful(root: Path, handful: int) -> tuple[Path, float]:
    """``handful`` submissions graded into root/graded; the folder and the seconds it took."""
    submissions = samples.mixed_cohort(root / "submissions", handful)
    start = time.perf_counter()
    grade(submissions, root / "graded", jobs=2, progress=False, settings=Settings(timeout=20))
    return root / "graded", time.perf_counter() - start


def copied_cohort(graded: Path, out: Path, students: int) -> Path:
    """``students`` students made from the graded handful in ``graded``, into ``out``."""
    shutil.copytree(graded, out, ignore=shutil.ignore_patterns("report", "work"))
    with open(graded / "grades.csv", newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        columns, rows = reader.fieldnames, list(reader)
    made = []
    for number in range(students):
        row = dict(rows[number % len(rows)])
        base, row["student"] = row["student"], f"s{number:04d}_{row['student']}"
        for step in STEPS:
            source = graded / step / base
            if source.is_dir():
                shutil.copytree(source, out / step / row["student"])
        _own_line(out / "submitted" / row["student"], number)
        made.append(row)
    for step in STEPS:   # the handful itself is replaced by its copies
        for row in rows:
            shutil.rmtree(out / step / row["student"], ignore_errors=True)
    with open(out / "grades.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, columns)
        writer.writeheader()
        writer.writerows(made)
    return out


def _own_line(folder: Path, number: int) -> None:
    """A line of the student's own at the end of their first answer cell."""
    for path in folder.rglob("*.ipynb"):
        notebook = json.loads(path.read_text(encoding="utf-8"))
        for cell in notebook["cells"]:
            if cell.get("metadata", {}).get("nbgrader", {}).get("solution") and \
                    cell["cell_type"] == "code":
                text = "".join(cell["source"]) if isinstance(cell["source"], list) \
                    else cell["source"]
                cell["source"] = text + f"\n_checked = [{number}] * {number % 7 + 1}\n"
                break
        path.write_text(json.dumps(notebook), encoding="utf-8")


def timed(action, *args):
    start = time.perf_counter()
    result = action(*args)
    return result, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=300)
    parser.add_argument("--handful", type=int, default=6)
    parser.add_argument("--quick", action="store_true", help="30 students made from 3")
    args = parser.parse_args()
    students, handful = (30, 3) if args.quick else (args.students, args.handful)
    with tempfile.TemporaryDirectory(prefix="bench_cohort_report_") as folder:
        root = Path(folder)
        graded, grading_s = graded_handful(root, handful)
        print(f"graded {handful} submissions for real: {grading_s:.1f} s")
        cohort = copied_cohort(graded, root / "cohort", students)
        report, gather_s = timed(assignment_report, read_graded(cohort), samples.CHAPTER)
        pages, whole_s = timed(write_report, cohort)
        size = sum(p.stat().st_size for p in pages) / 2**20
        pairs = len(report.codes) * (len(report.codes) - 1) // 2
        print(f"  gathering one assignment (read DIR, statistics, mistakes, {pairs:,} pairs "
              f"compared): {gather_s:.2f} s")
        print(f"  pages written: {len(pages)}, {size:.1f} MB")
        print(f"cohort report of {students} students: {whole_s:.2f} s (target ≤ "
              f"{TARGET_S:g} s: {'met' if whole_s <= TARGET_S else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
