"""Feedback pages that show a student only what they may see.

nbgrader makes feedback from the autograded notebook, whose test cells hold the hidden tests
that were put back for grading. Before the page is rendered:

- :class:`SubmittedOutputs` shows, in every cell but the test cells, the outputs of the
  student's own run as handed in: nothing the kernel wrote while it was graded reaches the
  page (test cells show the grader's verdict, judge.py);
- nbgrader's ``ClearHiddenTests`` removes the hidden-test regions from the test cells' source;
- :class:`RedactFeedback` cuts what the outputs could still reveal: a failed test cell's error
  keeps its one-line message (``ename: evalue``, the hint the test was written to give) but not
  its traceback, which quotes the cell's source around the failing line; and any output line,
  anywhere, that repeats a line of a hidden test (whole-line match, as the release check does)
  is replaced by a note, so code that prints the tests (a hook, a traceback, ``In[...]``) shows
  nothing of them;
- nbconvert's ``SanitizeHTML`` preprocessor (built on the maintained ``bleach`` sanitiser)
  cleans the student's markdown and HTML outputs down to safe tags and attributes, and drops
  JavaScript outputs; the exporter's ``sanitize_html`` does the same for what it renders:
  ``<script>``, event handlers and ``javascript:`` links become inert text or disappear;
- :func:`defang_links` then reads the finished page as a browser would and removes every URL
  whose scheme could run code (nbgrader renders markdown links itself, unsanitised);
- exercises.name_summary names each entry of the page's summary after its exercise and puts the
  grader's message beside its score, passed through :func:`redact` as the outputs are.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
from nbconvert.preprocessors import Preprocessor
from traitlets import Integer, List, Unicode

from ..cells import is_test, marked_lines, source

REDACTED = "[grader: removed a line that quotes the hidden tests]"


def hidden_test_lines(source_notebook: Path) -> set[str]:
    """Stripped lines (12+ characters) inside the hidden-test regions of an instructor
    notebook."""
    return marked_lines(source_notebook, "HIDDEN TESTS", 12)


MARKERS = ("BEGIN HIDDEN TESTS", "END HIDDEN TESTS")


def redact(text: str, hidden: set[str], markers=MARKERS) -> str:
    """``text`` with every line that repeats a hidden-test line (or a marker) replaced by
    :data:`REDACTED`; also used for the messages in the page's summary (exercises.py)."""
    kept = [REDACTED if line.strip() in hidden or any(m in line for m in markers) else line
            for line in text.split("\n")]
    return "\n".join(kept)


def redactor(instructor: Path):
    """:func:`redact` for one chapter notebook: a function of a text (exercises.py takes it)."""
    hidden = hidden_test_lines(instructor)
    return lambda text: redact(text, hidden)


class RedactFeedback(Preprocessor):
    """Tracebacks of test cells cut to their message; output lines quoting hidden tests
    removed (see the module docstring)."""

    hidden_lines = List(Unicode(), help="Stripped hidden-test lines to keep out of outputs").tag(
        config=True)
    markers = List(Unicode(), list(MARKERS)).tag(config=True)

    def _clean(self, text: str) -> str:
        return redact(text, set(self.hidden_lines), self.markers)

    def preprocess_cell(self, cell, resources, index):
        for output in cell.get("outputs", []):
            kind = output.get("output_type")
            if kind == "stream":
                output["text"] = self._clean("".join(output.get("text", "")))
            elif kind == "error":
                output["evalue"] = self._clean(output.get("evalue", ""))
                output["traceback"] = ([f"{output.get('ename', 'Error')}: {output['evalue']}"]
                                       if is_test(cell) else
                                       [self._clean(line) for line in output.get("traceback", [])])
            for mime, value in output.get("data", {}).items():
                if mime.startswith("text/") and isinstance(value, (str, list)):
                    output["data"][mime] = self._clean("".join(value))
        return cell, resources


