"""``python -m autograder export DIR --chapter NN_topic --out FOLDER``: grades and feedback back
into the LMS, offline, in the LMS's own import files.

DIR is a folder ``grade`` wrote. Its ``grades.csv`` says, for each submission of the chapter,
the student, the LMS user id the grader read off the download (intake.py), the score, and
whether an instructor must look first; ``autograded/`` and ``feedback/`` hold each student's
graded notebook and page. Out of them come, in FOLDER:

- ``--canvas GRADEBOOK.csv --assignment NAME``: a copy of the Canvas gradebook export with the
  column whose name starts with NAME filled in, matched by Canvas user id (lms.py keeps every
  other byte);
- ``--moodle WORKSHEET.csv``: a copy of Moodle's grading worksheet with ``Grade`` and
  ``Feedback comments`` filled in by participant id, and ``CHAPTER_feedback.zip`` holding each
  exported student's page in the folders Moodle's "upload multiple feedback files" reads;
- neither: ``CHAPTER_grades.csv``, one row per submission (student, LMS id, score, max, late,
  flagged, and why a row has no score), formulas neutralised as in grades.csv;
- always ``export_summary.txt``, also printed.

A submission that was not graded, timed out, was unreadable or is flagged for review is never
exported as a number (``--include-flagged`` exports the flagged and unreadable ones; a
submission that has no score yet has none to export): its LMS cell stays as it was, and the
summary names it with the reason. A student of the gradebook who handed nothing in keeps their
cell; a submission whose LMS id is not in the gradebook is listed, never dropped. When the LMS
grades the assignment out of other points than the chapter (Canvas's "Points Possible", Moodle's
"Maximum Grade"), scores are scaled to them and the summary says so.
"""

from __future__ import annotations

import csv
import html
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .. import course
from ..intake.collect import CANVAS, MOODLE_DIR, MOODLE_FILE
from ..records import Result
from . import lms
from .exercises import outcomes, summary_lines
from .report import BASE_COLUMNS, EXTRA_COLUMNS, FORMULA_STARTS, GradeRow, inert

#: Statuses whose score an instructor must see before it is exported (--include-flagged).
REVIEW = ("unreadable",)
PLAIN_COLUMNS = ["student", "lms_id", "score", "max_score", "late", "flagged", "not_exported"]


class ExportError(ValueError):
    """The export cannot start (a missing grades.csv, an unknown chapter, an unreadable LMS
    file); the message names the file."""


@dataclass
class Entry:
    """One submission of the chapter and what the export does with it: ``score`` to write (in
    the chapter's points), or None and ``held``, the reason an instructor must look first."""

    row: GradeRow
    score: float | None = None
    held: str = ""

    @property
    def who(self) -> str:
        return f"{self.row.student} ({self.row.lms_id or 'no LMS id'})"

    @property
    def lms(self) -> str:
        """Which LMS's download the graded file came from ("Canvas", "Moodle" or ""), read off
        its path as intake.py did: a Canvas user id and a Moodle participant id are both plain
        numbers, so an id is only looked up in its own LMS's file."""
        parts = self.row.submitted.split("/")

        def carries_id(pattern) -> bool:
            return any((found := pattern.match(part)) and found["uid"] == self.row.lms_id
                       for part in parts)

        if carries_id(MOODLE_DIR) or carries_id(MOODLE_FILE):
            return "Moodle"
        return "Canvas" if carries_id(CANVAS) else ""


@dataclass
class Report:
    """What an export did: the files written and the summary's lines."""

    written: list[Path] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def export(graded: Path, chapter: str, out: Path, *, canvas: Path | None = None,
           assignment: str | None = None, moodle: Path | None = None,
           include_flagged: bool = False) -> Report:
    """Export ``chapter``'s grades from ``graded`` (a grade command's DIR) into ``out``."""
    graded, out = Path(graded), Path(out)
    if canvas and moodle:
        raise ExportError("--canvas and --moodle: give one LMS file per export")
    if canvas and not assignment:
        raise ExportError("--canvas needs --assignment NAME (the start of the gradebook column's "
                          "name, such as 'Parameters')")
    entries, problems = decide(read_grades(graded / "grades.csv", chapter), include_flagged)
    out.mkdir(parents=True, exist_ok=True)
    report = Report(lines=[f"export of {chapter} from {graded / 'grades.csv'}: "
                           f"{len(entries)} submission(s)"])
    if canvas:
        _canvas(entries, Path(canvas), assignment, out, report)
    elif moodle:
        _moodle(entries, Path(moodle), graded, chapter, out, report)
    else:
        _plain(entries, out / f"{chapter}_grades.csv", report)
    _held(entries, include_flagged, report)
    report.lines += [f"{len(problems)} problem(s) reading grades.csv" + (":" if problems else "")]
    report.lines += [f"  - {problem}" for problem in problems]
    summary = out / "export_summary.txt"
    summary.write_text(report.text(), encoding="utf-8")
    report.written.append(summary)
    return report


