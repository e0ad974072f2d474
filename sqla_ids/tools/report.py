"""Text tables and SVG bar charts.

:func:`format_table` is the one text-table renderer: the benchmarks
(``benchmarks/``, ``sqla-ids bench``), ``sqla-ids find`` and the demo tour
print with it. No plotting library needed: the chart is a few lines of SVG,
so every benchmark can write the figure that docs/benchmarks.md shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path

__all__ = ["format_table", "format_value", "print_table", "write_bar_chart"]


def format_table(
    header: Sequence[str],
    rows: Sequence[Sequence[object]],
    *,
    title: str | None = None,
    indent: str = "",
    numbers: bool = False,
) -> str:
    """An aligned text table: ``title`` if given, the header, a rule, the rows.

    Columns are two spaces apart and every line starts with ``indent``. By
    default cells are ``str(value)``, left-aligned, under a rule of one dash
    run per column. ``numbers=True`` is the benchmarks' style: cells go
    through :func:`format_value`, columns after the first are right-aligned
    and the rule is one unbroken line.

    >>> print(format_table(["key", "rows"], [["a", 1234], ["bb", 5]], numbers=True))
    key   rows
    ----------
    a    1,234
    bb       5
    >>> print(format_table(["table", "column"], [("orders", "id")], indent="  "))
      table   column
      ------  ------
      orders  id
    """
    cell = format_value if numbers else str
    cells = [[str(h) for h in header]] + [[cell(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        aligned = [
            text.rjust(width) if numbers and column else text.ljust(width)
            for column, (text, width) in enumerate(zip(row, widths, strict=True))
        ]
        return (indent + "  ".join(aligned)).rstrip()

    if numbers:
        rule = indent + "-" * (sum(widths) + 2 * (len(widths) - 1))
    else:
        rule = indent + "  ".join("-" * width for width in widths)
    lines = [line(cells[0]), rule, *map(line, cells[1:])]
    return "\n".join(lines if title is None else [title, *lines])


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Print a benchmark table (``numbers=True``) after a blank line."""
    print("\n" + format_table(header, rows, title=title, numbers=True))


def format_value(value: object) -> str:
    """A table cell: thousands separators, two decimals below 100, none above."""
    if isinstance(value, float):
        return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def write_bar_chart(path: Path, title: str, bars: Sequence[tuple[str, float]], unit: str) -> None:
    """Write a horizontal bar chart (label, value) as SVG to ``path``."""
    label_width, bar_width, row_height = 300, 360, 26
    height = 50 + row_height * len(bars)
    largest = max((value for _, value in bars), default=1.0) or 1.0
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_width + bar_width + 110}" '
        f'height="{height}" font-family="sans-serif" font-size="13">',
        f'<text x="10" y="22" font-size="15" font-weight="bold">{escape(title)}</text>',
    ]
    for index, (label, value) in enumerate(bars):
        y = 40 + index * row_height
        length = max(1.0, bar_width * value / largest)
        parts += [
            f'<text x="{label_width - 8}" y="{y + 15}" text-anchor="end">{escape(label)}</text>',
            f'<rect x="{label_width}" y="{y + 3}" width="{length:.1f}" height="{row_height - 8}" '
            f'fill="{"#2b7bb9" if index else "#e4572e"}"/>',
            f'<text x="{label_width + length + 6:.1f}" y="{y + 15}">'
            f"{format_value(value)} {unit}</text>",
        ]
    parts.append("</svg>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
