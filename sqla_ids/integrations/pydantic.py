"""Order numbers as a validated pydantic type; UUIDv7 keys as ``pydantic.UUID7``.

Needs pydantic 2 (``pip install "sqla-ids[pydantic]"``); only this module
imports it. Keys need nothing from here: a ``UUIDv7`` column holds
``uuid.UUID`` values, which ``pydantic.UUID7`` (pydantic >= 2.11) validates
and describes as ``{"type": "string", "format": "uuid7"}``.

:class:`OrderNumberStr` makes an order number a pydantic type that accepts
what a customer types -- ``943 130 351``, ``943130351``, ``943-130-351`` --
and gives the display form, which is what ``FormattedOrderNumber`` stores, so
the validated value can be compared with the column as it is:

>>> from typing import Annotated
>>> import pydantic
>>> OrderNo = Annotated[str, OrderNumberStr()]  # format and check digit only: no key needed
>>> class Lookup(pydantic.BaseModel):
...     number: OrderNo
>>> Lookup(number=" 943 130 351 ").number
'943-130-351'
>>> try:
...     Lookup(number="943-130-315")
... except pydantic.ValidationError as error:
...     print(error.errors()[0]["type"], "|", error.errors()[0]["msg"][:24])
order_number | the check digit is wrong
"""

from __future__ import annotations

from typing import Any

try:
    from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
    from pydantic.json_schema import JsonSchemaValue
    from pydantic_core import PydanticCustomError, core_schema
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        'sqla_ids.integrations.pydantic needs pydantic 2: pip install "sqla-ids[pydantic]"'
    ) from error

from sqla_ids.order_numbers.errors import OrderNumberError
from sqla_ids.order_numbers.format import OrderNumberFormat
from sqla_ids.order_numbers.schemes import OrderNumberScheme

__all__ = ["OrderNumberStr"]

ERROR_TYPE = "order_number"
"""The ``type`` of the pydantic error when an order number is refused."""


class OrderNumberStr:
    """``Annotated[str, OrderNumberStr(codec)]``: an order number as a customer types it.

    ``scheme`` is an :class:`~sqla_ids.order_numbers.OrderNumberCodec` (or
    another scheme, or a bare :class:`~sqla_ids.order_numbers.OrderNumberFormat`;
    default: the default decimal format). Validation strips the input, accepts
    it with or without separators (spaces and ``-./`` between groups), checks
    length, characters and the check digit -- no key needed, no database
    asked -- and returns the display form, e.g. ``943-130-351``. A refusal is
    a pydantic error of type ``order_number`` whose message says why (bad
    length, bad character, misplaced separator, wrong check digit).

    ``issued=True`` also decrypts the number (the key is needed then) and
    refuses one that this numbering can never have issued.

    JSON schema: a string with its length bounds and an example; in
    serialization mode (responses) also the display pattern.
    """

    def __init__(
        self,
        scheme: OrderNumberScheme | OrderNumberFormat | None = None,
        *,
        issued: bool = False,
    ) -> None:
        if issued and not isinstance(scheme, OrderNumberScheme):
            raise ValueError("issued=True decrypts the number: give a codec or scheme")
        self.scheme: OrderNumberScheme | OrderNumberFormat = (
            OrderNumberFormat() if scheme is None else scheme
        )
        self.issued = issued

    def __repr__(self) -> str:
        issued = ", issued=True" if self.issued else ""
        return f"OrderNumberStr({self.scheme!r}{issued})"

    @property
    def format(self) -> OrderNumberFormat:
        """The display format of the numbers."""
        scheme = self.scheme
        return scheme if isinstance(scheme, OrderNumberFormat) else scheme.format

    def validate(self, text: str) -> str:
        """Display form of ``text``, or a pydantic error of type ``order_number``."""
        try:
            display = self.scheme.validate(text)
            if self.issued and isinstance(self.scheme, OrderNumberScheme):
                self.scheme.decode(display)
        except OrderNumberError as error:
            raise PydanticCustomError(
                ERROR_TYPE, "{reason}", {"reason": str(error), "error": type(error).__name__}
            ) from None
        return display

    def example(self) -> str:
        """A well-formed number of the shortest length (its check digit is right)."""
        fmt = self.format
        symbols = fmt.alphabet.symbols
        payload = "".join(symbols[(n + 1) % len(symbols)] for n in range(fmt.min_payload))
        return fmt.format(payload)

    def __get_pydantic_core_schema__(
        self, source_type: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self.validate, handler(source_type))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        json_schema = handler(schema)
        fmt = self.format
        json_schema["examples"] = [self.example()]
        if handler.mode == "serialization":
            json_schema["pattern"] = fmt.display_regex()
            json_schema["description"] = "Order number, as printed on the receipt."
        else:
            json_schema["minLength"] = fmt.min_symbols
            json_schema["description"] = (
                "Order number as printed or typed: separators between the groups are optional."
            )
        return json_schema
