"""Grades and feedback back into the LMS (autograder/results/export.py, lms.py, exercises.py).

One real grading run (``python -m autograder grade``, real nbgrader in the sandbox) of a cohort
named as the intake tests name theirs: Canvas file names (a late one, a re-submission, two
people called Smith Jo), Moodle folders and files with non-ASCII names, plus a flagged solution,
an unreadable file and a Canvas user the gradebook does not know. Its folder is exported into
gradebook and worksheet files written here in Canvas's and Moodle's published layouts, and the
tests read the results back as an LMS would: by user id, cell by cell, byte by byte.
"""

from __future__ import annotations

import csv
import io
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from chapters import REPO

from autograder import samples
from autograder.__main__ import main
from autograder.results.exercises import exercise_names
from autograder.results.export import export
from autograder.results.lms import Sheet, SheetError

CHAPTER, NOTEBOOK = samples.CHAPTER, samples.NOTEBOOK
FLAGGED = "import builtins\n"   # the static review flags it; the answers are right
COHORT = {
    "lovelaceada_1001_5001_parameters.ipynb": "solved",
    "turingalan_LATE_1002_5002_parameters-2.ipynb": "partial",
    "hoppergrace_late_1003_5003_parameters (1).ipynb": "blank",
    "smithjo_11_1_parameters.ipynb": "solved",
    "smithjo_12_2_parameters.ipynb": "partial",
    f"Zoë Ñúñez_123456_assignsubmission_file_/{NOTEBOOK}": "partial",
    f"Jürgen Groß_777_assignsubmission_file_{NOTEBOOK}": "solved",
    f'O\'Neil, Anne-Marie "Annie"_888_assignsubmission_file_/{NOTEBOOK}': "blank",
    "odd[name]*_13_3_parameters.ipynb": "partial",
    # Mallory's folder holds a file named like Bob's: it is Mallory's work (intake.py)
    f"Bob Good_2002_assignsubmission_file_/{NOTEBOOK}": "solved",
    f"Mallory Bad_3003_assignsubmission_file_/Bob Good_2002_assignsubmission_file_{NOTEBOOK}":
        "blank",
    "cheatcarl_1040_5040_parameters.ipynb": "flagged",
    "bernerslee_1015_5015_parameters.ipynb": "cut",
    "ghostgus_1050_5050_parameters.ipynb": "solved",
}
#: Canvas user id / Moodle participant id → the score that must land on that student's row.
SCORES = {"1001": 10, "1002": 6, "1003": 0, "11": 10, "12": 6, "13": 6,
          "123456": 6, "777": 10, "888": 0, "2002": 10, "3003": 0}
HELD = {"1040": "flagged for review: ", "1015": "unreadable: corrupt notebook"}


