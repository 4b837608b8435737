"""The feedback page's own sanitiser and exporter (autograder/results/feedback.py), on a small
notebook: the chapter's prose is left as written and everything else is sanitised, and the
exporter's caches (compiled templates, one code formatter per language) change no byte of a
page."""

from __future__ import annotations

import nbformat
from nbconvert.exporters import HTMLExporter
from nbconvert.preprocessors.sanitize import SanitizeHTML
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from autograder.results.feedback import FeedbackExporter, SanitizeStudentHTML, _Highlighter

PROSE = "The chapter's own <video src='step.mp4'></video> demo."


def _notebook() -> nbformat.NotebookNode:
    notebook = new_notebook(cells=[
        new_markdown_cell(PROSE),
        new_markdown_cell("Mine: <script>alert(1)</script> " + PROSE),
        new_code_cell("def f(x):\n    return x + 1  # a comment\nf(2)", outputs=[
            new_output("display_data", data={"text/html": "<img src=x onerror=alert(1)>",
                                             "text/plain": "img"})])])
    notebook.metadata["language_info"] = {"name": "python", "pygments_lexer": "ipython3"}
    for number, cell in enumerate(notebook.cells):
        cell.id = f"cell-{number}"
    return notebook


def test_the_chapters_own_prose_is_left_as_written_and_the_rest_is_sanitised():
    stock, _ = SanitizeHTML().preprocess(_notebook(), {})
    assert stock.cells[0].source != PROSE   # so leaving it alone is a real difference
    ours, _ = SanitizeStudentHTML(trusted=[PROSE]).preprocess(_notebook(), {})
    assert ours.cells[0].source == PROSE
    assert ours.cells[1].source == stock.cells[1].source and "<script>" not in \
        ours.cells[1].source
    html = ours.cells[2].outputs[0].data["text/html"]
    assert html == stock.cells[2].outputs[0].data["text/html"] and "<img" not in html  # inert


def test_the_exporters_caches_change_no_byte_of_a_page():
    _Highlighter.formatters.clear()
    stock, _ = HTMLExporter(template_name="classic").from_notebook_node(_notebook())
    pages = [FeedbackExporter(template_name="classic").from_notebook_node(_notebook())[0]
             for _ in range(2)]
    assert pages == [stock, stock]
    assert list(_Highlighter.formatters) == [("ipython3", ())]   # made once, used twice
    assert 'class="c1"' in stock   # the comment was highlighted