# --- grades.csv in, decisions out ----------------------------------------------------------------

def read_grades(path: Path, chapter: str) -> list[dict[str, str]]:
    """The chapter's rows of a grades.csv (report.write_grades), as dictionaries."""
    if not path.is_file():
        raise ExportError(f"{path}: no such file: DIR must be a folder `python -m autograder "
                          "grade` wrote")
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in (*BASE_COLUMNS, *EXTRA_COLUMNS) if c not in (reader.fieldnames or [])]
        if missing:
            raise ExportError(f"{path}: not a grades.csv of this grader: no {', '.join(missing)} "
                              "column")
        rows = list(reader)
    found = sorted({row["assignment"] for row in rows})
    if chapter not in found:
        raise ExportError(f"{path}: no submission of {chapter}; it holds "
                          f"{', '.join(found) or 'no submissions'}")
    return [row for row in rows if row["assignment"] == chapter]


def _row(raw: dict[str, str]) -> GradeRow:
    """A grades.csv row back as a GradeRow (a text cell's neutralising quote removed)."""
    text = {name: _live(value or "") for name, value in raw.items() if name}
    questions = [n for n in text if n not in BASE_COLUMNS and n not in EXTRA_COLUMNS]
    result = Result(
        work="", status=text["status"], notes=_split(text["notes"]),
        score=_float(text["score"]), max_score=_float(text["max_score"]) or 0.0,
        auto_score=_float(text["auto_score"]), max_auto_score=_float(text["max_auto_score"]),
        needs_manual_grade=text["needs_manual_grade"] == "yes",
        questions={q: _float(text[q]) for q in questions})
    return GradeRow(student=text["student"], assignment=text["assignment"], result=result,
                    lms_id=text["lms_id"], late=text["late"] == "yes",
                    submitted=text["submitted"], flags=_split(text["flagged"]))


def _live(value: str) -> str:
    return value[1:] if value.startswith("'") and value[1:].startswith(FORMULA_STARTS) else value


def _split(value: str) -> list[str]:
    return [part for part in value.split(" | ") if part]


def _float(text: str) -> float | None:
    if text == "":
        return None
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None


def decide(raw_rows: list[dict[str, str]], include_flagged: bool
           ) -> tuple[list[Entry], list[str]]:
    """An Entry per readable row: its score, or why it is held back; a problem per row that
    cannot be read (the others are exported)."""
    entries, problems = [], []
    for number, raw in enumerate(raw_rows, 2):
        try:
            row = _row(raw)
        except (ValueError, KeyError) as err:
            problems.append(f"grades.csv: the row of {raw.get('student') or '?'} (line "
                            f"{number}) cannot be read ({err}); not exported")
            continue
        entries.append(_decide(row, include_flagged))
    _hold_shared_ids(entries)
    return entries, problems


def _decide(row: GradeRow, include_flagged: bool) -> Entry:
    reason = row.notes[-1] if row.notes else "no reason given"
    if row.status not in ("graded", *REVIEW):
        return Entry(row, held=f"{row.status}: {reason}")
    if row.score is None:
        return Entry(row, held=f"{row.status} without a score")
    if include_flagged:
        return Entry(row, row.score)
    if row.status in REVIEW:
        return Entry(row, held=f"{row.status}: {reason}")
    if row.flags:
        return Entry(row, held="flagged for review: " + " | ".join(row.flags))
    return Entry(row, row.score)


def _hold_shared_ids(entries: list[Entry]) -> None:
    """Two submissions under one LMS id: neither is exported (which one counts is a human's
    call)."""
    counts = Counter(e.row.lms_id for e in entries if e.row.lms_id)
    for entry in entries:
        if counts.get(entry.row.lms_id, 0) > 1:
            others = [e.row.student for e in entries
                      if e.row.lms_id == entry.row.lms_id and e is not entry]
            entry.score, entry.held = None, (f"LMS id {entry.row.lms_id} is also that of "
                                             f"{', '.join(others)}")


