"""Map a cohort's files to students and assignments.

SUBMISSIONS is a folder or a zip file holding any of these layouts (mixed is fine):

- ``student/assignment/notebook.ipynb`` (or ``assignment/student/notebook.ipynb``, or
  ``student/notebook.ipynb``);
- Canvas bulk downloads ``name_userid_submissionid_original.ipynb``, with ``_LATE`` after the
  name for late work and ``-1``, ``-2`` appended to the original name of re-submitted files;
- Moodle downloads ``Full Name_123456_assignsubmission_file_/original.ipynb`` (or the same
  prefix on a flat file name).

The assignment of a file comes, in order of trust, from its cells' nbgrader grade ids (a renamed
notebook is still recognised), then from a folder named after the assignment, then from its file
name (``parameters.ipynb``, ``parameters-2.ipynb``, ``parameters (1).ipynb`` → ``01_parameters``).
When one student handed in the same notebook several times, the newest is graded and the others
are listed. Every file that cannot be mapped is listed with the reason; nothing is dropped
silently except operating-system litter (``__MACOSX``, ``.DS_Store``, checkpoints).

A Moodle folder owns every file in it, whatever the file is called: a file named like another
student's submission counts as the folder owner's, and the mismatch is noted. A zip is unpacked
member by member: a damaged member (bad CRC, unreadable compression, encrypted) or an unsafe one
(absolute path, ``..``, a path part over 255 bytes, a symbolic link) is reported and skipped,
and the rest of the cohort is graded. The unpacked copy lives in SCRATCH/unzipped, which
:func:`unpacking` removes when grading ends, however it ends.
"""

from __future__ import annotations

import json
import re
import shutil
import stat
import zipfile
import zlib
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Iterator

from ..cells import grade_id
from ..course import NotebookSpec, notebook_specs

LITTER = {"__MACOSX", ".DS_Store", ".ipynb_checkpoints", "Thumbs.db", "desktop.ini", "__pycache__"}
CANVAS = re.compile(r"^(?P<name>[^_]+?)(?P<late>_late)?_(?P<uid>\d+)_(?P<sid>\d+)_(?P<orig>.+)$",
                    re.IGNORECASE)
MOODLE_DIR = re.compile(r"^(?P<name>.+?)_(?P<uid>\d+)_assignsubmission_(?P<plugin>[a-z]+)_?$",
                        re.IGNORECASE)
MOODLE_FILE = re.compile(r"^(?P<name>.+?)_(?P<uid>\d+)_assignsubmission_file_(?P<orig>.+)$",
                         re.IGNORECASE)
COPY_SUFFIX = re.compile(r"(?:-(?P<dash>\d+)|\s*\((?P<paren>\d+)\)|[-\s]copy(?P<copy>\d*))$",
                         re.IGNORECASE)
MAX_FILE_BYTES = 100 * 2**20
MAX_ZIP_BYTES = 4 * 2**30
MAX_NAME_BYTES = 255  # the longest file or folder name Linux file systems accept
#: Levels of JSON nesting a notebook may have (a real one has about 10, widget state included);
#: deeper ones would exhaust Python's recursion in nbformat, nbgrader or json itself.
MAX_DEPTH = 100


@dataclass
class Submission:
    """One notebook file of one student for one assignment (``notebook`` is the released name)."""

    student: str
    assignment: str
    notebook: str
    path: Path
    origin: str
    lms_id: str = ""
    name: str = ""
    late: bool = False
    unreadable: str | None = None
    notes: list[str] = field(default_factory=list)
    rank: tuple = ()


@dataclass
class Intake:
    """What a folder or zip of submissions holds: mapped files, and everything else with why."""

    submissions: list[Submission]
    problems: list[str]


@dataclass
class _Owner:
    name: str
    lms_id: str = ""
    order: int = 0
    late: bool = False
    original: str = ""
    note: str = ""


