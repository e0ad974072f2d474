"""sqla_ids.integrations.pydantic: OrderNumberStr, and pydantic.UUID7 with our keys."""

from __future__ import annotations

import doctest
import subprocess
import sys
import uuid
from typing import Annotated

import pytest

pydantic = pytest.importorskip("pydantic", minversion="2.11")

from sqla_ids import OrderNumberCodec, uuid7  # noqa: E402
from sqla_ids.integrations import pydantic as integration  # noqa: E402
from sqla_ids.integrations.pydantic import ERROR_TYPE, OrderNumberStr  # noqa: E402
from sqla_ids.order_numbers import Keyring, OrderNumberFormat, PlainSequenceScheme  # noqa: E402

pytestmark = pytest.mark.pure_python

RING = Keyring(environ={})
RING.register("sample", "2DE79D232DF5585D68CE47882AE256D6", "CBD09280979564")  # published
CODEC = OrderNumberCodec("sample", keyring=RING)
OrderNo = Annotated[str, OrderNumberStr(CODEC)]


class Lookup(pydantic.BaseModel):
    number: OrderNo


class Issued(pydantic.BaseModel):
    number: Annotated[str, OrderNumberStr(CODEC, issued=True)]


class Keyed(pydantic.BaseModel):
    id: pydantic.UUID7


@pytest.mark.parametrize(
    "typed",
    ["943-130-351", "943130351", " 943 130 351 ", "943.130.351", "943 - 130 - 351", "943/130/351"],
)
def test_what_a_customer_types_becomes_the_display_form(typed: str) -> None:
    assert Lookup(number=typed).number == "943-130-351" == CODEC.encode(1)


@pytest.mark.parametrize(
    ("typed", "error", "start"),
    [
        ("943-130-315", "WrongCheckDigitError", "the check digit is wrong"),
        ("943-13O-351", "BadCharacterError", "character 'O' at position 7"),
        ("9431-30-351", "MisplacedSeparatorError", "a separator after character 4"),
        ("943-130", "BadLengthError", "the order number has 6 characters"),
        ("", "BadLengthError", "the order number is empty"),
    ],
)
def test_refusals_say_why(typed: str, error: str, start: str) -> None:
    with pytest.raises(pydantic.ValidationError) as caught:
        Lookup(number=typed)
    (problem,) = caught.value.errors()
    assert problem["type"] == ERROR_TYPE
    assert problem["msg"].startswith(start)
    assert problem["ctx"]["error"] == error


def test_only_text_is_accepted() -> None:
    # Leading zeros are significant: an integer cannot carry an order number.
    with pytest.raises(pydantic.ValidationError, match="string"):
        Lookup(number=943130351)


def test_issued_also_decrypts() -> None:
    assert Issued(number="943 130 351").number == "943-130-351"
    # Well formed with a right check digit, but all zeros is never issued.
    assert Lookup(number="000-000-000").number == "000-000-000"
    with pytest.raises(pydantic.ValidationError, match="never issued"):
        Issued(number="000-000-000")
    with pytest.raises(ValueError, match="give a codec or scheme"):
        OrderNumberStr(OrderNumberFormat(), issued=True)


def test_format_only_and_other_schemes() -> None:
    class AnyNumber(pydantic.BaseModel):
        number: Annotated[str, OrderNumberStr()]  # the default decimal format: no key

    class Plain(pydantic.BaseModel):
        number: Annotated[str, OrderNumberStr(PlainSequenceScheme(), issued=True)]

    assert AnyNumber(number="123456782").number == "123-456-782"
    plain = PlainSequenceScheme()
    assert Plain(number=plain.encode(42).replace("-", "")).number == plain.encode(42)
    short = OrderNumberCodec("sample", alphabet="crockford32", check_digit="luhn-letters")
    assert OrderNumberStr(short).validate("4a5 jxy 3") == "4A5-JXY-3"


def test_json_schema_differs_for_requests_and_responses() -> None:
    request = Lookup.model_json_schema(mode="validation")["properties"]["number"]
    response = Lookup.model_json_schema(mode="serialization")["properties"]["number"]
    assert request["type"] == response["type"] == "string"
    assert request["minLength"] == CODEC.format.min_symbols and "pattern" not in request
    assert response["pattern"] == CODEC.format.display_regex()
    example = response["examples"][0]
    assert CODEC.format.is_valid(example) and request["examples"] == [example]
    assert "OrderNumberStr(OrderNumberCodec(key='sample'" in repr(OrderNumberStr(CODEC))


def test_uuid7_keys_validate_as_pydantic_uuid7() -> None:
    key = uuid7()
    assert Keyed(id=key).id == key
    assert Keyed(id=str(key)).id == key  # JSON text
    assert Keyed.model_json_schema()["properties"]["id"]["format"] == "uuid7"
    with pytest.raises(pydantic.ValidationError, match="UUID version 7 expected"):
        Keyed(id=uuid.uuid4())


def test_module_examples_pass() -> None:
    result = doctest.testmod(integration, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_sqla_ids_does_not_import_pydantic() -> None:
    code = (
        "import sys, sqla_ids, sqla_ids.types, sqla_ids.order_numbers, sqla_ids.integrations; "
        "from sqla_ids import uuid7_pk, FormattedOrderNumber; "
        "assert 'pydantic' not in sys.modules, 'pydantic was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