def _held(entries: list[Entry], include_flagged: bool, report: Report) -> None:
    held = [e for e in entries if e.held]
    hint = "" if include_flagged else \
        " (--include-flagged exports the flagged and unreadable ones)"
    report.lines.append(f"{len(held)} not exported, for an instructor to look at first{hint}"
                        + (":" if held else ""))
    report.lines += [f"  ! {e.who}: {e.held}" for e in held]
    waiting = [e for e in entries if e.score is not None and e.row.needs_manual_grade]
    if waiting:
        report.lines.append(f"{len(waiting)} exported score(s) still await a manual grade "
                            "(written answers): grade them in formgrader, run grade again "
                            "(it reads them back) and export again")


# --- the three outputs --------------------------------------------------------------------------

def _canvas(entries: list[Entry], path: Path, assignment: str, out: Path,
            report: Report) -> None:
    sheet = _read(path, out)
    column = lms.canvas_column(sheet, assignment)
    rows, possible = lms.canvas_rows(sheet)
    lms_points = lms.parse_number(sheet.value(possible, column)) if possible is not None \
        else None

    def fill(entry: Entry, index: int) -> bool:
        value = _scaled(entry, lms_points)
        return sheet.set_number(index, column, value, lms.points_text(value))

    label = f"Canvas gradebook {path.name}, column {sheet.header[column]!r}"
    at = len(report.lines) + 1   # the "written to" line goes under _fill's first line
    _fill(entries, rows, fill, label, lms_points, "Canvas", report)
    target = out / path.name
    sheet.write(target)
    report.written.append(target)
    report.lines.insert(at, f"  written to {target}")


def _moodle(entries: list[Entry], path: Path, graded: Path, chapter: str, out: Path,
            report: Report) -> None:
    sheet = _read(path, out)
    rows = lms.moodle_rows(sheet)
    columns = lms.require(sheet, lms.MOODLE_KEY, "a Moodle grading worksheet")
    grade, maximum = columns["Grade"], columns["Maximum Grade"]
    comments, name = sheet.column(lms.MOODLE_COMMENTS), sheet.column("Full name")
    comma = lms.comma_decimal(sheet, maximum) or lms.comma_decimal(sheet, grade)
    locked = sheet.column("Grade can be changed")
    pages: dict[str, bytes] = {}
    notes: list[str] = []

    def fill(entry: Entry, index: int) -> bool | None:
        points = lms.parse_number(sheet.value(index, maximum), comma)
        if points is None and sheet.value(index, maximum).strip():
            notes.append(f"  {entry.who}: not filled: the worksheet's Maximum Grade is "
                         f"{sheet.value(index, maximum)!r} (a scale, not points; line "
                         f"{index + 1}): grade it in Moodle")
            return None
        value = _scaled(entry, points)
        if value != entry.score:
            notes.append(f"  {entry.who}: {entry.score:g} / {entry.row.max_score:g} scaled to "
                         f"the worksheet's Maximum Grade, {value:.2f} / {points:g}")
        if locked is not None and sheet.value(index, locked).strip().lower() == "no":
            notes.append(f"  {entry.who}: Moodle says the grade cannot be changed (line "
                         f"{index + 1}); Moodle will skip it on import")
        changed = sheet.set_number(index, grade, value, lms.points_text(value, comma, True),
                                   comma)
        if comments is not None:
            comment = _comment(entry, graded, chapter)
            if sheet.value(index, comments) != comment:   # an equal comment keeps its bytes
                sheet.set(index, comments, comment)
                changed = True
        full_name = sheet.value(index, name) if name is not None else entry.row.student
        pages.update(_pages(graded / "feedback" / entry.row.student / chapter,
                            lms.feedback_folder(full_name, entry.row.lms_id)))
        return changed

    label = f"Moodle worksheet {path.name}"
    at = len(report.lines) + 1
    _fill(entries, rows, fill, label, None, "Moodle", report)
    report.lines[at:at] = notes
    if comments is None:
        report.lines.append(f"  {path.name} has no {lms.MOODLE_COMMENTS!r} column: turn on "
                            "feedback comments in the assignment's settings to get them")
    target, archive = out / path.name, out / f"{chapter}_feedback.zip"
    sheet.write(target)
    lms.write_zip(archive, pages)
    report.written += [target, archive]
    report.lines.insert(at, f"  written to {target}; {len(pages)} feedback page(s) in "
                            f"{archive}")


