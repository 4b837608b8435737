"""Sphinx extension: each page loads every script once.

sphinx-togglebutton and sphinx-thebe add inline configuration scripts (``const THEBE_JS_URL =
...``) from a ``builder-inited`` handler. Sphinx 7.4 then registers them with the builder and
again from its registry, so every page declared the same ``const`` twice and the browser stopped
with "Identifier 'THEBE_JS_URL' has already been declared" (found by tests/test_browser.py).
This drops a script that is exactly the same as one before it on the page.
"""

from __future__ import annotations


def _script_key(script) -> tuple:
    """The file (an inline script's is None or "", depending on the path it took) and the
    attributes, body included."""
    filename = getattr(script, "filename", script) or ""
    attributes = getattr(script, "attributes", {}) or {}
    return str(filename), tuple(sorted((k, str(v)) for k, v in attributes.items()))


def unique_scripts(app, pagename, templatename, context, doctree) -> None:
    seen: set[tuple] = set()
    unique = []
    for script in context.get("script_files", []):
        key = _script_key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"][:] = unique


def setup(app):
    app.connect("html-page-context", unique_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
