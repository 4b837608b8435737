"""What the grader tells people: notes read off a graded notebook, the note box on each feedback
page, pages for submissions nbgrader could not grade, grades.csv and the cohort summary."""

from __future__ import annotations

import csv
import html
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..cells import DIED_ENAME, DROPPED_MARK, NOT_RUN_ENAME, TIMEOUT_ENAME, kind, nbgrader_meta
from ..intake.review import UNSURE
from ..records import Result

BASE_COLUMNS = ["student", "assignment", "score", "max_score", "auto_score", "max_auto_score",
                "needs_manual_grade", "status"]
EXTRA_COLUMNS = ["lms_id", "late", "submitted", "flagged", "sandbox", "worker", "notes"]
#: The ``worker`` of a submission graded by this machine's own worker processes (``--jobs``).
LOCAL = "local"


#: The fields of a row that are its records.Result's: read and written through ``row.result``.
OUTCOME = ("status", "notes", "score", "max_score", "auto_score", "max_auto_score",
           "needs_manual_grade", "questions")


def _outcome(name: str) -> property:
    """``row.<name>``: the result's field; setting it gives the row a new result (a
    records.Result is frozen, as the worker's pipe wrote it)."""
    def change(row: GradeRow, value: object) -> None:
        row.result = replace(row.result, **{name: value})
    return property(lambda row: getattr(row.result, name), change, doc=f"``result.{name}``")


@dataclass
class GradeRow:
    """One student's result on one assignment: who handed what in (``lms_id``, ``late``,
    ``submitted``), what the review and the run say of it (``flags``, ``sandbox``, ``worker``),
    and the outcome, ``result``: the worker's records.Result (status, notes, scores;
    ``questions``: grade id → points), or the parent's for a file no worker got. The
    result's fields read through as the row's own (``row.score``)."""

    student: str
    assignment: str
    result: Result = field(default_factory=lambda: Result(work="", status="graded"))
    lms_id: str = ""
    late: bool = False
    submitted: str = ""
    flags: list[str] = field(default_factory=list)  # reasons to review it (results.flags)
    sandbox: str = ""  # the isolation its kernels ran in (isolation.check), or why none
    worker: str = ""  # who graded it: LOCAL, or the Dask worker (cluster.py)

    status = _outcome("status")
    notes = _outcome("notes")
    score = _outcome("score")
    max_score = _outcome("max_score")
    auto_score = _outcome("auto_score")
    max_auto_score = _outcome("max_auto_score")
    needs_manual_grade = _outcome("needs_manual_grade")
    questions = _outcome("questions")

    @classmethod
    def from_dict(cls, data: dict) -> GradeRow:
        """A row as ``dataclasses.asdict`` wrote it (the journal), or as journals written
        before rows held a Result wrote it (the outcome's fields beside the row's own)."""
        data = dict(data)
        outcome = data.pop("result", None)
        if outcome is None:
            outcome = {name: data.pop(name) for name in OUTCOME if name in data}
        return cls(**data, result=Result(**{"work": "", **outcome}))


def cell_notes(notebook: dict, scores: dict[str, float | None], timeout: int,
               memory_mb: int) -> list[str]:
    """A sentence for every cell of a graded notebook that met one of the hardening cases, and
    one for the cells that raised when graded (:func:`raised_note`)."""
    notes, raised = [], {}
    for number, cell in enumerate(notebook.get("cells", []), 1):
        if cell.get("cell_type") != "code":
            continue
        meta = nbgrader_meta(cell)
        grade_id = meta.get("grade_id")
        label = f"{kind(cell)} cell {grade_id}" if grade_id else f"cell {number}"
        outputs = cell.get("outputs", [])
        errors = [o for o in outputs if o.get("output_type") == "error"]
        explained = [_explain(o, timeout, memory_mb) for o in errors]
        notes += [f"{label}: {text}" for text in dict.fromkeys(explained) if text]
        record = cell.get("metadata", {}).get("tinyprof", {})
        if isinstance(record, dict) and record.get("raised") and not any(explained):
            raised[label] = _exception_name(record["raised"])
        marks = [_text(o).strip() for o in outputs if o.get("output_type") == "stream"]
        notes += [f"{label}: {mark[len(DROPPED_MARK):-1]}" for mark in marks
                  if mark.startswith(DROPPED_MARK)]
        stderr = [o for o in outputs if o.get("output_type") == "stream"
                  and o.get("name") == "stderr"]
        if meta.get("grade") and not meta.get("solution") and not errors and stderr \
                and scores.get(grade_id) == 0:
            first = _text(stderr[0]).strip().splitlines()[0][:80] if _text(stderr[0]).strip() \
                else ""
            notes.append(f"{label}: its checks passed, but it wrote to stderr ({first!r}), and "
                         "nbgrader scores any stderr output in a test cell as a failure "
                         "(library warnings are exempt; print(..., file=sys.stderr) is not)")
    return notes + ([raised_note(raised)] if raised else [])