def collect(source: Path, scratch: Path, skip: Path | None = None) -> Intake:
    """Map every file under ``source`` (a folder, or a zip unpacked into ``scratch``), except
    those under ``skip`` (the grader's own output folder, should it lie inside ``source``)."""
    source = Path(source)
    problems: list[str] = []
    if source.is_file():
        if not zipfile.is_zipfile(source):
            raise ValueError(f"{source}: SUBMISSIONS must be a folder or a zip file")
        root = Path(scratch) / "unzipped"
        problems += unzip(source, root)
        label, skip = source.name + ":", None
    elif source.is_dir():
        root, label = source, ""
    else:
        raise FileNotFoundError(f"{source}: no such folder or zip file")
    specs = notebook_specs()
    found = []
    skip = Path(skip).resolve() if skip else None
    for path in sorted(p for p in root.rglob("*") if p.is_file() or p.is_symlink()):
        if skip and path.resolve().is_relative_to(skip):
            continue
        parts = path.relative_to(root).parts
        if any(part in LITTER or part.startswith("._") for part in parts):
            continue
        origin = label + "/".join(parts)
        try:
            submission, why = _map_file(path, parts, specs)
        except Exception as error:  # noqa: BLE001 - one file's trouble, never the cohort's
            submission, why = None, f"could not be read ({type(error).__name__}: {error}); " \
                "not graded"
        if submission is None:
            problems.append(f"{origin}: {why}")
        else:
            submission.origin = origin
            found.append(submission)
    _disambiguate_students(found)
    kept, superseded = _keep_newest(found)
    return Intake(kept, problems + superseded)


@contextmanager
def unpacking(scratch: Path) -> Iterator[None]:
    """Remove what :func:`collect` unpacked into ``scratch`` when the block ends, on success,
    error or interrupt alike (a re-run unpacks again)."""
    try:
        yield
    finally:
        shutil.rmtree(Path(scratch) / "unzipped", ignore_errors=True)


def unzip(archive: Path, dest: Path) -> list[str]:
    """Unpack ``archive`` into ``dest`` (emptied first) member by member; return a problem for
    every member left out (unsafe, oversized or damaged), the others are unpacked."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    problems, total = [], 0
    try:
        zipped = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as err:
        raise ValueError(f"{archive}: the zip cannot be read ({err})") from None
    with zipped:
        for info in zipped.infolist():
            name = _member_name(info)
            parts = PurePosixPath(name.replace("\\", "/")).parts
            if info.is_dir() or not parts:
                continue
            where = f"{archive.name}:{name}"
            unsafe = _unsafe(info, name, parts)
            if unsafe:
                problems.append(f"{where}: {unsafe}; not unpacked")
                continue
            total += info.file_size
            if info.file_size > MAX_FILE_BYTES or total > MAX_ZIP_BYTES:
                problems.append(f"{where}: {info.file_size / 2**20:.0f} MB unpacked is too "
                                "large; not unpacked")
                continue
            damage = _extract(zipped, info, dest.joinpath(*parts))
            if damage:
                problems.append(f"{where}: {damage}; not unpacked")
    return problems


def _unsafe(info: zipfile.ZipInfo, name: str, parts: tuple[str, ...]) -> str | None:
    """Why a member must not be written to disk, or None."""
    if PurePosixPath(name).is_absolute() or name.startswith("\\") or ".." in parts:
        return "unsafe path in the zip"
    if stat.S_ISLNK(info.external_attr >> 16):
        return "a symbolic link in the zip"
    longest = max(len(part.encode("utf-8", "surrogateescape")) for part in parts)
    if longest > MAX_NAME_BYTES:
        return f"a name in its path is {longest} bytes long (at most {MAX_NAME_BYTES})"
    if "\0" in name:
        return "unsafe path in the zip (a NUL character in it)"
    return None


def _extract(zipped: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path) -> str | None:
    """Write one member to ``target``; on failure remove what was written and say why."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with zipped.open(info) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
        return None
    except (zipfile.BadZipFile, zlib.error, EOFError) as err:
        why = f"damaged in the zip ({err})"
    except NotImplementedError as err:
        why = f"compressed in a way this grader cannot read ({err})"
    except RuntimeError as err:  # zipfile's "File ... is encrypted, password required"
        why = f"cannot be unpacked ({err})"
    except OSError as err:
        why = f"cannot be unpacked ({err.strerror or err})"
    if target.is_file():
        target.unlink()
    return why


def _member_name(info: zipfile.ZipInfo) -> str:
    """Zip names without the UTF-8 flag are cp437 by the spec, but most tools write UTF-8."""
    if info.flag_bits & 0x800:
        return info.filename
    try:
        return info.filename.encode("cp437").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return info.filename