def _pages(folder: Path, into: str) -> dict[str, bytes]:
    """A student's feedback pages, named as they go into the feedback zip."""
    return {f"{into}/{page.name}": page.read_bytes() for page in sorted(folder.glob("*.html"))}


def _plain(entries: list[Entry], path: Path, report: Report) -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(PLAIN_COLUMNS)
        for e in sorted(entries, key=lambda e: e.row.student):
            writer.writerow([inert(cell) for cell in [
                e.row.student, e.row.lms_id, "" if e.score is None else f"{e.score:g}",
                f"{e.row.max_score:g}", "yes" if e.row.late else "no",
                " | ".join(e.row.flags), e.held]])
    report.written.append(path)
    exported = sum(e.score is not None for e in entries)
    report.lines.insert(1, f"plain CSV: {exported} score(s) written to {path}")


def _fill(entries: list[Entry], rows: lms.Rows, fill, label: str, lms_points: float | None,
          system: str, report: Report) -> None:
    """Fill each exported entry's record; list the entries the LMS file has no row for."""
    filled = changed = 0
    unknown = []
    where = "the gradebook" if system == "Canvas" else "the worksheet"
    for entry in entries:
        if entry.score is None:
            continue
        index = rows.by_id.get(entry.row.lms_id) if entry.lms == system else None
        if index is None:
            unknown.append(entry)
            continue
        outcome = fill(entry, index)   # None: the LMS row cannot take a number (a note says why)
        changed += bool(outcome)
        filled += outcome is not None
    report.lines.append(f"{label}: {filled} score(s) filled ({changed} changed); "
                        f"{rows.students - filled} student(s) of {where} got none and keep "
                        "their cells as they were")
    scales = {e.row.max_score for e in entries if e.score is not None}
    if lms_points is not None and scales != {lms_points}:
        report.lines.append(f"  scores scaled from {'/'.join(f'{s:g}' for s in scales)} "
                            f"to the {lms_points:g} points the LMS grades out of")
    report.lines += [f"  - {problem}" for problem in rows.problems]
    report.lines.append(f"{len(unknown)} submission(s) whose LMS id is not in {where}, not "
                        "exported" + (":" if unknown else ""))
    report.lines += [f"  ? {e.who}: score {e.score:g}, "
                     f"{f'a {e.lms} submission' if e.lms else 'not an LMS download'}, "
                     f"handed in as {e.row.submitted}" for e in unknown]


def _scaled(entry: Entry, lms_points: float | None) -> float:
    """The entry's score on the LMS's scale (its own when the LMS says none, or the same)."""
    if not lms_points or not entry.row.max_score or lms_points == entry.row.max_score:
        return entry.score
    return entry.score * lms_points / entry.row.max_score


def _read(path: Path, out: Path) -> lms.Sheet:
    if not path.is_file():
        raise ExportError(f"{path}: no such file")
    if (out / path.name).resolve() == path.resolve():
        raise ExportError(f"{path}: --out would overwrite the LMS file itself; give another "
                          "folder")
    return lms.Sheet.read(path)


def _comment(entry: Entry, graded: Path, chapter: str) -> str:
    """The Moodle feedback comment: the score, then each exercise with the grader's message
    (HTML, as Moodle shows comments)."""
    row = entry.row
    from .feedback import redactor  # loads nbconvert: only when comments are written

    lines = [f"Score: {entry.score:g} / {row.max_score:g} (autograded "
             f"{row.auto_score or 0:g} / {row.max_auto_score or 0:g})."]
    for notebook in sorted((graded / "autograded" / row.student / chapter).glob("*.ipynb")):
        instructor = course.SOLUTIONS / chapter / notebook.name
        if not instructor.is_file():
            continue
        found = outcomes(json.loads(notebook.read_text(encoding="utf-8")),
                         json.loads(instructor.read_text(encoding="utf-8")), row.questions,
                         clean=redactor(instructor))
        lines += summary_lines(found)
    if row.status != "graded":
        lines += row.notes
    return "<br>".join(html.escape(line, quote=False) for line in lines)


__all__ = ["Entry", "ExportError", "Report", "decide", "export", "read_grades"]