#: How the note on cells that raised while graded begins (the summary lists it with the notes).
RAISED = "raised when the grader ran the notebook"


def raised_note(raised: dict[str, str]) -> str:
    """One sentence for the cells (label → exception name) whose own code raised in the graded
    run: said to the student and in the summary, the score left as the tests gave it. The
    feedback page shows the outputs of the student's own run, so without it a cell that failed
    only when graded (a sandbox that lacked something, an environment the code depends on)
    would pass in silence."""
    labels = list(raised)
    if len(labels) > 1 and all(label.startswith("cell ") for label in labels):
        labels = ["cells " + labels[0].removeprefix("cell ")] + [
            label.removeprefix("cell ") for label in labels[1:]]
    where = labels[0] if len(labels) == 1 else f"{', '.join(labels[:-1])} and {labels[-1]}"
    names = ", ".join(dict.fromkeys(raised.values()))
    it = "it" if len(raised) == 1 else "they"
    return (f"{where}: {RAISED} ({names}); the cells after ran without what {it} would have "
            "defined, and the tests were scored as they ran (the page shows the outputs of your "
            "own run; the instructor has the graded one)")


def _exception_name(ename: object) -> str:
    """The exception's name if it is one of Python's own; otherwise a phrase, never the text
    the kernel chose (a class name of the notebook's could carry what it saw while graded)."""
    import builtins

    found = getattr(builtins, str(ename), None)
    if isinstance(found, type) and issubclass(found, BaseException):
        return str(ename)
    return "an exception of the notebook's own"


def _explain(output: dict, timeout: int, memory_mb: int) -> str | None:
    ename, evalue = output.get("ename", ""), output.get("evalue", "")
    if ename == TIMEOUT_ENAME:
        if "did not stop" in evalue and "CPU time" in evalue:
            return (f"used more than the {timeout} s of CPU time a cell may use and ignored the "
                    "interrupt; the kernel was restarted and the notebook run again without "
                    "this cell")
        if "did not stop" in evalue:
            return ("ran past the wall-clock limit per cell and did not answer the interrupt; "
                    "the kernel was restarted and the notebook run again without this cell")
        if "waited" in evalue:
            return ("waited past the wall-clock limit twice while using little CPU time (it "
                    "sleeps or waits, or the machine was overloaded): interrupted, and flagged "
                    "for review")
        if "wall-clock" in evalue:
            return "ran past the wall-clock limit per cell and was interrupted"
        return (f"used more than the {timeout} s of CPU time a cell may use (an endless loop?) "
                "and was interrupted")
    if ename == DIED_ENAME:
        found = re.search(r"\((.*)\)\.", evalue)
        how = f" ({found.group(1)})" if found else ""
        limit = (f" (a notebook may use at most {memory_mb} MB: past it, the kernel's memory "
                 "group stops it)" if memory_mb and "SIGKILL" in how else "")
        return (f"the kernel died here{how}{limit}; the notebook was run again without this "
                "cell, so whatever it defines is missing")
    if ename.endswith("MemoryError"):
        limit = f"{memory_mb} MB" if memory_mb else "the machine's memory"
        return f"ran out of memory ({ename}): a notebook may use at most {limit}"
    if ename == "SystemExit":
        return "called sys.exit(); that stopped this cell only, the rest of the notebook ran"
    if ename == "ReferenceUnavailable":
        return ("the function under test called tinyprof's own implementation, which the hidden "
                "tests switch off: no points for this test")
    if ename == NOT_RUN_ENAME:
        return evalue
    return None


def _text(output: dict) -> str:
    text = output.get("text", "")
    return "".join(text) if isinstance(text, list) else str(text)


def notes_box(notes: list[str]) -> str:
    """An HTML box listing the grader's notes, for the top of a feedback page."""
    items = "".join(f"<li>{html.escape(note)}</li>" for note in notes)
    return ('<div id="grader-notes" style="border:2px solid #b35900;background:#fff4e5;'
            'padding:0.5em 1em;margin:1em auto;max-width:60em;font-family:sans-serif">'
            f"<h2>Notes from the grader</h2><ul>{items}</ul></div>")


def add_notes(page: Path, notes: list[str]) -> None:
    """Put the notes box at the top of an nbgrader feedback page."""
    if not notes:
        return
    text = page.read_text(encoding="utf-8")
    found = re.search(r"<body[^>]*>", text)
    at = found.end() if found else 0
    page.write_text(text[:at] + notes_box(notes) + text[at:], encoding="utf-8")


def failure_page(page: Path, row: GradeRow, notebook: str, notes: list[str]) -> None:
    """A feedback page for a submission that could not be graded, saying why."""
    page.parent.mkdir(parents=True, exist_ok=True)
    title = html.escape(f"{row.assignment}/{notebook} — {row.student}")
    page.write_text(
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title></head>'
        f"<body><h1>{title}</h1>{notes_box(notes)}<p>{_score_line(row)}</p></body></html>\n",
        encoding="utf-8")


