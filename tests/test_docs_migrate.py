"""docs/migration.md shows what ``sqla-ids migrate`` prints: the page's examples
run (as tests/test_docs.py runs them), and the output its ``sqla-ids migrate``
example produced is the one the page shows after it -- numbers, times and the
file's path aside (they differ from one machine and run to the next)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "migration.md"
_BLOCK = re.compile(r"^```(python|text)\n(.*?)^```", re.DOTALL | re.MULTILINE)
_NUMBER = re.compile(r"[0-9][0-9,.]*")
#: Where the page says the shop database lives.
DOCS_DIRECTORY = "/home/me"


def _shape(text: str) -> list[str]:
    """The lines with every number as ``N`` (rates, sizes, times vary)."""
    return [_NUMBER.sub("N", line.rstrip()) for line in text.strip().splitlines()]


def run_page(directory: Path) -> tuple[str, str]:
    """Run the page's examples in ``directory``; the ``sqla-ids migrate`` example's
    output, and the text the page shows after it."""
    namespace: dict[str, object] = {"__name__": "docs_migration"}
    blocks = _BLOCK.findall(PAGE.read_text(encoding="utf-8"))
    shown = ""
    for number, (kind, block) in enumerate(blocks, 1):
        if kind == "text" or block.startswith("# doctest: skip"):
            continue
        code = compile(block, f"{PAGE.name} (example {number})", "exec", dont_inherit=True)
        exec(code, namespace)
        if 'main(["migrate"' in block:
            shown = blocks[number][1]  # the text block right after it
            break
    output = namespace["shown"].getvalue()  # type: ignore[attr-defined]
    return str(output).replace(str(directory), DOCS_DIRECTORY), shown


def test_the_page_shows_what_the_command_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    output, shown = run_page(tmp_path)
    assert "sqla-ids migrate plan: sqlite:///shop.sqlite3" in output
    assert _shape(shown) == _shape(output)


if __name__ == "__main__":  # print the output to paste into the page
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as where:
        os.chdir(where)
        print(run_page(Path(where))[0])
