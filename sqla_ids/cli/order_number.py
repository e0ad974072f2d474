"""``sqla-ids order-number encode|decode|validate|qr``.

The key is never an argument (it would land in shell history and process
lists): it comes from ``SQLA_IDS_ORDER_KEY``/``SQLA_IDS_ORDER_TWEAK``, or
``SQLA_IDS_ORDER_KEY_<NAME>``/``SQLA_IDS_ORDER_TWEAK_<NAME>`` with ``--key NAME``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from sqla_ids.errors import CommandError
from sqla_ids.order_numbers import (
    ALPHABETS,
    CHECK_DIGITS,
    KeyConfigurationError,
    OrderNumberCodec,
    OrderNumberError,
)
from sqla_ids.order_numbers.format import SEPARATORS

MAX_RANGE = 10_000_000


KEY_HELP = (
    "The FF3-1 key is never an argument (it would land in shell history and process "
    "lists): encode and decode read it from the environment variables SQLA_IDS_ORDER_KEY "
    "(32, 48 or 64 hex digits: AES-128/192/256) and SQLA_IDS_ORDER_TWEAK (14 hex digits), "
    "or SQLA_IDS_ORDER_KEY_<NAME> and SQLA_IDS_ORDER_TWEAK_<NAME> (NAME in capitals) with "
    "--key NAME."
)
NO_KEY_HELP = "It checks the format and the check digit only: no key is needed."


def register(subparsers: Any) -> None:
    """Add ``order-number`` and its sub-commands to the command line."""
    parser = subparsers.add_parser(
        "order-number",
        help="encode, decode and validate customer-facing order numbers",
        description="FF3-1 encrypted order numbers with a check digit. "
        + KEY_HELP
        + " validate and qr need no key.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    def add(name: str, help_text: str, keyed: bool) -> argparse.ArgumentParser:
        # Only encode and decode use the key: validate and qr offer no --key.
        sub: argparse.ArgumentParser = actions.add_parser(
            name, help=help_text, description=f"{help_text} {KEY_HELP if keyed else NO_KEY_HELP}"
        )
        if keyed:
            sub.add_argument(
                "--key",
                default="default",
                metavar="NAME",
                help="key name: 'default' reads SQLA_IDS_ORDER_KEY/SQLA_IDS_ORDER_TWEAK, "
                "any other NAME reads SQLA_IDS_ORDER_KEY_<NAME>/SQLA_IDS_ORDER_TWEAK_<NAME> "
                "(default: 'default')",
            )
        sub.set_defaults(key="default")  # validate/qr: a codec whose key is never read
        sub.add_argument(
            "--alphabet",
            choices=sorted(ALPHABETS),
            default="decimal",
            help="digits of the number: decimal, or Crockford Base32 letters and digits "
            "(default: decimal)",
        )
        sub.add_argument(
            "--check-digit",
            choices=list(CHECK_DIGITS),
            default="luhn",
            help="check-digit scheme appended to the number; 'none' for no check digit "
            "(default: luhn)",
        )
        sub.add_argument(
            "--separator",
            choices=[s or "none" for s in SEPARATORS],
            default="-",
            help="separator between groups of 3 (default '-')",
        )
        return sub

    encode = add("encode", "Print the order numbers of sequence values.", keyed=True)
    encode.add_argument("values", nargs="*", type=int, metavar="N", help="sequence values")
    encode.add_argument(
        "--range", nargs=2, type=int, metavar=("START", "COUNT"), help="encode START… in a batch"
    )
    encode.set_defaults(handler=run_encode)

    decode = add("decode", "Print the sequence values behind order numbers.", keyed=True)
    decode.add_argument(
        "numbers", nargs="+", metavar="NUMBER", help="order numbers, with or without separators"
    )
    decode.set_defaults(handler=run_decode)

    validate = add(
        "validate", "Check order numbers as typed; print their display form.", keyed=False
    )
    validate.add_argument(
        "numbers", nargs="+", metavar="NUMBER", help="order numbers as typed by a person"
    )
    validate.set_defaults(handler=run_validate)

    qr = add("qr", "Print an SVG QR code for a (validated) order number.", keyed=False)
    qr.add_argument("number", metavar="NUMBER", help="the order number to put in the code")
    qr.add_argument(
        "--url", help="URL template with {number}, e.g. https://shop.example/o/{number}"
    )
    qr.set_defaults(handler=run_qr)


def _codec(args: argparse.Namespace) -> OrderNumberCodec:
    try:
        return OrderNumberCodec(
            args.key,
            alphabet=args.alphabet,
            check_digit=args.check_digit,
            separator="" if args.separator == "none" else args.separator,
        )
    except ValueError as error:
        raise CommandError(str(error)) from None


def run_encode(args: argparse.Namespace) -> int:
    """Print one order number per value."""
    codec = _codec(args)
    values = list(args.values)
    if args.range:
        start, count = args.range
        if not 1 <= count <= MAX_RANGE:
            raise CommandError(f"--range COUNT must be between 1 and {MAX_RANGE:,}")
        skipped = set()
        try:
            skipped = set(codec.skipped_values())
        except KeyConfigurationError as error:
            raise CommandError(str(error)) from None
        values += [v for v in range(start, start + count) if v not in skipped]
    if not values:
        raise CommandError("give sequence values or --range START COUNT")
    try:
        numbers = codec.encode_many(values)
    except (OrderNumberError, KeyConfigurationError) as error:
        raise CommandError(str(error)) from None
    sys.stdout.write("".join(f"{v}\t{x}\n" for v, x in zip(values, numbers, strict=True)))
    return 0


def run_decode(args: argparse.Namespace) -> int:
    """Print the sequence value of each order number."""
    codec = _codec(args)
    for number in args.numbers:
        try:
            value = codec.decode(number)
        except (OrderNumberError, KeyConfigurationError) as error:
            raise CommandError(f"{number!r}: {error}") from None
        print(f"{codec.normalize(number)}\t{value}")
    return 0


def run_validate(args: argparse.Namespace) -> int:
    """Print ``OK`` and the display form, or the reason; exit 1 if any is invalid."""
    codec = _codec(args)
    status = 0
    for number in args.numbers:
        try:
            print(f"OK\t{codec.validate(number)}")
        except OrderNumberError as error:
            print(f"INVALID\t{number!r}: {error}")
            status = 1
    return status


def run_qr(args: argparse.Namespace) -> int:
    """Write an SVG QR code of the validated number (or a URL holding it)."""
    from sqla_ids.order_numbers.qr import order_number_qr_svg

    codec = _codec(args)
    try:
        number = codec.validate(args.number)
        svg = order_number_qr_svg(number, url_template=args.url)
    except OrderNumberError as error:
        raise CommandError(str(error)) from None
    except (ImportError, KeyError, IndexError) as error:
        raise CommandError(f"cannot make the QR code: {error}") from None
    sys.stdout.write(svg + "\n")
    return 0
