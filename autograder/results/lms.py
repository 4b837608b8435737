"""The LMSs' own import files, filled in place: Canvas's gradebook CSV, Moodle's offline grading
worksheet and Moodle's feedback-files zip.

An instructor downloads the gradebook (Canvas: Grades → Export; Moodle: "Download grading
worksheet"), and the export fills in one column and uploads nothing: no API token, no network.
The LMS re-imports what it exported, so everything but the cells filled must stay as the LMS
wrote it, byte for byte: quoting, order, line endings, the byte-order mark, the "Points Possible"
row. :class:`Sheet` therefore keeps each record's fields as the raw text of the file and
re-encodes only the cells it sets; a cell whose number is already the one to write is left as
it was, so exporting an export again changes nothing.

Layouts (each LMS's documented export):

- Canvas: ``Student, ID, SIS User ID, SIS Login ID, Section``, then a column per assignment named
  ``Name (assignment id)`` and read-only totals; a ``Points Possible`` row (the Student cell,
  indented with spaces) under the header; one row per student, keyed by the Canvas user id in
  ``ID``, the number in a Canvas download's file names (intake.py).
- Moodle: ``Identifier`` (``Participant N``, the N of a Moodle download's folder names),
  ``Full name``, ..., ``Grade``, ``Maximum Grade``, ..., ``Feedback comments`` (present when
  the assignment has feedback comments on). Grades are written as Moodle writes them, two
  decimals with the decimal mark the worksheet uses.
- Moodle's "Upload multiple feedback files in a zip" takes ``Full name_N_assignfeedback_file_/
  FILE``: the name (underscores made spaces, as Moodle's own download does, since Moodle splits
  the folder name at underscores), the participant id, the plugin.
"""

from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

CANVAS_KEY = ("Student", "ID")
MOODLE_KEY = ("Identifier", "Grade", "Maximum Grade")
MOODLE_COMMENTS = "Feedback comments"
_PARTICIPANT = re.compile(r"^Participant (\d+)$")
_ASSIGNMENT = re.compile(r"\(\d+\)$")
_UNSAFE_IN_NAME = re.compile(r'[_/\\:*?"<>|\x00-\x1f]')
_NEEDS_QUOTES = re.compile(r'[",\r\n]')
#: Zip entries' timestamp: fixed, so the same feedback makes the same zip, byte for byte.
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


class SheetError(ValueError):
    """An LMS file that cannot be read as the layout it should have (the message names it)."""


@dataclass
class Sheet:
    """A CSV file as written: ``records`` of raw fields (quotes included), each record's line
    ending, and a byte-order mark if the file began with one."""

    path: Path
    records: list[list[str]]
    endings: list[str]
    bom: str = ""

    @classmethod
    def read(cls, path: Path) -> Sheet:
        data = Path(path).read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise SheetError(f"{path}: not UTF-8 text (byte {err.start}); download it from "
                             "the LMS again, or save it as CSV UTF-8") from None
        bom = "\ufeff" if text.startswith("\ufeff") else ""
        records, endings = _split(text[len(bom):], path)
        if not records:
            raise SheetError(f"{path}: the file is empty")
        return cls(Path(path), records, endings, bom)

    def text(self) -> str:
        return self.bom + "".join(",".join(fields) + end
                                  for fields, end in zip(self.records, self.endings))

    def write(self, path: Path) -> None:
        Path(path).write_bytes(self.text().encode("utf-8"))

    @property
    def header(self) -> list[str]:
        return [decode(f) for f in self.records[0]]

    def value(self, row: int, column: int) -> str:
        fields = self.records[row]
        return decode(fields[column]) if column < len(fields) else ""

    def set(self, row: int, column: int, value: str) -> None:
        """Set one cell, quoted when its old text was quoted or the value needs it."""
        fields = self.records[row]
        fields.extend([""] * (column + 1 - len(fields)))
        quoted = fields[column].startswith('"') or _NEEDS_QUOTES.search(value) is not None
        fields[column] = '"' + value.replace('"', '""') + '"' if quoted else value

    def set_number(self, row: int, column: int, value: float, text: str,
                   comma: bool = False) -> bool:
        """Write ``text`` for ``value`` unless the cell already holds that number (then its
        bytes stay as they are); return whether the cell changed."""
        if parse_number(self.value(row, column), comma) == round(value, 2):
            return False
        self.set(row, column, text)
        return True

    def column(self, name: str) -> int | None:
        header = self.header
        return header.index(name) if name in header else None


def _split(text: str, path: Path) -> tuple[list[list[str]], list[str]]:
    """RFC 4180 records with their raw fields and line endings (CRLF, LF or CR)."""
    records, endings, fields = [], [], []
    i, n, line = 0, len(text), 1
    while i < n:
        start = i
        if text[i] == '"':
            i += 1
            while True:
                close = text.find('"', i)
                if close < 0:
                    raise SheetError(f"{path}: line {line}: a quoted cell is never closed")
                if text.startswith('""', close):
                    i = close + 2
                    continue
                i = close + 1
                break
            if i < n and text[i] not in ",\r\n":
                raise SheetError(f"{path}: line {line}: text after a closing quote")
        else:
            while i < n and text[i] not in ",\r\n":
                i += 1
        fields.append(text[start:i])
        line += text.count("\n", start, i)
        if i < n and text[i] == ",":
            i += 1
            if i == n:
                fields.append("")
            continue
        end = "\r\n" if text.startswith("\r\n", i) else text[i:i + 1]
        records.append(fields)
        endings.append(end)
        fields = []
        i += len(end)
        line += end.count("\n")
    if fields:
        records.append(fields)
        endings.append("")
    return records, endings


