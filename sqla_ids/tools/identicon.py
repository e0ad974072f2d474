"""Identicons: a small deterministic SVG picture of a UUID (docs/tools.md).

The 16 bytes are hashed with BLAKE2b (personalised, so the picture is not a
plain view of the UUID's bits); the hash chooses a colour and fills an 8x8
grid that is mirrored left-right, like GitHub's identicons. Equal UUIDs give
byte-identical SVG; since any change to the input changes the whole hash,
UUIDs one character apart give unrelated pictures (about half the cells
differ, and the hue moves by 90° on average).
"""

from __future__ import annotations

import colorsys
import hashlib
from dataclasses import dataclass
from uuid import UUID

from sqla_ids.identifiers import parse_uuid

GRID = 8
"""Cells per side."""
_HALF = GRID // 2  # columns drawn from the hash; the others mirror them
_PADDING = 1  # blank cells around the grid, in cell units
_BACKGROUND = "#f2f2f2"
_PERSON = b"sqla-ids-icon"  # BLAKE2b personalisation: this hash is for pictures only
MIN_SIZE, MAX_SIZE = 8, 4096


@dataclass(frozen=True)
class Identicon:
    """The picture's content: which cells are filled, and their colour."""

    uuid: UUID
    cells: tuple[tuple[bool, ...], ...]
    """``cells[row][column]``, ``GRID`` x ``GRID``, symmetric left-right."""
    hue: int
    """Hue of the fill colour in degrees, 0-359."""
    color: str
    """Fill colour as ``#rrggbb``."""

    def filled(self) -> frozenset[tuple[int, int]]:
        """The filled cells as ``(row, column)`` pairs."""
        return frozenset(
            (row, column)
            for row, line in enumerate(self.cells)
            for column, on in enumerate(line)
            if on
        )


def identicon(value: UUID | str | bytes) -> Identicon:
    """Compute the identicon of a UUID given in any spelling ``parse_uuid`` reads."""
    uuid = parse_uuid(value)
    digest = hashlib.blake2b(uuid.bytes, digest_size=16, person=_PERSON).digest()
    bits = int.from_bytes(digest[:4], "big")  # 32 cells: 8 rows x 4 columns
    cells = []
    for row in range(GRID):
        half = [bool(bits >> (row * _HALF + column) & 1) for column in range(_HALF)]
        cells.append(tuple(half + half[::-1]))
    hue = int.from_bytes(digest[4:6], "big") % 360
    # Saturation and lightness vary a little but stay readable on the background.
    saturation = 0.45 + digest[6] / 255 * 0.30
    lightness = 0.40 + digest[7] / 255 * 0.15
    red, green, blue = colorsys.hls_to_rgb(hue / 360, lightness, saturation)
    color = "#{:02x}{:02x}{:02x}".format(*(round(c * 255) for c in (red, green, blue)))
    return Identicon(uuid=uuid, cells=tuple(cells), hue=hue, color=color)


def identicon_svg(value: UUID | str | bytes, *, size: int = 128) -> str:
    """Return the identicon of ``value`` as an SVG document ``size`` pixels square."""
    if not isinstance(size, int) or not MIN_SIZE <= size <= MAX_SIZE:
        raise ValueError(f"identicon size must be an integer from {MIN_SIZE} to {MAX_SIZE}")
    icon = identicon(value)
    side = GRID + 2 * _PADDING
    path = "".join(
        f"M{column + _PADDING} {row + _PADDING}h1v1h-1z" for row, column in sorted(icon.filled())
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{size}" height="{size}" '
        f'viewBox="0 0 {side} {side}" shape-rendering="crispEdges">'
        f"<title>{icon.uuid}</title>"
        f'<rect width="{side}" height="{side}" fill="{_BACKGROUND}"/>'
        f'<path fill="{icon.color}" d="{path}"/>'
        "</svg>\n"
    )


def hue_distance(first: int, second: int) -> int:
    """Distance between two hues on the colour wheel, 0-180 degrees."""
    difference = abs(first - second) % 360
    return min(difference, 360 - difference)


def identicon_distance(first: Identicon, second: Identicon) -> float:
    """How different two identicons look, from 0 (same) to 1.

    The mean of the fraction of grid cells that differ and the hue distance
    as a fraction of the largest possible (180°).
    """
    cells = len(first.filled() ^ second.filled()) / (GRID * GRID)
    return (cells + hue_distance(first.hue, second.hue) / 180) / 2
