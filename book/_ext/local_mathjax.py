"""Sphinx extension: the built site serves its own MathJax, so formulas render without a CDN
(a saved copy of the site, a campus that blocks the CDN, the offline browser test).

MathJax comes from the npm package pinned in ``book/package.json`` (``make setup`` runs
``npm ci --prefix book``). The extension points ``mathjax_path`` at ``_static/mathjax/`` and,
when the build has finished, copies there what the ``tex-mml-chtml`` component loads: the
component itself, the TeX and MathML extensions it loads on demand, the CommonHTML fonts, and
the accessibility parts its menu offers (assistive MathML, the explorer and its speech rules).
Without the npm package the build warns and keeps Sphinx's CDN address.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)

PACKAGE = Path(__file__).resolve().parents[1] / "node_modules" / "mathjax"
COMPONENT = "tex-mml-chtml.js"
#: What the component loads from beside itself, relative to the package's es5/ folder.
PARTS = (COMPONENT, "input/tex", "input/mml", "output/chtml", "a11y", "sre", "ui", "adaptors")
TARGET = "mathjax"                        # under the site's _static/


def installed_version(package: Path = PACKAGE) -> str | None:
    """The version of the MathJax npm package at ``package``, or None when it is missing."""
    manifest = package / "package.json"
    if not (manifest.exists() and (package / "es5" / COMPONENT).exists()):
        return None
    return json.loads(manifest.read_text(encoding="utf-8"))["version"]


def use_local_mathjax(app, config) -> None:
    version = installed_version()
    if version is None:
        logger.warning(f"MathJax is not installed at {PACKAGE} (run `make setup`, which runs "
                       "`npm ci --prefix book`): the site will load MathJax from a CDN")
        return
    config.mathjax_path = f"{TARGET}/{COMPONENT}"
    logger.info(f"MathJax {version} served from _static/{TARGET}/")


def copy_mathjax(app, exception) -> None:
    if exception is not None or app.builder.format != "html" or installed_version() is None:
        return
    target = Path(app.outdir) / "_static" / TARGET
    source = PACKAGE / "es5"
    for part in PARTS:
        if (source / part).is_dir():
            shutil.copytree(source / part, target / part, dirs_exist_ok=True)
        else:
            (target / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / part, target / part)


def setup(app):
    app.connect("config-inited", use_local_mathjax)
    app.connect("build-finished", copy_mathjax)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