def read_notebook(path: Path) -> tuple[dict | None, str | None]:
    """The notebook JSON of ``path``, or None and a sentence saying why it is not a notebook."""
    if path.is_symlink():
        return None, "not a notebook: a symbolic link"
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        return None, f"too large to be a notebook ({size / 2**20:.0f} MB)"
    data = path.read_bytes()
    if not data.strip():
        return None, "the file is empty" + ("" if not data else " (only whitespace)")
    kind = _binary_kind(data)
    if kind:
        return None, f"not a notebook: the file is {kind}"
    text = data.decode("utf-8-sig")
    try:
        notebook = json.loads(text)
    except RecursionError:
        return None, f"corrupt notebook: its JSON is nested deeper than {MAX_DEPTH} levels"
    except json.JSONDecodeError as err:
        if text.lstrip()[:1] in "{[":
            return None, (f"corrupt notebook: invalid JSON ({err.msg}: line {err.lineno}, "
                          f"column {err.colno}); the file was probably cut short or edited "
                          "outside Jupyter")
        first = text.strip().splitlines()[0][:60]
        return None, f"not a notebook: plain text starting {first!r}"
    if _deeper_than(notebook, MAX_DEPTH):
        return None, f"corrupt notebook: its JSON is nested deeper than {MAX_DEPTH} levels"
    return _as_notebook(notebook)


def _deeper_than(data: object, limit: int) -> bool:
    """Whether JSON ``data`` nests lists and objects more than ``limit`` levels deep (walked
    without recursion, so no depth can crash the walk itself)."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else \
            value if isinstance(value, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 > limit:
                    return True
                stack.append((child, depth + 1))
    return False


def _binary_kind(data: bytes) -> str | None:
    magic = {b"%PDF": "a PDF document", b"\x89PNG": "a PNG image", b"\xff\xd8\xff": "a JPEG image",
             b"PK\x03\x04": "a zip archive (a .zip, .docx or similar)"}
    for prefix, kind in magic.items():
        if data.startswith(prefix):
            return kind
    try:
        data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return "binary data, not text"
    return None


def _as_notebook(data: object) -> tuple[dict | None, str | None]:
    if isinstance(data, dict) and "worksheets" in data:
        import nbformat

        try:
            return dict(nbformat.reads(json.dumps(data), as_version=4)), None
        except Exception as err:  # noqa: BLE001 - any failure means "not convertible"
            return None, f"not a notebook: an nbformat 3 file that cannot be converted ({err})"
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        return None, "not a notebook: JSON without a list of cells"
    if not all(isinstance(c, dict) and c.get("cell_type") for c in data["cells"]):
        return None, "corrupt notebook: a cell without a cell type"
    return data, None


def grade_ids(notebook: dict) -> set[str]:
    """The nbgrader grade ids present in a notebook's cells."""
    ids = set()
    for cell in notebook.get("cells", []):
        found = grade_id(cell)
        if found:
            ids.add(found)
    return ids


def _map_file(path: Path, parts: tuple[str, ...],
              specs: list[NotebookSpec]) -> tuple[Submission | None, str]:
    owner = _owner(parts, {s.assignment for s in specs})
    is_notebook = path.suffix.lower() == ".ipynb"
    notebook, unreadable = read_notebook(path) if is_notebook else (None, None)
    if not is_notebook:
        unreadable = f"not a notebook: a {path.suffix or 'suffix-less'} file"
    spec, notes = _identify(notebook, parts, owner, specs)
    if spec is None:
        why = unreadable or "a notebook with none of the course's graded cells"
        return None, f"{why}; its name matches no assignment, so it was not graded"
    if owner is None:
        return None, (f"cannot tell whose {spec.assignment} work this is: put it in a folder "
                      "named after the student or keep the LMS file name; not graded")
    order = _resubmission(owner.original or parts[-1])
    return Submission(
        student=owner.name, assignment=spec.assignment, notebook=spec.name, path=path,
        origin="", lms_id=owner.lms_id, name=owner.name, late=owner.late,
        unreadable=unreadable, notes=[owner.note, *notes] if owner.note else notes,
        rank=(unreadable is None, owner.order, order, "/".join(parts))), ""


def _owner(parts: tuple[str, ...], assignment_ids: set[str]) -> _Owner | None:
    """Whose file this is: a Moodle folder (whatever the file inside is called), else an LMS
    file name, else a student folder."""
    folders = list(parts[:-1])
    moodle = [found for found in map(MOODLE_DIR.match, folders) if found]
    named = next(filter(None, (pattern.match(parts[-1]) for pattern in (CANVAS, MOODLE_FILE))),
                 None)
    if moodle:
        owner = _Owner(moodle[0]["name"], moodle[0]["uid"],
                       original=named["orig"] if named else "")
        others = [f for f in [*moodle[1:], named] if f and f["uid"] != owner.lms_id]
        if others:
            owner.note = (f"named like the submission of {others[0]['name']} "
                          f"({others[0]['uid']}), but it lies in the Moodle folder of "
                          f"{owner.name} ({owner.lms_id}), so it was graded as theirs")
        return owner
    if named:
        return _Owner(named["name"], named["uid"], int(named.groupdict().get("sid") or 0),
                      bool(named.groupdict().get("late")), named["orig"])
    at = [i for i, folder in enumerate(folders) if folder in assignment_ids]
    if at:
        i = at[0]
        student = folders[i - 1] if i > 0 else (folders[i + 1] if i + 1 < len(folders) else "")
        return _Owner(student) if student else None
    return _Owner(folders[-1]) if folders else None


