"""Self-contained reports of a benchmark suite: Markdown or HTML with the figure embedded.

A report is what a benchmark run leaves behind for people: the suite's table, the machine it
ran on and :func:`tinyprof.plots.plot_performance_comparison` as an embedded PNG, so the file
can be attached to a pull request or an issue on its own.
"""

from __future__ import annotations

import base64
import html
import io
import os
from pathlib import Path

from ..plots import plot_performance_comparison
from .suite import SuiteResult


def _figure_png(suite: SuiteResult) -> str:
    """The suite's comparison figure as base64 PNG."""
    import matplotlib.pyplot as plt

    fig = plot_performance_comparison(suite)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _machine_lines(suite: SuiteResult) -> list[str]:
    return [f"{key}: {value}" for key, value in suite.machine.items()]


def _written(text: str, path: str | os.PathLike | None) -> str:
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text


def suite_markdown(suite: SuiteResult, path: str | os.PathLike | None = None) -> str:
    """A Markdown report of ``suite`` (table, machine, figure as an embedded PNG); also written
    to ``path`` when given."""
    if not isinstance(suite, SuiteResult):
        raise TypeError(f"suite_markdown needs a SuiteResult, got {type(suite).__name__}")
    table = suite.table()
    lines = [f"# {table.title}", "", "| " + " | ".join(table.columns) + " |",
             "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
              for row in table._text_rows()]
    lines += ["", "## Machine", ""] + [f"- {line}" for line in _machine_lines(suite)]
    lines += ["", f"![time, memory and accuracy by variant]"
                  f"(data:image/png;base64,{_figure_png(suite)})", ""]
    return _written("\n".join(lines), path)


def suite_html(suite: SuiteResult, path: str | os.PathLike | None = None) -> str:
    """An HTML page with the same content as :func:`suite_markdown`."""
    if not isinstance(suite, SuiteResult):
        raise TypeError(f"suite_html needs a SuiteResult, got {type(suite).__name__}")
    table = suite.table()
    machine = "".join(f"<li>{html.escape(line)}</li>" for line in _machine_lines(suite))
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>"
            f"{html.escape(table.title)}</title></head><body>"
            f"<h1>{html.escape(table.title)}</h1>{table._repr_html_()}"
            f"<h2>Machine</h2><ul>{machine}</ul>"
            f"<img alt='time, memory and accuracy by variant' "
            f"src='data:image/png;base64,{_figure_png(suite)}'></body></html>")
    return _written(page, path)


__all__ = ["suite_html", "suite_markdown"]