def _build(kind: str) -> bytes:
    if kind == "flagged":
        answers = samples.solutions()
        answers["linear_params"] = FLAGGED + answers["linear_params"]
        return samples.notebook(answers)
    if kind == "cut":
        return samples.notebook(samples.solutions())[:4000]
    answers = {"solved": samples.solutions, "partial": samples._partial, "blank": dict}[kind]()
    return samples.notebook(answers)


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("export")
    cohort = root / "cohort"
    for name, kind in COHORT.items():
        path = cohort / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_build(kind))
    out = root / "graded"
    run = subprocess.run([sys.executable, "-m", "autograder", "grade", str(cohort), "--out",
                          str(out), "--timeout", "30", "--jobs", "2"], cwd=REPO,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return out


# --- Canvas ------------------------------------------------------------------------------------

#: A Canvas gradebook export (UTF-8 with a byte-order mark, CRLF), ``{}`` where the chapter's
#: cell is: names with commas, quotes and non-ASCII letters, two students named "Smith, Jo", a
#: student who never submitted (with an earlier grade that must survive), a test student.
CANVAS = [
    "Student,ID,SIS User ID,SIS Login ID,Section,Parameters (48213),FLOPs (48214),"
    "Current Score,Unposted Current Score,Final Score,Unposted Final Score",
    "    Points Possible,,,,,{},10.00,(read only),(read only),(read only),(read only)",
    '"Lovelace, Ada",1001,S1001,ada@uni.example,"Section A, Mon",{},7.00,70.00,70.00,35.00,35.00',
    '"Turing, Alan ""the Prof""",1002,S1002,alan@uni.example,Section B,{},,0,0,0,0',
    '"Łukasiewicz-Hopper, Grace Zoë",1003,S1003,grace@uni.example,Section B,{},,,,,',
    '"Smith, Jo",11,S0011,jo1@uni.example,Section A,{},,,,,',
    '"Smith, Jo",12,S0012,jo2@uni.example,Section B,{},,,,,',
    '"Odd, [Name]*",13,S0013,odd@uni.example,Section B,{},,,,,',
    '"Never, Submitted",1099,S1099,ns@uni.example,Section A,{},,,,,',
    '"Carl, Cheat",1040,S1040,cc@uni.example,Section A,{},,,,,',
    '"Lee, Tim Berners-",1015,S1015,tbl@uni.example,Section A,{},,,,,',
    '"Student, Test",4242,,,Section A,{},,,,,',
]
BEFORE = {"points": "12.00", "1099": "7.50"}  # every other chapter cell starts empty


def _canvas_file(path: Path, cells: dict[str, str]) -> Path:
    keys = ["points", "1001", "1002", "1003", "11", "12", "13", "1099", "1040", "1015", "4242"]
    lines = [CANVAS[0]] + [line.format(cells.get(key, "")) for key, line in zip(keys, CANVAS[1:])]
    path.write_bytes(("\ufeff" + "\r\n".join(lines) + "\r\n").encode("utf-8"))
    return path


@pytest.mark.kernel
@pytest.mark.sandbox
@pytest.mark.cohort
def test_canvas_export_puts_each_score_on_its_students_row_and_changes_no_other_byte(
        graded, tmp_path, capsys):
    gradebook = _canvas_file(tmp_path / "gradebook.csv", BEFORE)
    code = main(["export", str(graded), "--chapter", CHAPTER, "--canvas", str(gradebook),
                 "--assignment", "Parameters", "--out", str(tmp_path / "out")])
    printed = capsys.readouterr().out
    assert code == 0, printed
    expected = {**BEFORE, **{uid: f"{score:g}" for uid, score in SCORES.items() if uid in
                             ("1001", "1002", "1003", "11", "12", "13")}}
    written = (tmp_path / "out" / "gradebook.csv").read_bytes()
    assert written == _canvas_file(tmp_path / "expected.csv", expected).read_bytes()
    assert "6 score(s) filled (6 changed); 4 student(s) of the gradebook got none" in printed
    assert "  ? ghostgus (1050): score 10, a Canvas submission, handed in as" in printed
    assert "  ? Jürgen Groß (777): score 10, a Moodle submission, handed in as" in printed
    for uid, reason in HELD.items():
        assert any(line.startswith("  ! ") and f"({uid}): {reason}" in line
                   for line in printed.splitlines()), (uid, printed)


@pytest.mark.kernel
@pytest.mark.sandbox
@pytest.mark.cohort
def test_canvas_scores_are_scaled_to_the_points_possible(graded, tmp_path):
    gradebook = _canvas_file(tmp_path / "gradebook.csv", {"points": "100.00"})
    report = export(graded, CHAPTER, tmp_path / "out", canvas=gradebook,
                    assignment="Parameters (")
    rows = _by(tmp_path / "out" / "gradebook.csv", "ID")
    assert {uid: rows[uid]["Parameters (48213)"] for uid in ("1001", "1002", "1003", "11")} == {
        "1001": "83.33", "1002": "50", "1003": "0", "11": "83.33"}
    assert "  scores scaled from 12 to the 100 points the LMS grades out of" in report.lines


@pytest.mark.kernel
@pytest.mark.sandbox
@pytest.mark.cohort
def test_an_export_reimported_by_the_next_export_changes_nothing(graded, tmp_path):
    first = export(graded, CHAPTER, tmp_path / "one", assignment="Parameters",
                   canvas=_canvas_file(tmp_path / "gradebook.csv", BEFORE))
    second = export(graded, CHAPTER, tmp_path / "two", assignment="Parameters",
                    canvas=tmp_path / "one" / "gradebook.csv")
    assert (tmp_path / "two" / "gradebook.csv").read_bytes() == \
        (tmp_path / "one" / "gradebook.csv").read_bytes()
    assert any("6 score(s) filled (6 changed)" in line for line in first.lines)
    assert any("6 score(s) filled (0 changed)" in line for line in second.lines)
    worksheet = _moodle_file(tmp_path / "worksheet.csv")
    export(graded, CHAPTER, tmp_path / "m1", moodle=worksheet)
    export(graded, CHAPTER, tmp_path / "m2", moodle=tmp_path / "m1" / "worksheet.csv")
    for name in ("worksheet.csv", f"{CHAPTER}_feedback.zip"):
        assert (tmp_path / "m2" / name).read_bytes() == (tmp_path / "m1" / name).read_bytes()


# --- Moodle ------------------------------------------------------------------------------------

MOODLE_HEADER = ["Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade",
                 "Grade can be changed", "Last modified (submission)", "Last modified (grade)",
                 "Feedback comments"]
#: participant id → full name, as Moodle's worksheet lists them (Zoë twice: two people; an
#: underscore, which Moodle's feedback upload would take for the end of the name).
PARTICIPANTS = {"123456": "Zoë Ñúñez", "777": "Jürgen Groß_Meier",
                "888": "O'Neil, Anne-Marie \"Annie\"", "999": "Zoë Ñúñez", "2002": "Bob Good",
                "3003": "Mallory Bad"}


def _moodle_file(path: Path, maximum: str = "12.00") -> Path:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(MOODLE_HEADER)
    for pid, name in PARTICIPANTS.items():
        writer.writerow([f"Participant {pid}", name, f"p{pid}@uni.example",
                         "Submitted for grading", "", maximum, "Yes",
                         "Monday, 3 March 2025, 10:00 AM", "-", ""])
    path.write_text(buffer.getvalue(), encoding="utf-8")
    return path


def _by(path: Path, key: str) -> dict[str, dict[str, str]]:
    with open(path, newline="", encoding="utf-8-sig") as handle:
        return {row[key].removeprefix("Participant "): row for row in csv.DictReader(handle)}


@pytest.mark.kernel
@pytest.mark.sandbox
@pytest.mark.cohort
def test_moodle_worksheet_gets_grades_comments_and_a_feedback_zip(graded, tmp_path):
    worksheet = _moodle_file(tmp_path / "worksheet.csv")
    report = export(graded, CHAPTER, tmp_path / "out", moodle=worksheet)
    rows = _by(tmp_path / "out" / "worksheet.csv", "Identifier")
    assert {pid: rows[pid]["Grade"] for pid in PARTICIPANTS} == {
        pid: f"{SCORES[pid]:.2f}" if pid in SCORES else "" for pid in PARTICIPANTS}
    assert rows["999"]["Grade"] == "" and rows["3003"]["Grade"] == "0.00"
    comment = rows["123456"]["Feedback comments"]
    assert comment.startswith("Score: 6 / 12 (autograded 6 / 10).<br>")
    assert ("Exercise 1 · linear_params: 0 / 2 — linear_params(128, 64): expected 8,256, got "
            "8,192.") in comment
    assert "Exercise 2 · conv2d_params: 2 / 2 — passed" in comment
    with zipfile.ZipFile(tmp_path / "out" / f"{CHAPTER}_feedback.zip") as archive:
        names = sorted(archive.namelist())
        page = archive.read("Zoë Ñúñez_123456_assignfeedback_file_/parameters.html")
        mallory = archive.read("Mallory Bad_3003_assignfeedback_file_/parameters.html")
    assert names == ["Bob Good_2002_assignfeedback_file_/parameters.html",
                     "Jürgen Groß Meier_777_assignfeedback_file_/parameters.html",
                     "Mallory Bad_3003_assignfeedback_file_/parameters.html",
                     "O'Neil, Anne-Marie Annie_888_assignfeedback_file_/parameters.html",
                     "Zoë Ñúñez_123456_assignfeedback_file_/parameters.html"]
    assert page == (graded / "feedback" / "Zoë Ñúñez" / CHAPTER / "parameters.html").read_bytes()
    assert mallory == (graded / "feedback" / "Mallory Bad" / CHAPTER / "parameters.html"
                       ).read_bytes()
    text = "\n".join(report.lines)
    assert "Moodle worksheet worksheet.csv: 5 score(s) filled (5 changed); 1 student(s)" in text
    assert "  ? lovelaceada (1001): score 10, a Canvas submission, handed in as" in text


@pytest.mark.kernel
@pytest.mark.sandbox
@pytest.mark.cohort
def test_moodle_scales_to_its_maximum_grade_with_its_decimal_comma(graded, tmp_path):
    worksheet = _moodle_file(tmp_path / "worksheet.csv", maximum="100,00")
    text = worksheet.read_text(encoding="utf-8")
    scale = 'p888@uni.example,Submitted for grading,,"100,00"'
    assert scale in text
    worksheet.write_text(text.replace(scale, scale.replace('"100,00"', "Pass/Fail")),
                         encoding="utf-8")
    report = export(graded, CHAPTER, tmp_path / "out", moodle=worksheet)
    rows = _by(tmp_path / "out" / "worksheet.csv", "Identifier")
    assert {pid: rows[pid]["Grade"] for pid in ("123456", "777", "888")} == {
        "123456": "50,00", "777": "83,33", "888": ""}
    assert ("  Zoë Ñúñez (123456): 6 / 12 scaled to the worksheet's Maximum Grade, 50.00 / 100"
            in report.lines)
    assert any(line.endswith("(888): not filled: the worksheet's Maximum Grade is 'Pass/Fail' "
                             "(a scale, not points; line 4): grade it in Moodle")
               for line in report.lines), report.lines


# --- what is never exported as a number --------------------------------------------------------

def _with_statuses(graded: Path, tmp_path: Path) -> Path:
    """A copy of the graded folder's grades.csv in which two graded rows became "not graded"
    and "timed out" (as a killed or overlong run leaves them), and one has an unreadable score."""
    copy = tmp_path / "graded"
    copy.mkdir()
    with open(graded / "grades.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        if row["lms_id"] in ("11", "12"):
            row.update(status="not graded" if row["lms_id"] == "11" else "timed out", score="",
                       auto_score="", notes="the grader failed on it: RuntimeError: boom")
        if row["lms_id"] == "1003":
            row["score"] = "lots"
    with open(copy / "grades.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return copy


@pytest.mark.parametrize("include_flagged", [False, True])
@pytest.mark.kernel
@pytest.mark.sandbox
@pytest.mark.cohort
def test_a_flagged_or_not_graded_row_never_carries_a_number(graded, tmp_path, include_flagged):
    copy = _with_statuses(graded, tmp_path)
    report = export(copy, CHAPTER, tmp_path / "plain", include_flagged=include_flagged)
    plain = _by(tmp_path / "plain" / f"{CHAPTER}_grades.csv", "lms_id")
    export(copy, CHAPTER, tmp_path / "canvas", assignment="Parameters",
           canvas=_canvas_file(tmp_path / "gradebook.csv", BEFORE),
           include_flagged=include_flagged)
    canvas = _by(tmp_path / "canvas" / "gradebook.csv", "ID")
    never = {"11": "not graded: the grader failed on it", "12": "timed out: the grader failed"}
    review = {} if include_flagged else HELD
    for uid, reason in {**never, **review}.items():
        assert plain[uid]["score"] == "" and plain[uid]["not_exported"].startswith(reason), uid
        assert canvas[uid]["Parameters (48213)"] == "", uid
    if include_flagged:
        assert (plain["1040"]["score"], canvas["1040"]["Parameters (48213)"]) == ("10", "10")
        assert (plain["1015"]["score"], canvas["1015"]["Parameters (48213)"]) == ("0", "0")
    assert plain["1001"]["score"] == "10" and "1003" not in plain   # the bad row alone is left
    assert any("the row of hoppergrace (line" in line and "'lots' is not a number" in line
               for line in report.lines)


@pytest.mark.kernel
@pytest.mark.sandbox
@pytest.mark.cohort
def test_the_plain_csv_lists_every_submission_with_formulas_neutralised(graded, tmp_path):
    copy = tmp_path / "graded"
    copy.mkdir()
    text = (graded / "grades.csv").read_text(encoding="utf-8")
    (copy / "grades.csv").write_text(text.replace("\nghostgus,", "\n'=HYPERLINK(1),"),
                                     encoding="utf-8")
    export(copy, CHAPTER, tmp_path / "out")
    rows = _by(tmp_path / "out" / f"{CHAPTER}_grades.csv", "lms_id")
    assert rows["1050"]["student"] == "'=HYPERLINK(1)"
    assert (rows["1002"]["score"], rows["1002"]["max_score"], rows["1002"]["late"]) == (
        "6", "12", "yes")
    assert rows["1040"]["flagged"].startswith("cell linear_params, line 1: imports builtins")
    assert len(rows) == len(COHORT)


# --- the feedback page's summary ---------------------------------------------------------------

@pytest.mark.kernel
@pytest.mark.sandbox
@pytest.mark.cohort
def test_the_feedback_summary_names_every_exercise_with_the_graders_message(graded):
    page = (graded / "feedback" / "turingalan" / CHAPTER / "parameters.html").read_text(
        encoding="utf-8")
    toc = page[page.index('<div id="toc">'):page.index("</ol>")]
    source = __import__("json").loads((samples.course.SOLUTIONS / CHAPTER / NOTEBOOK).read_text())
    names = exercise_names(source)
    assert set(names) == {"test_linear_params", "test_conv2d_params", "test_attention_params",
                          "test_count_model_parameters", "test_parameter_memory_bytes",
                          "reflection_embedding_share"}
    for name in names.values():
        assert f">{name}</a>" in toc, name
    assert "Test cell" not in toc
    assert ('Exercise 1 · linear_params</a>: 0 / 2 — linear_params(128, 64): expected 8,256, got '
            "8,192.") in toc
    assert "Exercise 5 · parameter_memory_bytes</a>: 0 / 2 — GPT-2 small in float32" in toc
    assert "Exercise 3 · attention_params</a>: 2 / 2 — passed" in toc
    assert "1.8 Reflection</a> (written answer): awaiting a manual grade / 2" in toc


# --- bad input -----------------------------------------------------------------------------------

@pytest.mark.kernel
@pytest.mark.sandbox
@pytest.mark.cohort
def test_bad_lms_files_are_refused_naming_the_file_and_bad_rows_are_listed(graded, tmp_path,
                                                                           capsys):
    wrong = tmp_path / "roster.csv"
    wrong.write_text("Name,Email\nAda,ada@uni.example\n", encoding="utf-8")
    assert main(["export", str(graded), "--chapter", CHAPTER, "--canvas", str(wrong),
                 "--assignment", "Parameters", "--out", str(tmp_path / "out")]) == 2
    assert f"{wrong}: not a Canvas gradebook export: no 'Student', 'ID' column" in \
        capsys.readouterr().err
    with pytest.raises(SheetError, match="no assignment column starts with 'Lab 9'; its "
                                         r"assignments are: Parameters \(48213\); FLOPs"):
        export(graded, CHAPTER, tmp_path / "out", assignment="Lab 9",
               canvas=_canvas_file(tmp_path / "gradebook.csv", BEFORE))
    with pytest.raises(ValueError, match="no submission of 09_nothing; it holds 01_parameters"):
        export(graded, "09_nothing", tmp_path / "out")
    worksheet = _moodle_file(tmp_path / "worksheet.csv")
    worksheet.write_text(worksheet.read_text(encoding="utf-8").replace(
        "Participant 888", "Teilnehmer/in 888"), encoding="utf-8")
    report = export(graded, CHAPTER, tmp_path / "out", moodle=worksheet)
    assert ("  - worksheet.csv: line 4: Identifier 'Teilnehmer/in 888' is not 'Participant N'; "
            "left as it was") in report.lines
    assert _by(tmp_path / "out" / "worksheet.csv", "Identifier")["777"]["Grade"] == "10.00"


def test_a_sheet_is_written_back_byte_for_byte(tmp_path):
    raw = ('\ufeffa,"b, ""c""",ü\r\n"multi\r\nline",,\r\n,\n"x"\rlast,"",')
    path = tmp_path / "odd.csv"
    path.write_bytes(raw.encode("utf-8"))
    sheet = Sheet.read(path)
    assert sheet.text() == raw
    assert [sheet.value(0, i) for i in range(3)] == ["a", 'b, "c"', "ü"]
    assert sheet.value(1, 0) == "multi\r\nline" and len(sheet.records) == 5
    sheet.set(4, 1, 'say "hi"')
    assert sheet.text().endswith('last,"say ""hi""",')
    (tmp_path / "bad.csv").write_bytes(b'a,"b\nc,d\n')
    with pytest.raises(SheetError, match="bad.csv: line 1: a quoted cell is never closed"):
        Sheet.read(tmp_path / "bad.csv")
    (tmp_path / "latin.csv").write_bytes("Groß".encode("latin-1"))
    with pytest.raises(SheetError, match="latin.csv: not UTF-8 text"):
        Sheet.read(tmp_path / "latin.csv")


def test_the_export_commands_of_the_instructors_page_are_accepted_as_written():
    import shlex

    from autograder.__main__ import parser

    page = (REPO / "book" / "instructors.md").read_text(encoding="utf-8")
    commands = [line for line in page.splitlines()
                if line.startswith(".venv/bin/python -m autograder export ")]
    assert len(commands) == 2   # Canvas and Moodle, step by step
    for line in commands:
        args = parser().parse_args(shlex.split(line)[3:])
        assert (args.command, args.chapter) == ("export", CHAPTER)
        assert (args.canvas is None) != (args.moodle is None)
        assert args.canvas is None or args.assignment == "Parameters"
