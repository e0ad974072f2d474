"""ER diagrams of inferred relations: Mermaid ``erDiagram`` and Graphviz DOT."""

from __future__ import annotations

import re

from sqla_ids.tools.relations import RelationsReport

_NOT_WORD = re.compile(r"[^A-Za-z0-9_]+")


def _mermaid_name(name: str) -> str:
    # Mermaid identifiers: letters, digits and underscores only.
    cleaned = _NOT_WORD.sub("_", name).strip("_") or "unnamed"
    return cleaned if not cleaned[0].isdigit() else f"t_{cleaned}"


def _tables(report: RelationsReport) -> dict[str, list[tuple[str, str, str]]]:
    """table -> [(column, type, PK/FK marks)] for every UUID column."""
    keys = {(k.table, k.column) for k in report.primary_keys}
    references = {(r.table, r.column) for r in report.references}
    tables: dict[str, list[tuple[str, str, str]]] = {}
    for column in report.columns:
        marks = [
            m for m, s in (("PK", keys), ("FK", references)) if (column.table, column.column) in s
        ]
        tables.setdefault(column.table, []).append(
            (column.column, column.type_name, ", ".join(marks))
        )
    return tables


def to_mermaid(report: RelationsReport) -> str:
    """Mermaid ``erDiagram`` source: UUID columns per table and inferred references."""
    lines = ["erDiagram"]
    for table, columns in _tables(report).items():
        lines.append(f"    {_mermaid_name(table)} {{")
        for column, type_name, marks in columns:
            lines.append(
                f"        {_mermaid_name(type_name)} {_mermaid_name(column)} {marks}".rstrip()
            )
        lines.append("    }")
    for ref in report.references:
        # one-to-one when the referencing column is itself unique
        cardinality = "|o--||" if ref.one_to_one else "}o--||"
        label = f"{ref.column} ({'declared' if ref.declared else ref.confidence})"
        lines.append(
            f"    {_mermaid_name(ref.table)} {cardinality} {_mermaid_name(ref.target_table)}"
            f' : "{label}"'
        )
    return "\n".join(lines) + "\n"


def _dot_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _dot_string(text: str) -> str:
    return f'"{_dot_escape(text)}"'


def to_dot(report: RelationsReport) -> str:
    """Graphviz DOT source: one box per table, one edge per inferred reference."""
    lines = [
        "digraph relations {",
        "    rankdir=LR;",
        '    node [shape=box, fontname="Helvetica"];',
        '    edge [fontname="Helvetica", fontsize=10];',
    ]
    for table, columns in _tables(report).items():
        # "\\n" centres the title line, "\\l" left-aligns each column line.
        rows = "".join(
            _dot_escape(f"{column}: {type_name}{f' [{marks}]' if marks else ''}") + "\\l"
            for column, type_name, marks in columns
        )
        label = f'"{_dot_escape(table)}\\n{rows}"'
        lines.append(f"    {_dot_string(table)} [label={label}];")
    for ref in report.references:
        style = "solid" if ref.declared else "dashed"
        label = _dot_string(f"{ref.column} → {ref.target_column} ({ref.confidence})")
        lines.append(
            f"    {_dot_string(ref.table)} -> {_dot_string(ref.target_table)} "
            f"[label={label}, style={style}];"
        )
    lines.append("}")
    return "\n".join(lines) + "\n"
