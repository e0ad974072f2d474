"""``sqla-ids serve``: the HTTP API for batch generation."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from sqla_ids.errors import CommandError
from sqla_ids.tools.server import (
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_N,
    DEFAULT_MAX_VALUES,
    DEFAULT_REQUEST_TIMEOUT,
    GeneratorAPI,
    make_server,
)


def register(subparsers: Any) -> None:
    """Add ``serve`` to the command line."""
    parser = subparsers.add_parser(
        "serve",
        help="serve UUIDv7 batches and order numbers over HTTP",
        description=(
            "HTTP API: GET /uuid7?n=1000&format=canonical|hex|base32, "
            "/order-numbers/encode?value=N, /order-numbers/validate?number=TEXT, /health; "
            "JSON answers, 405 for methods other than GET and HEAD. "
            "Order-number encoding reads its key from SQLA_IDS_ORDER_KEY/SQLA_IDS_ORDER_TWEAK "
            "(or the _<NAME> variants for --order-key NAME)."
        ),
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (8000; 0 picks a free one)")
    parser.add_argument(
        "--max-n", type=int, default=DEFAULT_MAX_N, help=f"largest batch ({DEFAULT_MAX_N:,})"
    )
    parser.add_argument(
        "--order-key", default="default", help="name of the order-number key (default)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_REQUEST_TIMEOUT,
        help="seconds for a request to arrive and for each write of the answer; slower "
        f"connections are closed ({DEFAULT_REQUEST_TIMEOUT:g})",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=DEFAULT_MAX_CONNECTIONS,
        help="connections served at once, one thread each; more are answered 503 "
        f"({DEFAULT_MAX_CONNECTIONS})",
    )
    parser.add_argument("--quiet", action="store_true", help="do not log requests")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted."""
    from sqla_ids.order_numbers import KeyConfigurationError, OrderNumberCodec

    if not 0 <= args.port <= 65535:
        raise CommandError(f"--port must be from 0 to 65535, got {args.port}")
    if args.max_n < 1:
        raise CommandError(f"--max-n must be at least 1, got {args.max_n}")
    if not 0 < args.timeout <= 3600:
        raise CommandError(
            f"--timeout must be more than 0 and at most 3600 seconds, got {args.timeout:g}"
        )
    if args.max_connections < 1:
        raise CommandError(f"--max-connections must be at least 1, got {args.max_connections}")
    try:
        codec = OrderNumberCodec(args.order_key)
        codec.engine  # noqa: B018 - load the key now, to report its absence at start-up
        encoding = "enabled"
    except KeyConfigurationError as error:
        encoding = f"disabled ({error})"
    api = GeneratorAPI(max_n=args.max_n, max_values=DEFAULT_MAX_VALUES, codec=codec)
    try:
        server = make_server(
            args.host,
            args.port,
            api=api,
            quiet=args.quiet,
            request_timeout=args.timeout,
            max_connections=args.max_connections,
        )
    except OSError as error:
        raise CommandError(f"cannot listen on {args.host}:{args.port}: {error.strerror}") from None
    print(f"sqla-ids serve: listening on {server.url} (order-number encoding {encoding})")
    sys.stdout.flush()
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0
