"""Output of the benchmarks: a text table and an SVG bar chart.

Shared by the scripts in ``benchmarks/`` and ``sqla-ids bench``. No plotting
library needed: the chart is a few lines of SVG, so every benchmark can
write the figure that docs/benchmarks.md shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path


def format_table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A titled, right-aligned text table (first column left-aligned), preceded by a blank line."""
    cells = [[str(h) for h in header]] + [[format_value(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["", title]
    for index, row in enumerate(cells):
        first = row[0].ljust(widths[0])
        rest = "  ".join(cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True))
        lines.append(f"{first}  {rest}")
        if index == 0:
            lines.append("-" * (sum(widths) + 2 * (len(widths) - 1)))
    return "\n".join(lines)


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Print a titled, right-aligned table (first column left-aligned)."""
    print(format_table(title, header, rows))


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