def _score_line(row: GradeRow) -> str:
    if row.status == "unreadable":
        return f"Score: {row.score:g} of {row.max_score:g} (unreadable)."
    return (f"Not scored yet ({html.escape(row.status)}): the grader could not finish this "
            f"notebook, for the reason above; it will be graded again.")


def question_columns(rows: list[GradeRow], order: list[str]) -> list[str]:
    """Grade ids in course order (``order``), then any others alphabetically."""
    present = {q for row in rows for q in row.questions}
    return [q for q in order if q in present] + sorted(present - set(order))


def write_grades(rows: list[GradeRow], path: Path, order: list[str] = ()) -> None:
    """grades.csv: the base columns, one column per graded question (its nbgrader grade id),
    then the LMS id, whether the LMS marked it late, the file graded, why it is flagged for
    review (empty: not flagged), the sandbox its kernels ran in, the worker that graded it,
    and the grader's notes."""
    questions = question_columns(rows, list(order))
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(BASE_COLUMNS + questions + EXTRA_COLUMNS)
        for row in sorted(rows, key=lambda r: (r.assignment, r.student)):
            # a submission the grader could not finish has no score yet, rather than 0
            scored = row.status in ("graded", "unreadable")
            writer.writerow([inert(cell) for cell in [
                row.student, row.assignment, _fmt(row.score if scored else None),
                _fmt(row.max_score), _fmt(row.auto_score if scored else None),
                _fmt(row.max_auto_score),
                "yes" if row.needs_manual_grade else "no", row.status,
                *(_fmt(row.questions.get(q)) for q in questions),
                row.lms_id, "yes" if row.late else "no", row.submitted, " | ".join(row.flags),
                row.sandbox, row.worker, " | ".join(row.notes)]])


#: A spreadsheet evaluates a cell that starts with one of these as a formula (OWASP's CSV
#: injection rule: =, +, -, @, tab and carriage return).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def inert(text: str) -> str:
    """``text`` as a spreadsheet shows it without evaluating it: a leading formula character
    gets a single quote before it (numbers, which the grader writes itself, are left alone)."""
    if text.startswith(FORMULA_STARTS) and not _number(text):
        return "'" + text
    return text


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def summary(rows: list[GradeRow], problems: list[str], out: Path) -> str:
    """The cohort in a few lines: counts and mean scores per assignment, then every problem."""
    lines = [f"{len(rows)} submission(s) of {len({r.student for r in rows})} student(s) "
             f"into {out}"]
    for assignment in sorted({r.assignment for r in rows}):
        mine = [r for r in rows if r.assignment == assignment]
        graded = [r for r in mine if r.status == "graded"]
        mean = sum(r.auto_score for r in graded) / len(graded) if graded else 0.0
        other = ", ".join(f"{sum(r.status == s for r in mine)} {s}"
                          for s in sorted({r.status for r in mine} - {"graded"}))
        lines.append(f"  {assignment}: {len(graded)} graded, mean autograded score {mean:.2f} / "
                     f"{max((r.max_auto_score for r in mine), default=0):g}"
                     + (f"; {other}" if other else ""))
    kinds = sorted({row.sandbox for row in rows if row.sandbox})
    lines += [f"kernels ran in: {kind}" for kind in kinds]
    if any("WARNING: per-process rlimits only" in kind for kind in kinds):
        lines.append("WARNING: kernels' memory, processes and CPU were held per process only, "
                     "not per kernel: grade as root on a machine with cgroups to hold them")
    if any(kind.startswith("NONE") for kind in kinds):
        lines.append("WARNING: some submissions were graded WITHOUT a sandbox: review them before "
                     "trusting their grades")
    workers = Counter(row.worker for row in rows if row.worker)
    if set(workers) - {LOCAL}:
        lines.append(f"graded on {len(workers)} worker(s): "
                     + ", ".join(f"{name} ({count})" for name, count in sorted(workers.items())))
    flagged = [row for row in rows if row.flags]
    lines.append(f"{len(flagged)} flagged for review" + (":" if flagged else ""))
    lines += _flag_lines(flagged)
    lines.append(f"{len(problems)} problem(s)" + (":" if problems else ""))
    lines += [f"  - {problem}" for problem in problems]
    return "\n".join(lines) + "\n"


def _flag_lines(flagged: list[GradeRow]) -> list[str]:
    """The flags, certain ones first ("!"), then those honest code can raise too ("?", under a
    heading of their own: intake.review.UNSURE)."""
    lines = []
    for level, mark, heading in (("certain", "!", "certain (only tampering does this):"),
                                 ("review", "?", "review (honest code can do this too):")):
        found = [f"  {mark} {row.student}/{row.assignment}: {flag}" for row in flagged
                 for flag in row.flags if certainty(flag) == level]
        lines += [f" {heading}"] + found if found else []
    return lines


def certainty(flag: str) -> str:
    """"certain" or "review" (honest code can raise it too) for a flag as grades.csv has it."""
    return "review" if flag.endswith(UNSURE) else "certain"