def decode(raw: str) -> str:
    """A raw CSV field's value."""
    if raw.startswith('"') and raw.endswith('"') and len(raw) >= 2:
        return raw[1:-1].replace('""', '"')
    return raw


def parse_number(text: str, comma: bool = False) -> float | None:
    """A cell's number, rounded to 2 decimals (None when the cell holds none)."""
    cleaned = text.strip().replace(",", ".") if comma else text.strip()
    try:
        return round(float(cleaned), 2)
    except ValueError:
        return None


def points_text(value: float, comma: bool = False, fixed: bool = False) -> str:
    """A score as the LMS writes it: up to 2 decimals (Canvas), or exactly 2 (Moodle)."""
    text = f"{value:.2f}" if fixed else f"{round(value, 2):g}"
    return text.replace(".", ",") if comma else text


@dataclass
class Rows:
    """Where an LMS file takes grades: the record of each LMS id, and what could not be read."""

    by_id: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    students: int = 0


def require(sheet: Sheet, names: tuple[str, ...], what: str) -> dict[str, int]:
    """The columns ``names`` of ``sheet``, or a SheetError saying which are missing."""
    missing = [name for name in names if sheet.column(name) is None]
    if missing:
        raise SheetError(f"{sheet.path}: not {what}: no {', '.join(repr(m) for m in missing)} "
                         f"column (its header is {', '.join(sheet.header[:8])}...)")
    return {name: sheet.column(name) for name in names}


def canvas_column(sheet: Sheet, assignment: str) -> int:
    """The one assignment column (``Name (assignment id)``) whose name starts with
    ``assignment``."""
    require(sheet, CANVAS_KEY, "a Canvas gradebook export")
    columns = [name for name in sheet.header if _ASSIGNMENT.search(name)]
    matches = [i for i, name in enumerate(sheet.header)
               if name in columns and name.startswith(assignment)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise SheetError(f"{sheet.path}: no assignment column starts with {assignment!r}; its "
                         f"assignments are: {'; '.join(columns) or 'none'}")
    raise SheetError(f"{sheet.path}: {len(matches)} columns start with {assignment!r} ("
                     f"{'; '.join(sheet.header[i] for i in matches)}): give more of the name")


def canvas_rows(sheet: Sheet) -> tuple[Rows, int | None]:
    """Canvas user id → record, and the "Points Possible" record (None if absent)."""
    columns = require(sheet, CANVAS_KEY, "a Canvas gradebook export")
    rows, possible = Rows(), None
    for index in range(1, len(sheet.records)):
        student = sheet.value(index, columns["Student"]).strip()
        uid = sheet.value(index, columns["ID"]).strip()
        if student == "Points Possible":
            possible = index
        elif uid.isdigit():
            _add(rows, uid, index, sheet, f"Canvas user {uid} ({student})")
        elif uid or student:
            rows.problems.append(f"{sheet.path.name}: line {index + 1}: {student or '?'} has "
                                 f"no Canvas user id in ID ({uid!r}); left as it was")
    return rows, possible


def moodle_rows(sheet: Sheet) -> Rows:
    """Moodle participant id → record."""
    columns = require(sheet, MOODLE_KEY, "a Moodle grading worksheet")
    rows = Rows()
    for index in range(1, len(sheet.records)):
        identifier = sheet.value(index, columns["Identifier"]).strip()
        found = _PARTICIPANT.match(identifier)
        if found:
            _add(rows, found.group(1), index, sheet, identifier)
        elif any(field.strip() for field in sheet.records[index]):
            rows.problems.append(f"{sheet.path.name}: line {index + 1}: Identifier "
                                 f"{identifier!r} is not 'Participant N'; left as it was")
    return rows


def _add(rows: Rows, uid: str, index: int, sheet: Sheet, who: str) -> None:
    rows.students += 1
    if uid in rows.by_id:
        rows.problems.append(f"{sheet.path.name}: line {index + 1}: {who} appears twice (also "
                             f"line {rows.by_id[uid] + 1}); only the first is filled")
        return
    rows.by_id[uid] = index


def comma_decimal(sheet: Sheet, column: int) -> bool:
    """Whether the worksheet writes decimals with a comma (Moodle in a comma locale)."""
    cells = [sheet.value(i, column) for i in range(1, len(sheet.records))]
    return any(re.fullmatch(r"-?\d+,\d+", cell.strip()) for cell in cells)


def feedback_folder(full_name: str, participant: str) -> str:
    """The folder Moodle's feedback-zip upload maps to a participant."""
    name = " ".join(_UNSAFE_IN_NAME.sub(" ", full_name).split()) or "Participant"
    return f"{name}_{participant}_assignfeedback_file_"


def write_zip(path: Path, files: dict[str, bytes]) -> None:
    """A zip of ``files`` (name → bytes) in name order with fixed timestamps: the same files
    always make the same bytes."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            info.create_system = 3
            archive.writestr(info, files[name])
