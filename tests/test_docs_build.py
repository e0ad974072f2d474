"""The documentation site builds with ``mkdocs build --strict``: no broken link, no missing page."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.pure_python


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e '.[test]')")
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config)]
    return subprocess.run(
        [*command, "--site-dir", str(site)], capture_output=True, text=True, timeout=120
    )


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    result = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stderr + result.stdout
    for page in ("index.html", "choosing_keys/index.html", "uuid7/index.html", "tools/index.html"):
        assert (tmp_path / "site" / page).is_file(), page


def test_broken_link_fails_the_build(tmp_path: Path) -> None:
    copy = tmp_path / "project"
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    index = copy / "docs" / "index.md"
    index.write_text(index.read_text(encoding="utf-8") + "\nSee [gone](no_such_page.md).\n")
    result = _build(copy / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0
    assert "no_such_page.md" in result.stderr + result.stdout


def test_pages_cite_nothing_outside_the_repository() -> None:
    """The product spec is not part of the repository: pages link to pages, not to it."""
    pages = [*ROOT.joinpath("docs").glob("**/*.md"), ROOT / "README.md"]
    citing = [p.name for p in pages if "SPEC" in p.read_text(encoding="utf-8")]
    assert citing == []
