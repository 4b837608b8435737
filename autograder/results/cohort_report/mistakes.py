"""What the class got wrong: the named mistakes by frequency, the other failures by message.

A hidden test names a classic mistake through ``tinyprof.testing.expect``: its failure reads
"WHAT: expected W, got G. HINT", the hint chosen by the wrong value the student's code gave
(or "WHAT: got None; did you forget to return the result?"). The grader keeps each test cell's
failure message in the graded notebook (``metadata.tinyprof.verdict``, run/judge.py; an error
output for a notebook graded without the judge). Named mistakes are grouped by exercise and
hint, unnamed failures by exercise and message with numbers and quoted text blanked, each
counted once per student, with the students in order and one of them as the example.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...cells import grade_id, is_test

_EXPECTED = re.compile(r"^.+?: expected .+?, got .+?\. (?P<hint>\S.*)$", re.S)
_NONE = re.compile(r"^.+?: got None; (?P<hint>.+)$", re.S)
#: A number standing alone (not the 2 of "GPT-2" or the 32 of "float32"), thousands separated
#: by commas or underscores.
_NUMBER = re.compile(r"(?<![\w.-])[-+]?\d+(?:[,_]\d{3})*(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


@dataclass(frozen=True)
class Failure:
    """A test cell that failed for one student: the grader's exception name and message."""

    student: str
    grade_id: str
    ename: str
    message: str
    notebook: str


@dataclass(frozen=True)
class MistakeGroup:
    """Students whose test of one exercise failed alike: ``named`` with the same hint, or
    (unnamed) with the same normalised message."""

    grade_id: str
    text: str
    named: bool
    students: tuple[str, ...]
    notebooks: tuple[str, ...]   # the notebook each student failed in, in the same order

    @property
    def count(self) -> int:
        return len(self.students)


def hint_of(message: str) -> str | None:
    """The hint an ``expect`` failure gave (the classic mistake it names), or None."""
    text = " ".join(str(message).split())
    for pattern in (_EXPECTED, _NONE):
        found = pattern.match(text)
        if found:
            return found.group("hint").strip()
    return None


def normalised(ename: str, message: str) -> str:
    """A failure's message with its numbers and quoted text blanked (``#``, ``'…'``), so that
    the same failure on other values groups together; the exception's name before it unless
    it is an AssertionError."""
    text = " ".join(str(message).split())
    text = _NUMBER.sub("#", _QUOTED.sub("'…'", text))
    return text if ename in ("", "AssertionError") else f"{ename}: {text}"


def failures_in(notebook: dict, student: str, name: str) -> list[Failure]:
    """The failed test cells of one graded notebook."""
    found = []
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") != "code" or not is_test(cell):
            continue
        record = cell.get("metadata", {}).get("tinyprof", {})
        verdict = record.get("verdict") if isinstance(record, dict) else None
        if isinstance(verdict, dict):
            if not verdict.get("passed"):
                found.append(Failure(student, grade_id(cell), str(verdict.get("ename", "")),
                                     str(verdict.get("message", "")), name))
            continue
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if errors:
            found.append(Failure(student, grade_id(cell), str(errors[0].get("ename", "")),
                                 str(errors[0].get("evalue", "")), name))
    return found


def group_failures(failures: list[Failure], order: list[str] = ()) -> list[MistakeGroup]:
    """Named groups, then unnamed ones; each by how many students, most first, then in the
    exercises' ``order`` (grade ids; others after, alphabetically)."""
    rank = {gid: index for index, gid in enumerate(order)}
    groups: dict[tuple[str, str, bool], dict[str, str]] = {}
    for failure in failures:
        hint = hint_of(failure.message)
        key = (failure.grade_id, hint, True) if hint else \
            (failure.grade_id, normalised(failure.ename, failure.message), False)
        groups.setdefault(key, {}).setdefault(failure.student, failure.notebook)
    found = [MistakeGroup(gid, text, named, tuple(sorted(members)),
                          tuple(members[s] for s in sorted(members)))
             for (gid, text, named), members in groups.items()]
    return sorted(found, key=lambda g: (not g.named, -g.count, rank.get(g.grade_id, len(rank)),
                                        g.grade_id, g.text))
