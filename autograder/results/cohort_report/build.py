"""The whole report written: a page per assignment and an index, in DIR/report (assemble.py
gathers each assignment, page.py renders it)."""

from __future__ import annotations

from pathlib import Path

from .assemble import assignment_report
from .graded import REPORT_FOLDER, read_graded
from .page import assignment_page, failed_page, index_page

#: What git should do with the report folder, whatever DIR's own .gitignore says.
GITIGNORE = "# the cohort report holds grades and student code: never commit it\n*\n"


def write_report(out: Path) -> list[Path]:
    """Write DIR/report: a page per assignment and index.html; returns the pages written.
    An assignment whose page fails to build gets a page saying why; the others are kept."""
    cohort = read_graded(out)
    folder = cohort.out / REPORT_FOLDER
    folder.mkdir(exist_ok=True)
    (folder / ".gitignore").write_text(GITIGNORE, encoding="utf-8")
    pages, reports = [], []
    for assignment in cohort.assignments():
        page = folder / f"{_file_name(assignment)}.html"
        try:
            report = assignment_report(cohort, assignment)
            text = assignment_page(report)
            reports.append(report)
        except Exception as err:  # noqa: BLE001 - one broken assignment never loses the rest
            text = failed_page(assignment, f"{type(err).__name__}: {err}")
        page.write_text(text, encoding="utf-8")
        pages.append(page)
    index = folder / "index.html"
    index.write_text(index_page(cohort, reports, [p.name for p in pages]), encoding="utf-8")
    return [index] + pages


def _file_name(assignment: str) -> str:
    """A page's file name from an assignment id (anything but letters, digits, ``-`` and
    ``_`` replaced)."""
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in assignment) or "_"
