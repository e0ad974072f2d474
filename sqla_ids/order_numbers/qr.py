"""QR codes (SVG) for printed documents, via the optional ``segno`` package.

Install with ``pip install sqla-ids[qr]``. The code carries the order number
as displayed, or a payment/tracking URL containing it.
"""

from __future__ import annotations

import io
from urllib.parse import quote

__all__ = ["order_number_qr_svg"]


def order_number_qr_svg(
    order_number: str,
    *,
    url_template: str | None = None,
    scale: int = 4,
    border: int = 2,
    title: str | None = None,
) -> str:
    """SVG of a QR code for ``order_number`` (or ``url_template.format(number=...)``).

    ``url_template`` such as ``"https://shop.example/orders/{number}"`` puts a
    URL in the code with the number URL-quoted. Validate the number first
    (e.g. ``codec.validate``); this function encodes what it is given.
    """
    try:
        import segno
    except ImportError as error:  # pragma: no cover - depends on the extra
        raise ImportError(
            "QR codes need the optional 'segno' package: pip install 'sqla-ids[qr]'"
        ) from error
    content = (
        order_number
        if url_template is None
        else url_template.format(number=quote(order_number, safe=""))
    )
    out = io.BytesIO()
    segno.make(content, error="m", micro=False).save(
        out, kind="svg", scale=scale, border=border, title=title, xmldecl=False
    )
    return out.getvalue().decode("utf-8")