class SubmittedOutputs(Preprocessor):
    """Every cell but the test cells shows the outputs the student's own run left in the file
    they handed in, never what the kernel wrote while it was graded: a kernel that prints the
    tests, or anything else, prints it into the instructor's copy only. Test cells keep the
    grader's verdict. A cell whose outputs in the handed-in file exceed ``max_chars`` shows a
    note instead."""

    submitted = Unicode("", help="Folder of the handed-in notebooks (submitted/STUDENT/"
                                 "ASSIGNMENT)").tag(config=True)
    max_chars = Integer(2_000_000, help="Characters of outputs shown per cell").tag(config=True)

    def preprocess(self, nb, resources):
        name = (resources or {}).get("nbgrader", {}).get("notebook", "")
        path = Path(self.submitted) / f"{name}.ipynb"
        handed_in = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        cells = handed_in.get("cells", [])
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code" or is_test(cell):
                continue
            own = cells[index] if index < len(cells) else {}
            same = own.get("cell_type") == "code" and source(own).strip() == \
                source(cell).strip()
            outputs = own.get("outputs", []) if same else []
            if len(json.dumps(outputs)) > self.max_chars:
                outputs = [nbformat.v4.new_output(
                    "stream", name="stdout", text=f"[grader: this cell's outputs in the file you "
                    f"handed in are longer than {self.max_chars:,} characters; not shown]\n")]
            cell.outputs = [nbformat.from_dict(o) for o in outputs if isinstance(o, dict)]
            cell.execution_count = own.get("execution_count") if same else None
        return nb, resources


#: URL attributes a browser follows or loads, and the schemes a feedback page may keep in them
#: (a URL without a scheme, such as ``#section`` or ``figure.png``, is kept too).
URL_ATTRIBUTES = ("href", "src", "action", "formaction", "xlink:href", "data", "poster",
                  "background", "cite", "srcset")
SAFE_SCHEMES = ("http", "https", "mailto")
_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*):", re.I)


def defang_links(page: Path) -> int:
    """Neutralise every URL in ``page`` whose scheme could run code (``javascript:``,
    ``vbscript:``, ``data:`` other than an image): the attribute is removed. nbgrader renders a
    markdown link ``[x](javascript:...)`` as a live link whatever nbconvert's sanitiser says, so
    the finished page is checked as a browser would read it. Returns how many were removed."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    removed = 0
    for element in soup.find_all(True):
        for name in [a for a in element.attrs if a.lower() in URL_ATTRIBUTES]:
            if not _safe_url(element.name, name, str(element.attrs[name])):
                del element.attrs[name]
                removed += 1
    if removed:
        page.write_text(str(soup), encoding="utf-8")
    return removed


def _safe_url(tag: str, attribute: str, value: str) -> bool:
    compact = "".join(ch for ch in value if ch > " " and ch != "\x7f")
    found = _SCHEME.match(compact)
    if found is None:
        return True
    scheme = found.group(1).lower()
    if scheme == "data":
        return tag == "img" and attribute == "src" and compact.lower().startswith(
            ("data:image/png", "data:image/jpeg", "data:image/gif", "data:image/webp"))
    return scheme in SAFE_SCHEMES


def configure_feedback(config, source_notebooks: list[Path], submitted: Path) -> None:
    """Set ``config`` (an nbgrader config) to make feedback as the module docstring says;
    ``submitted`` is the folder of the handed-in notebooks (their outputs are shown)."""
    from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
    from nbconvert.preprocessors.sanitize import SanitizeHTML
    from nbgrader.preprocessors import ClearHiddenTests, GetGrades

    config.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, SubmittedOutputs,
                                             RedactFeedback, SanitizeHTML,
                                             CSSHTMLHeaderPreprocessor]
    config.ClearHiddenTests.enforce_metadata = False
    config.RedactFeedback.enabled = True   # nbconvert preprocessors are off unless enabled
    config.SubmittedOutputs.enabled = True
    config.SubmittedOutputs.submitted = str(submitted)
    config.SanitizeHTML.enabled = True
    config.RedactFeedback.hidden_lines = sorted(
        set().union(*(hidden_test_lines(p) for p in source_notebooks if p.exists())))
    config.HTMLExporter.sanitize_html = True


__all__ = ["REDACTED", "RedactFeedback", "SubmittedOutputs", "configure_feedback",
           "defang_links", "hidden_test_lines", "redact", "redactor"]
