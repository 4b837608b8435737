"""Intake (LMS names, folder layouts, zips, content recognition) and notebook repair, without
running nbgrader: every case is a file built from the real chapter-01 notebooks."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import pytest

from autograder import samples
from autograder.grade import Settings
from autograder.intake.collect import collect, read_notebook
from autograder.intake.repair import repair

CHAPTER, NOTEBOOK = samples.CHAPTER, samples.NOTEBOOK


def _write(root: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def _blank() -> bytes:
    return samples.notebook({})


def _mapped(intake) -> dict[tuple[str, str, str], object]:
    return {(s.student, s.assignment, s.notebook): s for s in intake.submissions}


def test_canvas_names_give_student_lms_id_lateness_and_assignment(tmp_path):
    root = _write(tmp_path / "in", {
        "lovelaceada_1001_5001_parameters.ipynb": _blank(),
        "turingalan_LATE_1002_5002_parameters-2.ipynb": _blank(),
        "hoppergrace_late_1003_5003_parameters (1).ipynb": _blank()})
    intake = collect(root, tmp_path / "scratch")
    subs = {s.student: s for s in intake.submissions}
    assert intake.problems == []
    assert sorted(subs) == ["hoppergrace", "lovelaceada", "turingalan"]
    assert {s.assignment for s in subs.values()} == {CHAPTER}
    assert {s.notebook for s in subs.values()} == {NOTEBOOK}
    assert (subs["lovelaceada"].lms_id, subs["lovelaceada"].late) == ("1001", False)
    assert (subs["turingalan"].lms_id, subs["turingalan"].late) == ("1002", True)
    assert subs["hoppergrace"].late


def test_folder_layouts_and_moodle_folders(tmp_path):
    root = _write(tmp_path / "in", {
        f"alice/{CHAPTER}/{NOTEBOOK}": _blank(),
        f"{CHAPTER}/bob/{NOTEBOOK}": _blank(),
        f"carol/{NOTEBOOK}": _blank(),
        f"Zoë Ñúñez_123456_assignsubmission_file_/{NOTEBOOK}": _blank(),
        f"Jürgen Groß_777_assignsubmission_file_{NOTEBOOK}": _blank()})
    intake = collect(root, tmp_path / "scratch")
    assert intake.problems == []
    subs = _mapped(intake)
    assert sorted(s for s, _, _ in subs) == ["Jürgen Groß", "Zoë Ñúñez", "alice", "bob", "carol"]
    assert subs["Zoë Ñúñez", CHAPTER, NOTEBOOK].lms_id == "123456"
    assert subs["Jürgen Groß", CHAPTER, NOTEBOOK].lms_id == "777"


def test_a_renamed_notebook_is_recognised_by_its_graded_cells(tmp_path):
    root = _write(tmp_path / "in", {
        "engelbartdoug_1018_5018_Untitled1.ipynb": _blank(),
        f"erin/{CHAPTER}/my work (final).ipynb": _blank()})
    intake = collect(root, tmp_path / "scratch")
    subs = {s.student: s for s in intake.submissions}
    assert intake.problems == []
    assert (subs["engelbartdoug"].assignment, subs["engelbartdoug"].notebook) == (CHAPTER,
                                                                                  NOTEBOOK)
    assert subs["engelbartdoug"].notes == [
        f"handed in as 'Untitled1.ipynb'; recognised as {CHAPTER}/{NOTEBOOK} by its graded cells"]
    assert subs["erin"].notebook == NOTEBOOK


def test_the_cells_outrank_the_file_name(tmp_path):
    other = next((s for s in samples.course.notebook_specs() if s.assignment != CHAPTER), None)
    if other is None:
        pytest.skip("needs a second chapter")
    root = _write(tmp_path / "in", {f"frank/{other.name}": _blank()})
    (sub,) = collect(root, tmp_path / "scratch").submissions
    assert (sub.assignment, sub.notebook) == (CHAPTER, NOTEBOOK)
    assert "graded as the latter" in sub.notes[0]


def test_whatever_cannot_be_mapped_is_listed_with_the_reason(tmp_path):
    root = _write(tmp_path / "in", {
        NOTEBOOK: _blank(),
        "wozniaksteve_1021_5021_report.pdf": b"%PDF-1.4\n",
        "wozniaksteve_1021_5021_scratch.ipynb": json.dumps({"cells": [], "nbformat": 4,
                                                            "metadata": {}}).encode(),
        "__MACOSX/._parameters.ipynb": b"\0\0", ".DS_Store": b"\0"})
    intake = collect(root, tmp_path / "scratch")
    assert intake.submissions == []
    assert sorted(intake.problems) == [
        f"{NOTEBOOK}: cannot tell whose {CHAPTER} work this is: put it in a folder named after "
        "the student or keep the LMS file name; not graded",
        "wozniaksteve_1021_5021_report.pdf: not a notebook: a .pdf file; its name matches no "
        "assignment, so it was not graded",
        "wozniaksteve_1021_5021_scratch.ipynb: a notebook with none of the course's graded cells; "
        "its name matches no assignment, so it was not graded"]


def test_unreadable_files_named_like_a_notebook_are_kept_as_submissions(tmp_path):
    good = _blank()
    root = _write(tmp_path / "in", {
        "a_1_1_parameters.ipynb": good[:3000], "b_2_2_parameters.ipynb": b"",
        "c_3_3_parameters.ipynb": b"def f():\n    return 1\n",
        "d_4_4_parameters.ipynb": b"%PDF-1.7\n\xe2\xe3",
        "e_5_5_parameters.ipynb": b'{"hello": 1}'})
    subs = {s.student: s.unreadable for s in collect(root, tmp_path / "s").submissions}
    assert subs["a"].startswith("corrupt notebook: invalid JSON (")
    assert subs["a"].endswith("the file was probably cut short or edited outside Jupyter")
    assert subs["b"] == "the file is empty"
    assert subs["c"] == "not a notebook: plain text starting 'def f():'"
    assert subs["d"] == "not a notebook: the file is a PDF document"
    assert subs["e"] == "not a notebook: JSON without a list of cells"


def test_the_newest_hand_in_is_graded_and_the_others_listed(tmp_path):
    root = _write(tmp_path / "in", {
        "turingalan_1002_5002_parameters.ipynb": _blank(),
        "turingalan_1002_5102_parameters-1.ipynb": _blank(),
        "turingalan_1002_5203_parameters-2.ipynb": b"",  # newest, but not a notebook
        f"gina/{CHAPTER}/{NOTEBOOK}": _blank(), f"gina/{CHAPTER}/parameters-1.ipynb": _blank()})
    intake = collect(root, tmp_path / "scratch")
    kept = {s.student: s.origin for s in intake.submissions}
    assert kept == {"turingalan": "turingalan_1002_5102_parameters-1.ipynb",
                    "gina": f"gina/{CHAPTER}/parameters-1.ipynb"}
    assert sorted(p.split(":")[0] for p in intake.problems) == [
        f"gina/{CHAPTER}/{NOTEBOOK}", "turingalan_1002_5002_parameters.ipynb",
        "turingalan_1002_5203_parameters-2.ipynb"]
    assert all("superseded by" in p for p in intake.problems)


def test_people_sharing_a_name_are_kept_apart_by_lms_id(tmp_path):
    root = _write(tmp_path / "in", {"smithjo_11_1_parameters.ipynb": _blank(),
                                    "smithjo_12_2_parameters.ipynb": _blank(),
                                    "odd[name]*_13_3_parameters.ipynb": _blank()})
    students = sorted(s.student for s in collect(root, tmp_path / "s").submissions)
    assert students == ["odd_name", "smithjo_11", "smithjo_12"]


LEGACY = "X" * len("Zoë Ñúñez".encode())


def test_a_zip_maps_like_the_folder_and_refuses_unsafe_paths(tmp_path):
    files = {"lovelaceada_1001_5001_parameters.ipynb": _blank(),
             f"Zoë Ñúñez_2001_assignsubmission_file_/{NOTEBOOK}": _blank(),
             f"wrapper/alice/{CHAPTER}/{NOTEBOOK}": _blank()}
    archive = tmp_path / "cohort.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for name, data in files.items():
            zipped.writestr(name, data)
        zipped.writestr("../escape.ipynb", _blank())
        zipped.writestr(f"{LEGACY}_2001_assignsubmission_file_/notes.txt", b"hello")
    # Tools that do not set the zip's UTF-8 flag still write UTF-8 bytes: patch them in.
    archive.write_bytes(archive.read_bytes().replace(LEGACY.encode(), "Zoë Ñúñez".encode()))
    intake = collect(archive, tmp_path / "scratch", skip=tmp_path)  # unpacks inside skip
    assert sorted(s.student for s in intake.submissions) == ["Zoë Ñúñez", "alice", "lovelaceada"]
    assert {s.origin for s in intake.submissions} == {f"cohort.zip:{n}" for n in files}
    assert sorted(intake.problems) == [
        "cohort.zip:../escape.ipynb: unsafe path in the zip; not unpacked",
        "cohort.zip:Zoë Ñúñez_2001_assignsubmission_file_/notes.txt: not a notebook: a .txt "
        "file; its name matches no assignment, so it was not graded"]
    assert not (tmp_path / "escape.ipynb").exists()


def test_the_graders_own_output_inside_the_submissions_is_skipped(tmp_path):
    root = _write(tmp_path / "in", {f"alice/{CHAPTER}/{NOTEBOOK}": _blank(),
                                    f"graded/release/{CHAPTER}/{NOTEBOOK}": _blank(),
                                    f"graded/autograded/alice/{CHAPTER}/{NOTEBOOK}": _blank()})
    intake = collect(root, tmp_path / "scratch", skip=root / "graded")
    assert [(s.student, s.origin) for s in intake.submissions] == [
        ("alice", f"alice/{CHAPTER}/{NOTEBOOK}")]
    assert intake.problems == []


@pytest.mark.parametrize("limits, message", [
    (dict(timeout=0), "--timeout must be at least 1 s, got 0"),
    (dict(memory_mb=100), "--memory must be 0 (no limit) or at least 384 MB"),
    (dict(memory_mb=-1), "--memory must be 0 (no limit) or at least 384 MB")])
def test_limits_that_cannot_work_are_refused(limits, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        Settings(**limits)


def test_a_missing_submissions_path_names_itself(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        collect(tmp_path / "nowhere", tmp_path / "scratch")
    (tmp_path / "x.ipynb").write_bytes(b"{}")
    with pytest.raises(ValueError, match="must be a folder or a zip file"):
        collect(tmp_path / "x.ipynb", tmp_path / "scratch")


# --- repair: the notebook nbgrader gets ------------------------------------------------------

def _cells(data: bytes) -> list[dict]:
    return json.loads(data)["cells"]


def _ids(cells: list[dict]) -> list[str | None]:
    return [c["metadata"].get("nbgrader", {}).get("grade_id", c.get("id")) for c in cells]


def test_an_untouched_notebook_and_the_instructor_copy_need_no_repair():
    release = samples.release()
    source = json.loads((samples.course.SOLUTIONS / CHAPTER / NOTEBOOK).read_text())
    fixed, notes = repair(release, release, source)
    assert (fixed, notes) == (release, [])
    fixed, notes = repair(source, release, source)
    assert notes == []
    assert _ids(fixed["cells"]) == _ids(source["cells"])


def test_edited_and_deleted_test_cells_are_restored_and_reported():
    release = samples.release()
    submitted = json.loads(samples.notebook({}, samples._tamper))
    fixed, notes = repair(submitted, release)
    assert notes == [
        "test cell test_linear_params had been edited: the original (with its hidden tests) was "
        "restored from the gradebook before grading",
        "test cell test_conv2d_params had been deleted: it was restored from the gradebook and "
        "graded"]
    assert _ids(fixed["cells"]) == _ids(release["cells"])
    assert [c["source"] for c in fixed["cells"]] == [c["source"] for c in release["cells"]]


def test_tampered_test_metadata_is_put_back():
    release = samples.release()
    submitted = json.loads(samples.notebook({}))
    test = next(c for c in submitted["cells"] if _ids([c]) == ["test_linear_params"])
    test["metadata"]["nbgrader"].update(points=100, grade=False)
    fixed, notes = repair(submitted, release)
    assert notes == []  # the source is intact; only the metadata changed
    assert fixed["cells"] == release["cells"]


def test_a_deleted_answer_is_reported_and_a_deleted_written_answer_put_back_empty():
    release = samples.release()

    def delete(cells: list[dict]) -> None:
        samples._delete_answer(cells)
        del cells[samples._cell(cells, "reflection_embedding_share")]

    fixed, notes = repair(json.loads(samples.notebook({}, delete)), release)
    assert notes == [
        "answer cell attention_params had been deleted: its tests ran against whatever the rest "
        "of the notebook defines",
        "written answer cell reflection_embedding_share had been deleted: an empty one was put "
        "back, which scores 0"]
    assert _ids(fixed["cells"]) == [i for i in _ids(release["cells"]) if i != "attention_params"]


def test_read_notebook_accepts_a_real_notebook(tmp_path):
    path = tmp_path / "n.ipynb"
    path.write_bytes(samples.notebook(samples.solutions()))
    notebook, why = read_notebook(path)
    assert why is None and len(notebook["cells"]) == len(samples.release()["cells"])


# --- hostile and damaged intake (issue 10, item 9) --------------------------------------------

def test_a_moodle_folder_owns_its_files_whatever_they_are_called(tmp_path):
    bob = "Bob Good_2002_assignsubmission_file_"
    root = _write(tmp_path / "in", {
        f"{bob}/{NOTEBOOK}": _blank(),
        f"Mallory Bad_3003_assignsubmission_file_/{bob}{NOTEBOOK}": _blank(),
        f"Mallory Bad_3003_assignsubmission_file_/{bob}/{NOTEBOOK}": _blank()})
    intake = collect(root, tmp_path / "scratch")
    subs = {s.student: s for s in intake.submissions}
    assert sorted(subs) == ["Bob Good", "Mallory Bad"]
    assert (subs["Bob Good"].origin, subs["Bob Good"].lms_id) == (f"{bob}/{NOTEBOOK}", "2002")
    assert subs["Mallory Bad"].lms_id == "3003"
    mismatch = ("named like the submission of Bob Good (2002), but it lies in the Moodle folder "
                "of Mallory Bad (3003), so it was graded as theirs")
    assert mismatch in subs["Mallory Bad"].notes
    (superseded,) = intake.problems  # Mallory's two files: one graded, one listed
    assert superseded.startswith("Mallory Bad_3003_assignsubmission_file_/")
    assert "superseded by Mallory Bad_3003_assignsubmission_file_/" in superseded


def _hostile_zip(path: Path, good: dict[str, bytes]) -> Path:
    """``good`` members, then one with a bad CRC, a 300-byte name, a symbolic link and an
    absolute path."""
    marker = b"DAMAGED-" * 64
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zipped:
        for name, data in good.items():
            zipped.writestr(name, data)
        zipped.writestr("crc_1_1_parameters.ipynb", marker)
        zipped.writestr("x" * 300 + "/parameters.ipynb", _blank())
        link = zipfile.ZipInfo("link_2_2_parameters.ipynb")
        link.external_attr = (0o120777) << 16
        zipped.writestr(link, "/etc/passwd")
        zipped.writestr("/abs_3_3_parameters.ipynb", _blank())
    data = path.read_bytes()
    at = data.index(marker) + 10
    path.write_bytes(data[:at] + b"!" + data[at + 1:])  # the stored CRC no longer matches
    return path


HOSTILE_PROBLEMS = [
    "cohort.zip:/abs_3_3_parameters.ipynb: unsafe path in the zip; not unpacked",
    "cohort.zip:crc_1_1_parameters.ipynb: damaged in the zip (Bad CRC-32 for file "
    "'crc_1_1_parameters.ipynb'); not unpacked",
    "cohort.zip:link_2_2_parameters.ipynb: a symbolic link in the zip; not unpacked",
    f"cohort.zip:{'x' * 300}/parameters.ipynb: a name in its path is 300 bytes long (at most "
    "255); not unpacked"]


def test_damaged_and_unsafe_zip_members_are_reported_and_the_rest_unpacked(tmp_path):
    archive = _hostile_zip(tmp_path / "cohort.zip", {"ada_1_9_parameters.ipynb": _blank()})
    intake = collect(archive, tmp_path / "scratch")
    assert [s.student for s in intake.submissions] == ["ada"]
    assert sorted(intake.problems) == HOSTILE_PROBLEMS
    unpacked = sorted(p.name for p in (tmp_path / "scratch" / "unzipped").rglob("*"))
    assert unpacked == ["ada_1_9_parameters.ipynb"]
