"""Identicons: deterministic, and visibly different for UUIDs one character apart.

The distance is measured on the SVG itself: the filled cells are read back
from the path and the colour from its fill, so the test checks the picture a
person would see, not an internal value.
"""

from __future__ import annotations

import colorsys
import random
import re
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from sqla_ids.cli import main
from sqla_ids.identifiers import UUIDFormatError, to_base32, uuid7
from sqla_ids.tools.identicon import GRID, hue_distance, identicon, identicon_svg

pytestmark = pytest.mark.pure_python

SVG = "{http://www.w3.org/2000/svg}"
PAIRS = 3000


def rendered(svg: str) -> tuple[frozenset[tuple[int, int]], float]:
    """Filled (row, column) cells and the fill hue (degrees) read from an identicon SVG."""
    root = ET.fromstring(svg)
    path = root.find(f"{SVG}path")
    assert path is not None
    cells = frozenset(
        (int(y) - 1, int(x) - 1) for x, y in re.findall(r"M(\d+) (\d+)h1v1h-1z", path.get("d", ""))
    )
    fill = path.get("fill", "")
    red, green, blue = (int(fill[i : i + 2], 16) / 255 for i in (1, 3, 5))
    hue, _, _ = colorsys.rgb_to_hls(red, green, blue)
    return cells, hue * 360


def picture_distance(first: str, second: str) -> tuple[int, float]:
    """(cells that differ, hue distance in degrees) between two rendered identicons."""
    cells_a, hue_a = rendered(first)
    cells_b, hue_b = rendered(second)
    difference = abs(hue_a - hue_b) % 360
    return len(cells_a ^ cells_b), min(difference, 360 - difference)


def one_character_apart(rng: random.Random) -> tuple[str, str]:
    text = list(str(uuid.UUID(int=rng.getrandbits(128))))
    original = "".join(text)
    position = rng.choice([i for i, c in enumerate(text) if c != "-"])
    text[position] = rng.choice([c for c in "0123456789abcdef" if c != text[position]])
    return original, "".join(text)


def test_equal_uuids_give_byte_identical_svg_in_any_spelling() -> None:
    value = uuid7()
    spellings = [value, str(value), value.hex.upper(), to_base32(value), value.bytes]
    pictures = {identicon_svg(s) for s in spellings}
    assert len(pictures) == 1
    assert identicon_svg(value) == identicon_svg(uuid.UUID(str(value)))


def test_svg_is_well_formed_and_symmetric() -> None:
    svg = identicon_svg(uuid7(), size=64)
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg" and root.get("width") == "64"
    cells, _ = rendered(svg)
    assert cells == {(row, GRID - 1 - column) for row, column in cells}
    assert all(0 <= row < GRID and 0 <= column < GRID for row, column in cells)


def test_rendering_matches_the_model() -> None:
    value = uuid7()
    cells, hue = rendered(identicon_svg(value))
    model = identicon(value)
    assert cells == model.filled()
    assert hue_distance(round(hue), model.hue) <= 1


def test_one_character_apart_looks_very_different() -> None:
    rng = random.Random(20261122)  # fixed pairs: the test cannot flake
    cell_counts: list[int] = []
    hues: list[float] = []
    for _ in range(PAIRS):
        first, second = one_character_apart(rng)
        cells, hue = picture_distance(identicon_svg(first), identicon_svg(second))
        # at least 8 of 64 cells (4 mirrored pairs) always change
        assert cells >= 8, (first, second, cells)
        cell_counts.append(cells)
        hues.append(hue)
    # On average, unrelated pictures: half the cells and a 90° hue change.
    assert 28 <= sum(cell_counts) / PAIRS <= 36
    assert 80 <= sum(hues) / PAIRS <= 100


def test_bad_input() -> None:
    with pytest.raises(UUIDFormatError):
        identicon_svg("not a uuid")
    with pytest.raises(ValueError, match="size"):
        identicon_svg(uuid7(), size=2)


def test_cli_identicon(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    value = uuid7()
    assert main(["identicon", str(value), "--size", "32"]) == 0
    assert capsys.readouterr().out == identicon_svg(value, size=32)
    target = tmp_path / "icon.svg"
    assert main(["identicon", value.hex, "-o", str(target)]) == 0
    assert target.read_text(encoding="utf-8") == identicon_svg(value)
    assert main(["identicon", "xyz"]) == 2
    assert "not a UUID" in capsys.readouterr().err
    assert main(["identicon", str(value), "--size", "0"]) == 2
    assert "--size" in capsys.readouterr().err
