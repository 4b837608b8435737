"""The two records that cross the process boundary between the grading parent and its workers.

A :class:`Task` goes down a worker's stdin and a :class:`Result` comes back on its stdout, one
JSON line each (pool.py, worker.py). Both are small, versioned and validated on arrival: a line
that is too long, of another version, or with a field of the wrong type is refused with a
``RecordError`` that names the field, instead of travelling on as a loose dict.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

VERSION = 1
#: The longest line either side accepts (notes and questions included).
MAX_LINE_CHARS = 1_000_000
#: A result's status; "unreadable" is set by the grading parent alone (a file no worker got).
STATUSES = ("graded", "not graded", "timed out", "unreadable")
#: The note of a submission whose grading process died on it twice (killed, out of memory).
DIED_TWICE = ("the grading process died twice on this submission; not the student's score: "
              "run the same command again to retry it")


class RecordError(ValueError):
    """A line that is not a valid record of this version."""


@dataclass(frozen=True)
class Task:
    """One student's notebooks of one assignment, and how to grade them."""

    key: str
    student: str
    assignment: str
    notebooks: dict[str, str]       # released notebook name → path of the handed-in file
    work: str                       # a fresh folder for this task alone
    template: str                   # the cohort's template gradebook
    release: str                    # the release folder the submission is repaired against
    timeout: int                    # CPU seconds per cell
    wall_timeout: int               # wall-clock seconds per cell (backstop)
    memory_mb: int
    sandbox: bool = True
    notes: list[str] = field(default_factory=list)
    retried: bool = False

    def to_line(self) -> str:
        return _line(self)

    @classmethod
    def from_line(cls, line: str) -> Task:
        return _parse(cls, line)


@dataclass(frozen=True)
class Result:
    """What a worker made of a task: its status, the grader's notes, and, when graded, the
    scores read back from the task's gradebook shard (``questions``: grade id → points, None
    while a human has to grade it)."""

    work: str
    status: str
    notes: list[str] = field(default_factory=list)
    seconds: float | None = None
    score: float = 0.0
    max_score: float = 0.0
    auto_score: float = 0.0
    max_auto_score: float = 0.0
    needs_manual_grade: bool = False
    questions: dict[str, float | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise RecordError(f"status {self.status!r} is not one of {', '.join(STATUSES)}")

    def to_line(self) -> str:
        return _line(self)

    @classmethod
    def from_line(cls, line: str) -> Result:
        return _parse(cls, line)


_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,), "int": (int,), "bool": (bool,), "float": (int, float),
    "float | None": (int, float, type(None)), "list[str]": (list,), "dict[str, str]": (dict,),
    "dict[str, float | None]": (dict,)}


def _line(record: Any) -> str:
    text = json.dumps({"version": VERSION, **asdict(record)}, ensure_ascii=False)
    if len(text) > MAX_LINE_CHARS:
        raise RecordError(f"{type(record).__name__} of {len(text):,} characters is longer than "
                          f"{MAX_LINE_CHARS:,}")
    return text


def _parse(cls: type, line: str) -> Any:
    if len(line) > MAX_LINE_CHARS:
        raise RecordError(f"a {cls.__name__} line of {len(line):,} characters is too long")
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        raise RecordError(f"a {cls.__name__} line that is not JSON") from None
    if not isinstance(data, dict) or data.pop("version", None) != VERSION:
        raise RecordError(f"a {cls.__name__} of another version than {VERSION}")
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise RecordError(f"{cls.__name__} has no field {', '.join(unknown)}")
    for name, value in data.items():
        allowed = _TYPES[str(known[name].type)]
        if not isinstance(value, allowed) or (allowed == (int,) and isinstance(value, bool)):
            raise RecordError(f"{cls.__name__}.{name} is a {type(value).__name__}, expected "
                              f"{known[name].type}")
        if known[name].type == "list[str]" and not all(isinstance(v, str) for v in value):
            raise RecordError(f"{cls.__name__}.{name} holds something other than text")
    try:
        return cls(**data)
    except TypeError as missing:
        raise RecordError(f"{cls.__name__}: {missing}") from None


__all__ = ["RecordError", "Result", "Task", "VERSION"]
