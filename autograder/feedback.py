"""Feedback pages that show a student only what they may see.

nbgrader makes feedback from the autograded notebook, whose test cells hold the hidden tests
that were put back for grading. Before the page is rendered:

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
  ``<script>``, event handlers and ``javascript:`` links become inert text or disappear.
"""

from __future__ import annotations

from pathlib import Path

from nbconvert.preprocessors import Preprocessor
from traitlets import List, Unicode

from .cells import is_test, marked_lines

REDACTED = "[grader: removed a line that quotes the hidden tests]"


def hidden_test_lines(source_notebook: Path) -> set[str]:
    """Stripped lines (12+ characters) inside the hidden-test regions of an instructor
    notebook."""
    return marked_lines(source_notebook, "HIDDEN TESTS", 12)


class RedactFeedback(Preprocessor):
    """Tracebacks of test cells cut to their message; output lines quoting hidden tests
    removed (see the module docstring)."""

    hidden_lines = List(Unicode(), help="Stripped hidden-test lines to keep out of outputs").tag(
        config=True)
    markers = List(Unicode(), ["BEGIN HIDDEN TESTS", "END HIDDEN TESTS"]).tag(config=True)

    def _clean(self, text: str) -> str:
        hidden = set(self.hidden_lines)
        kept = [REDACTED if line.strip() in hidden or any(m in line for m in self.markers)
                else line for line in text.split("\n")]
        return "\n".join(kept)

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


def configure_feedback(config, source_notebooks: list[Path]) -> None:
    """Set ``config`` (an nbgrader config) to make feedback as the module docstring says."""
    from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
    from nbconvert.preprocessors.sanitize import SanitizeHTML
    from nbgrader.preprocessors import ClearHiddenTests, GetGrades

    config.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, RedactFeedback,
                                             SanitizeHTML, CSSHTMLHeaderPreprocessor]
    config.ClearHiddenTests.enforce_metadata = False
    config.RedactFeedback.enabled = True   # nbconvert preprocessors are off unless enabled
    config.SanitizeHTML.enabled = True
    config.RedactFeedback.hidden_lines = sorted(
        set().union(*(hidden_test_lines(p) for p in source_notebooks if p.exists())))
    config.HTMLExporter.sanitize_html = True


__all__ = ["REDACTED", "RedactFeedback", "configure_feedback", "hidden_test_lines"]
