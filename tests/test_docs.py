"""Every ```python block in docs/*.md and README.md runs, top to bottom, per file.

Blocks of one file share a namespace, so a page reads like a session. A block
whose first line is ``# doctest: skip`` is shown but not run (for examples
that need a server or start one).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _blocks(page: Path) -> list[str]:
    return [
        block
        for block in _BLOCK.findall(page.read_text(encoding="utf-8"))
        if not block.startswith("# doctest: skip")
    ]


# Pages with at least one runnable example.
PAGES = [
    page
    for page in sorted([*ROOT.joinpath("docs").glob("**/*.md"), ROOT / "README.md"])
    if _blocks(page)
]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = _blocks(page)
    monkeypatch.chdir(tmp_path)  # examples may create files (SQLite databases…)
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem}"}
    for number, block in enumerate(blocks, 1):
        # dont_inherit: this module's `from __future__ import annotations`
        # must not leak into the examples (SQLAlchemy reads Mapped[...] at runtime).
        code = compile(block, f"{page.name} (example {number})", "exec", dont_inherit=True)
        exec(code, namespace)
