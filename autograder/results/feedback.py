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
- nbconvert's ``SanitizeHTML`` preprocessor (built on the maintained ``bleach`` sanitiser),
  as :class:`SanitizeStudentHTML`, cleans the student's markdown and HTML outputs down to safe
  tags and attributes, and drops JavaScript outputs (the chapter's own prose, matched exactly,
  is the instructor's and is left alone); the exporter's ``sanitize_html`` does the same for
  what it renders: ``<script>``, event handlers and ``javascript:`` links become inert text or
  disappear;
- :func:`defang_links` then reads the finished page as a browser would and removes every URL
  whose scheme could run code (nbgrader renders markdown links itself, unsanitised);
- :class:`FeedbackExporter` renders the page as nbconvert's HTMLExporter does, compiling its
  templates and code formatters once per grading process rather than once per page;
- exercises.name_summary names each entry of the page's summary after its exercise and puts the
  grader's message beside its score, passed through :func:`redact` as the outputs are.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import nbformat
from jinja2 import BytecodeCache
from nbconvert.exporters import HTMLExporter
from nbconvert.filters import highlight as _highlight
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.preprocessors import Preprocessor
from nbconvert.preprocessors.sanitize import SanitizeHTML
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


class _CompiledTemplates(BytecodeCache):
    """Jinja's compiled templates kept in memory, by template name and source checksum (Jinja's
    own key): a grading worker renders hundreds of pages from the same nine templates."""

    def __init__(self) -> None:
        self.compiled: dict[str, bytes] = {}

    def load_bytecode(self, bucket) -> None:
        if bucket.key in self.compiled:
            bucket.bytecode_from_string(self.compiled[bucket.key])

    def dump_bytecode(self, bucket) -> None:
        self.compiled[bucket.key] = bucket.bytecode_to_string()


_COMPILED = _CompiledTemplates()
#: nbconvert's own highlighting function (private there: without it, pages use nbconvert's
#: highlighter as it is).
_pygments_highlight = getattr(_highlight, "_pygments_highlight", None)


class _Highlighter(Highlight2HTML):
    """nbconvert's code highlighting with one pygments formatter per language, made once per
    process: making one builds its whole style sheet, which took a third of a page's time
    when done for every cell. The same HTML (nbconvert's own ``_pygments_highlight``)."""

    formatters: dict[tuple, Any] = {}

    def __call__(self, source: str, language: str | None = None, metadata=None) -> str:
        from pygments.formatters import HtmlFormatter

        language = language or self.pygments_lexer
        key = (language, tuple(sorted(self.extra_formatter_options.items())))
        if key not in self.formatters:
            self.formatters[key] = HtmlFormatter(cssclass=html.escape(f" highlight hl-{language}"),
                                                 **self.extra_formatter_options)
        return _pygments_highlight(source or " ", self.formatters[key], language, metadata)


class FeedbackExporter(HTMLExporter):
    """nbconvert's HTMLExporter (configured as ``HTMLExporter``), which reuses what this process
    has made already for earlier pages: the compiled templates (about a quarter of a page's
    time) and the code highlighter's formatters (:class:`_Highlighter`)."""

    def _create_environment(self):
        environment = super()._create_environment()
        environment.bytecode_cache = _COMPILED
        return environment

    def from_notebook_node(self, nb, resources=None, **kw):
        if _pygments_highlight is not None and "highlight_code" not in self.filters:
            info = nb.metadata.get("language_info", {})
            lexer = info.get("pygments_lexer", info.get("name", None))
            self.filters = {**self.filters,
                            "highlight_code": _Highlighter(pygments_lexer=lexer, parent=self)}
        return super().from_notebook_node(nb, resources, **kw)


class SanitizeStudentHTML(SanitizeHTML):
    """nbconvert's SanitizeHTML for every cell the student could have written: a markdown or
    raw cell whose text is, exactly, one of the chapter's own (``trusted``: the instructor's
    prose, most of a page) is left as the instructor wrote it, which also spares the page
    half its sanitising time."""

    trusted = List(Unicode(), help="Texts of the chapter's own markdown and raw cells").tag(
        config=True)

    def preprocess(self, nb, resources):
        self._trusted = set(self.trusted)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type in ("markdown", "raw") and source(cell) in self._trusted:
            return cell, resources
        return super().preprocess_cell(cell, resources, index)


def chapter_prose(instructor: Path) -> set[str]:
    """The texts of an instructor notebook's markdown and raw cells."""
    cells = json.loads(instructor.read_text(encoding="utf-8")).get("cells", [])
    return {source(cell) for cell in cells if cell.get("cell_type") in ("markdown", "raw")}


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
    from nbgrader.preprocessors import ClearHiddenTests, GetGrades

    config.GenerateFeedback.exporter_class = FeedbackExporter
    config.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, SubmittedOutputs,
                                             RedactFeedback, SanitizeStudentHTML,
                                             CSSHTMLHeaderPreprocessor]
    config.ClearHiddenTests.enforce_metadata = False
    config.RedactFeedback.enabled = True   # nbconvert preprocessors are off unless enabled
    config.SubmittedOutputs.enabled = True
    config.SubmittedOutputs.submitted = str(submitted)
    config.SanitizeStudentHTML.enabled = True
    config.SanitizeStudentHTML.trusted = sorted(
        set().union(*(chapter_prose(p) for p in source_notebooks if p.exists())))
    config.RedactFeedback.hidden_lines = sorted(
        set().union(*(hidden_test_lines(p) for p in source_notebooks if p.exists())))
    config.HTMLExporter.sanitize_html = True


__all__ = ["REDACTED", "FeedbackExporter", "RedactFeedback", "SanitizeStudentHTML",
           "SubmittedOutputs", "chapter_prose", "configure_feedback", "defang_links",
           "hidden_test_lines", "redact", "redactor"]
