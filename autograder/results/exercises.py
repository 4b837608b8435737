"""What each graded cell of a chapter is called, and what the grader said about it.

nbgrader's feedback page lists every test as "Test cell" with a score and a link: a student must
click through to learn which exercise lost points and why. Here every graded cell gets the name
of the exercise it grades (the last heading before it in the *instructor's* notebook, so a
student who edits a heading cannot rename an entry) and the grader's one-line message beside its
score: the hint the failed test gave, or the grader's sentence for what happened (a time-out,
a crash). The same :class:`Outcome` list feeds the page's summary (:func:`summary_html`) and the
feedback comment written into an LMS worksheet (:func:`summary_lines`, export.py).

Messages come from the autograded notebook's test-cell outputs, which the grader wrote
(judge.py); they pass the same redaction as the page (feedback.redact) and are escaped, so the
summary shows nothing the page itself would not.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from pathlib import Path

from ..cells import grade_id, is_test, kind, nbgrader_meta, source

#: Characters of a message shown beside a score (the page below has the whole cell).
MAX_MESSAGE = 300
_TOC = re.compile(r'(<div id="toc">\s*<ol>)(.*?)(</ol>\s*</div>)', re.S)
_LATE = re.compile(r'<li class="late-penalty">.*?</li>', re.S)


@dataclass(frozen=True)
class Outcome:
    """One graded cell: its grade id, the exercise it grades, its score (None: awaiting a manual
    grade), its points, and the grader's message ("" when there is nothing to say)."""

    grade_id: str
    name: str
    kind: str
    score: float | None
    points: float
    message: str

    def score_text(self) -> str:
        if self.score is None:
            return f"awaiting a manual grade / {self.points:g}"
        return f"{self.score:g} / {self.points:g}"


def exercise_names(instructor: dict) -> dict[str, str]:
    """Grade id → the last markdown heading before its cell in the instructor's notebook, its
    ``#`` and backticks removed (the grade id itself when no heading precedes it)."""
    names, heading = {}, ""
    for cell in instructor.get("cells", []):
        if cell.get("cell_type") == "markdown" and not nbgrader_meta(cell).get("solution"):
            lines = [line for line in source(cell).splitlines() if line.startswith("#")]
            if lines:
                heading = lines[-1].lstrip("#").replace("`", "").strip()
        found = grade_id(cell)
        if found and nbgrader_meta(cell).get("grade"):
            names[found] = heading or found
    return names


def outcomes(autograded: dict, instructor: dict, questions: dict[str, float | None],
             clean=lambda text: text) -> list[Outcome]:
    """Every graded cell of ``autograded`` in notebook order, named from ``instructor``, scored
    from ``questions`` (grade id → points, None awaiting a manual grade), its message passed
    through ``clean`` (the page's redaction)."""
    names = exercise_names(instructor)
    found = []
    for cell in autograded.get("cells", []):
        meta = nbgrader_meta(cell)
        gid = grade_id(cell)
        if not gid or not meta.get("grade"):
            continue
        score = questions.get(gid) if gid in questions else meta.get("score")
        points = float(meta.get("points") or 0)
        score = None if score is None else float(score)
        message = clean(_message(cell, score == points)) if is_test(cell) else ""
        found.append(Outcome(gid, names.get(gid, gid), kind(cell), score, points,
                             _cut(message)))
    return found


def _message(cell: dict, full_marks: bool) -> str:
    """The grader's verdict on a test cell: the failed test's hint, or ``ename: evalue`` for
    anything else it raised; "passed" when it raised nothing and scored its points (a test
    that lost points without an error, such as one that wrote to stderr, gets no message: the
    grader's notes at the top of the page say why)."""
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            ename, evalue = output.get("ename", ""), str(output.get("evalue", ""))
            return evalue if ename == "AssertionError" and evalue else f"{ename}: {evalue}"
    return "passed" if full_marks else ""


def _cut(text: str) -> str:
    one_line = " ".join(text.split())
    return one_line if len(one_line) <= MAX_MESSAGE else one_line[:MAX_MESSAGE - 1] + "…"


def summary_html(found: list[Outcome]) -> str:
    """The page's summary entries: a link named after the exercise, the score, the message."""
    items = []
    for outcome in found:
        what = "" if outcome.kind == "test" else f" ({html.escape(outcome.kind)})"
        said = f" — {html.escape(outcome.message)}" if outcome.message else ""
        items.append(f'<li><a href="#{html.escape(outcome.grade_id)}">'
                     f"{html.escape(outcome.name)}</a>{what}: "
                     f"{html.escape(outcome.score_text())}{said}</li>")
    return "\n".join(items)


def summary_lines(found: list[Outcome]) -> list[str]:
    """The same entries as plain text, one line each (an LMS feedback comment)."""
    return [f"{o.name}: {o.score_text()}" + (f" — {o.message}" if o.message else "")
            for o in found]


def name_summary(page: Path, autograded: Path, instructor: Path,
                 questions: dict[str, float | None], clean=lambda text: text) -> bool:
    """Replace the "Test cell" entries of an nbgrader feedback page's summary with the named
    ones (a late-penalty entry is kept). Returns whether the page had a summary to replace."""
    text = page.read_text(encoding="utf-8")
    toc = _TOC.search(text)
    if toc is None:
        return False
    found = outcomes(_load(autograded), _load(instructor), questions, clean)
    late = "\n".join(_LATE.findall(toc.group(2)))
    entries = "\n".join(filter(None, [summary_html(found), late]))
    page.write_text(text[:toc.start(2)] + "\n" + entries + "\n" + text[toc.end(2):],
                    encoding="utf-8")
    return True


def _load(path: Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


__all__ = ["Outcome", "exercise_names", "name_summary", "outcomes", "summary_html",
           "summary_lines"]
