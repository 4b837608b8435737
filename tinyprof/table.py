"""A small table that prints as text, renders as HTML in a notebook and converts to plain data."""

from __future__ import annotations

import html
from typing import Any, Callable, Iterator, Sequence

Formatter = Callable[[Any], str]

#: Inline styles, so that tables read the same in the book, JupyterLab and Colab, light or dark:
#: padded cells on one line each (a wide table scrolls instead of wrapping a shape over three
#: lines), rules in a translucent grey that shows on either background, inherited text colour.
TABLE_STYLE = ("border-collapse:collapse;margin:0.5em 0;font-variant-numeric:tabular-nums;"
               "display:block;max-width:100%;overflow-x:auto")
CELL_STYLE = ("padding:0.25em 0.8em;white-space:nowrap;"
              "border-bottom:1px solid rgba(127,127,127,0.35);color:inherit")


class Table:
    """Rows of named columns. ``str(table)`` is aligned text, ``table._repr_html_()`` an HTML
    table, and ``table.to_records()`` a list of plain dictionaries (no formatting applied).

    ``formats`` maps a column name to a function that turns its value into display text.
    """

    def __init__(self, columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str = "",
                 formats: dict[str, Formatter] | None = None, footer: Sequence[Any] | None = None):
        self.columns = list(columns)
        self.rows = [list(row) for row in rows]
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(f"Table row {row} has {len(row)} values for "
                                 f"{len(self.columns)} columns {self.columns}")
        self.title = title
        self.formats = dict(formats or {})
        self.footer = list(footer) if footer is not None else None

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.to_records())

    def __getitem__(self, index: int) -> dict[str, Any]:
        return dict(zip(self.columns, self.rows[index]))

    def column(self, name: str) -> list[Any]:
        """All values of one column."""
        i = self.columns.index(name)
        return [row[i] for row in self.rows]

    def to_records(self) -> list[dict[str, Any]]:
        """The rows as dictionaries keyed by column name: the table's plain data."""
        return [dict(zip(self.columns, row)) for row in self.rows]

    def _cell(self, column: str, value: Any) -> str:
        if value is None:
            return ""
        if column in self.formats:
            return self.formats[column](value)
        if isinstance(value, bool):
            return str(value)
        if isinstance(value, int):
            return f"{value:,}"
        if isinstance(value, float):
            return f"{value:,.4g}"
        if isinstance(value, tuple):
            return "(" + ", ".join(str(v) for v in value) + ")"
        return str(value)

    def _text_rows(self) -> list[list[str]]:
        rows = [[self._cell(c, v) for c, v in zip(self.columns, row)] for row in self.rows]
        if self.footer is not None:
            rows.append([self._cell(c, v) for c, v in zip(self.columns, self.footer)])
        return rows

    def __str__(self) -> str:
        body = self._text_rows()
        widths = [max([len(c)] + [len(r[i]) for r in body]) for i, c in enumerate(self.columns)]
        numeric = [all(_is_number(row[i]) for row in self.rows) and bool(self.rows)
                   for i in range(len(self.columns))]

        def line(cells: list[str]) -> str:
            return "  ".join(cell.rjust(w) if num else cell.ljust(w)
                             for cell, w, num in zip(cells, widths, numeric)).rstrip()

        rule = "  ".join("-" * w for w in widths)
        out = ([self.title] if self.title else []) + [line(self.columns), rule]
        out += [line(r) for r in body[: len(self.rows)]]
        if self.footer is not None:
            out += [rule, line(body[-1])]
        return "\n".join(out)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        body = self._text_rows()
        numeric = [all(_is_number(row[i]) for row in self.rows) and bool(self.rows)
                   for i in range(len(self.columns))]

        def cells(values: list[str], tag: str) -> str:
            return "".join(
                f'<{tag} style="{CELL_STYLE};text-align:{"right" if num else "left"}">'
                f"{html.escape(v)}</{tag}>" for v, num in zip(values, numeric))

        head = f"<thead><tr>{cells(self.columns, 'th')}</tr></thead>"
        rows = "".join(f"<tr>{cells(r, 'td')}</tr>" for r in body[: len(self.rows)])
        if self.footer is not None:
            rows += f'<tr style="font-weight:bold">{cells(body[-1], "td")}</tr>'
        caption = f"<caption>{html.escape(self.title)}</caption>" if self.title else ""
        return (f'<table class="tinyprof-table" style="{TABLE_STYLE}">{caption}{head}'
                f"<tbody>{rows}</tbody></table>")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