def _identify(notebook: dict | None, parts: tuple[str, ...], owner: _Owner | None,
              specs: list[NotebookSpec]) -> tuple[NotebookSpec | None, list[str]]:
    """The released notebook a file is an attempt at, and notes on how that was decided."""
    by_content = _by_content(notebook, specs) if notebook is not None else None
    folder = [s for s in specs if s.assignment in parts[:-1]]
    original = (owner.original if owner and owner.original else parts[-1])
    by_name = [s for s in (folder or specs) if _stem(original) in _names(s)]
    if len({s.assignment for s in folder}) == 1 and len(folder) == 1 and not by_name:
        by_name = folder
    named = by_name[0] if len(by_name) == 1 else None
    if by_content is None:
        return named, []
    if named is None:
        return by_content, [f"handed in as {original!r}; recognised as "
                            f"{by_content.assignment}/{by_content.name} by its graded cells"]
    if named != by_content:
        return by_content, [f"named like {named.assignment}/{named.name} but its graded cells "
                            f"are those of {by_content.assignment}/{by_content.name}; graded as "
                            "the latter"]
    return by_content, []


def _by_content(notebook: dict, specs: list[NotebookSpec]) -> NotebookSpec | None:
    ids = grade_ids(notebook)
    scored = sorted(((len(ids & s.grade_ids), i) for i, s in enumerate(specs)), reverse=True)
    if not scored or scored[0][0] == 0 or (len(scored) > 1 and scored[1][0] == scored[0][0]):
        return None
    return specs[scored[0][1]]


def _stem(filename: str) -> str:
    stem = filename.rsplit(".", 1)[0] if "." in filename else filename
    return COPY_SUFFIX.sub("", stem.strip()).strip().lower()


def _names(spec: NotebookSpec) -> set[str]:
    """File stems that name ``spec``: its notebook, its assignment id, the id without NN_."""
    topic = spec.assignment.split("_", 1)[-1]
    return {Path(spec.name).stem.lower(), spec.assignment.lower(), topic.lower()}


def _resubmission(filename: str) -> int:
    stem = filename.rsplit(".", 1)[0]
    found = COPY_SUFFIX.search(stem)
    if not found:
        return 0
    return int(found["dash"] or found["paren"] or found["copy"] or 1)


def student_id(name: str) -> str:
    """An nbgrader-safe student id: letters of any script, digits, space and ``.'@+-_`` kept."""
    cleaned = re.sub(r"[^\w .'@+-]", "_", name).strip(" ._")
    return cleaned[:100] or "student"


def _disambiguate_students(found: list[Submission]) -> None:
    """Give every submission a student id; people sharing a name keep apart by LMS id."""
    ids_by_name: dict[str, set[str]] = defaultdict(set)
    for sub in found:
        ids_by_name[student_id(sub.name)].add(sub.lms_id)
    for sub in found:
        base = student_id(sub.name)
        sub.student = f"{base}_{sub.lms_id}" if len(ids_by_name[base]) > 1 and sub.lms_id else base


def _keep_newest(found: list[Submission]) -> tuple[list[Submission], list[str]]:
    """One file per student and notebook: the readable, latest (LMS submission id, then
    re-submission number) wins; the others are reported."""
    groups: dict[tuple[str, str, str], list[Submission]] = defaultdict(list)
    for sub in found:
        groups[sub.student, sub.assignment, sub.notebook].append(sub)
    kept, superseded = [], []
    for key in sorted(groups):
        ranked = sorted(groups[key], key=lambda s: s.rank, reverse=True)
        best = ranked[0]
        for other in ranked[1:]:
            superseded.append(f"{other.origin}: superseded by {best.origin} (same student and "
                              "notebook); not graded")
        if len(ranked) > 1:
            best.notes.append(f"{len(ranked) - 1} other file(s) for this notebook were handed in; "
                              f"graded the newest, {best.origin}")
        kept.append(best)
    return kept, superseded
