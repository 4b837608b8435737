"""Flags for the instructor, gathered when a worker's result merges into the cohort.

Two sources, one list per submission: the static review of each submitted notebook
(intake.review, which never runs student code and is the check an instructor relies on), and
what the hidden tests' runtime check (tinyprof.testing) and the grader's own run (run.execute,
run.judge: ``metadata.tinyprof.review``) left in the graded notebook. The runtime check runs
after the student's code, so it can be defeated: it only ever adds flags, never clears one.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..intake.review import cell_label, review_file

#: The exception the hidden tests' runtime check raises when it finds notebook code planted
#: where the tests look.
RUNTIME_ERROR = "TamperingDetected"


def runtime_flags(autograded: dict) -> list[str]:
    """What the hidden tests' runtime check reported in a graded notebook, one flag per
    message with the cells it came from."""
    from tinyprof.testing import MARK

    cells: dict[str, list[str]] = {}   # message → labels of the cells it came from
    for number, cell in enumerate(autograded.get("cells", []), 1):
        record = cell.get("metadata", {}).get("tinyprof", {})
        record = record if isinstance(record, dict) else {}
        # the grader's own sentences (execute.py, judge.py)
        found = [str(line) for line in record.get("review", []) if isinstance(line, str)]
        if "verdict" not in record:   # decided by the judge: the kernel's outputs are no evidence
            for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
                found += _runtime_messages(output, MARK)
        label = cell_label(cell, number).removeprefix("cell ")
        for message in found:
            if label not in cells.setdefault(message, []):
                cells[message].append(label)
    return [f"{'cells' if len(labels) > 1 else 'cell'} {', '.join(labels)}: {message}"
            for message, labels in cells.items()]


def _runtime_messages(output: dict, mark: str) -> list[str]:
    """What the runtime check said in one output: its TamperingDetected error, and the lines
    it printed after ``mark``."""
    found = []
    if output.get("output_type") == "error" and output.get("ename") == RUNTIME_ERROR:
        evalue = str(output.get("evalue", "")).split(". This submission is flagged")[0]
        found.append(f"the hidden tests' runtime check found tampering: {evalue}")
    text = output.get("text", "")
    text = "".join(text) if isinstance(text, list) else str(text)
    return found + [f"the hidden tests' runtime check: {line[len(mark):].strip()}"
                    for line in text.splitlines() if line.startswith(mark)]


def submission_flags(files: list, assignment: str, submitted: Path,
                     autograded: Path) -> list[str]:
    """Flags for one student's submission: the static review of each submitted file (intake
    Submissions; as repaired for grading in ``submitted``, when the worker got that far), then
    what the runtime check printed in the graded notebooks in ``autograded``."""
    flags = []
    for f in files:
        if f.unreadable is not None:
            continue
        try:
            flags += [str(finding) for finding in review_file(
                f.path, assignment, f.notebook, repaired=Path(submitted) / f.notebook)]
        except Exception as err:  # noqa: BLE001 - a notebook that breaks the review is suspect
            flags.append(f"{f.notebook}: the static review could not read it ({err!r}); "
                         "review it by hand")
    for path in sorted(Path(autograded).glob("*.ipynb")):
        flags += runtime_flags(_load(path))
    return flags


def flag_notes(flags: list[str]) -> list[str]:
    """The sentences a feedback page and the summary show for a flagged submission."""
    return [f"FLAGGED for the instructor to review: {flag}" for flag in flags]


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))
