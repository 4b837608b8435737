"""Sphinx extension: every page of the book meets WCAG 2.1 AA (checked with axe-core by
tests/test_browser.py). It mends what the theme (pydata-sphinx-theme 0.17 under
sphinx-book-theme) writes, and adds the book's own style sheet:

* a wide tinyprof table scrolls inside its output area, which the theme makes keyboard-focusable
  when it overflows, not on its own, where a keyboard user cannot scroll it (2.1.1 Keyboard;
  ``book/_static/tinyprof-book.css``);
* the sidebar's expand/collapse toggles (``<summary>`` holding only an icon) are named after their
  section: "Pages in API reference" (4.1.2 Name, Role, Value);
* the search button's name is its visible text, "Search Ctrl+K", not "Search" alone, a folded
  cell's toggle is named by what it says ("Show the tests"), not "Toggle hidden content"
  (myst-nb's label), and the colour-mode button's icons are decoration of its name "Color mode"
  (2.5.3 Label in Name).

The theme's markup is mended in the written pages, after the build: a theme upgrade that
changes it makes the browser test fail, not a page silently lose its names.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

STATIC = Path(__file__).resolve().parents[1] / "_static"
STYLESHEET = "tinyprof-book.css"

_TOGGLE = '<summary><span class="toctree-toggle" role="presentation">'
_SECTION_TOGGLE = re.compile(r'(<a class="reference internal" href="[^"]*">'
                             r'((?:(?!</a>).)*)</a>)<details>' + re.escape(_TOGGLE))
_SEARCH_BUTTON = re.compile(r'(<button class="btn search-button-field[^"]*"[^>]*?) '
                            r'aria-label="Search"')
_FOLD_TOGGLE = '<summary aria-label="Toggle hidden content">'
_MODE_ICON = re.compile(r'(<i class="theme-switch [^"]*" data-mode="\w+")\s+title="[^"]*"')


def _text(markup: str) -> str:
    return html.escape(html.unescape(re.sub(r"<[^>]+>", "", markup)).strip(), quote=True)


def mend(page: str) -> str:
    """The page's HTML with the theme's unnamed controls named (see the module docstring)."""
    page = _SECTION_TOGGLE.sub(
        lambda m: f'{m[1]}<details><summary aria-label="Pages in {_text(m[2])}">'
                  f'{_TOGGLE[len("<summary>"):]}', page)
    page = page.replace(_TOGGLE, '<summary aria-label="Pages in this section">'
                                 + _TOGGLE[len("<summary>"):])
    page = _SEARCH_BUTTON.sub(r"\1", page).replace(_FOLD_TOGGLE, "<summary>")
    return _MODE_ICON.sub(r'\1 aria-hidden="true"', page)


def add_stylesheet(app, config) -> None:
    config.html_static_path.append(str(STATIC))
    app.add_css_file(STYLESHEET)


def mend_pages(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    for path in Path(app.outdir).rglob("*.html"):
        page = path.read_text(encoding="utf-8")
        mended = mend(page)
        if mended != page:
            path.write_text(mended, encoding="utf-8")


def setup(app):
    app.connect("config-inited", add_stylesheet)
    app.connect("build-finished", mend_pages)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
