"""A small HTTP API for batch generation (SPEC §5), on the standard library.

Endpoints (all ``GET``, all answering JSON):

``/uuid7?n=1000&format=canonical|hex|base32``
    ``n`` new monotonic UUIDv7 values (1 ≤ n ≤ ``max_n``, default 100 000).
``/order-numbers/encode?value=1&value=2``
    display forms of sequence values (needs the configured FF3-1 key; 503
    when it is missing). At most ``max_values`` values per request.
``/order-numbers/validate?number=943-130-351``
    whether user input is a well-formed order number, its normalised form, or
    the reason it is not (no key needed, nothing is decoded: the API never
    reveals the sequence value behind a number).
``/health``
    ``{"status": "ok"}``.

Bad requests get a 4xx answer ``{"error": "...", "status": N}`` naming the
problem. The server binds to loopback by default.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from sqla_ids.identifiers import uuid7_batch
from sqla_ids.identifiers.encoding import FORMATTERS
from sqla_ids.order_numbers import KeyConfigurationError, OrderNumberCodec, OrderNumberError

DEFAULT_MAX_N = 100_000
DEFAULT_MAX_VALUES = 1_000
MAX_URL_LENGTH = 8_192


class RequestError(ValueError):
    """A request the API refuses; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


Query = dict[str, list[str]]


def _only(query: Query, allowed: set[str]) -> None:
    unknown = sorted(set(query) - allowed)
    if unknown:
        raise RequestError(
            HTTPStatus.BAD_REQUEST,
            f"unknown parameter(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}",
        )


def _single(query: Query, name: str, default: str | None = None) -> str:
    values = query.get(name)
    if not values:
        if default is None:
            raise RequestError(HTTPStatus.BAD_REQUEST, f"parameter {name!r} is required")
        return default
    if len(values) > 1:
        raise RequestError(HTTPStatus.BAD_REQUEST, f"parameter {name!r} given more than once")
    return values[0]


def _integer(text: str, name: str, low: int, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise RequestError(
            HTTPStatus.BAD_REQUEST, f"parameter {name!r} must be an integer, got {text[:40]!r}"
        ) from None
    if not low <= value <= high:
        raise RequestError(
            HTTPStatus.BAD_REQUEST,
            f"parameter {name!r} must be from {low} to {high:,}, got {value}",
        )
    return value


class GeneratorAPI:
    """The API's logic, independent of HTTP plumbing: ``path + query`` → JSON payload."""

    def __init__(
        self,
        *,
        max_n: int = DEFAULT_MAX_N,
        max_values: int = DEFAULT_MAX_VALUES,
        codec: OrderNumberCodec | None = None,
    ) -> None:
        if max_n < 1 or max_values < 1:
            raise ValueError("max_n and max_values must be at least 1")
        self.max_n = max_n
        self.max_values = max_values
        self.codec = OrderNumberCodec() if codec is None else codec
        self._routes: dict[str, Callable[[Query], dict[str, Any]]] = {
            "/uuid7": self.uuid7,
            "/order-numbers/encode": self.encode_order_numbers,
            "/order-numbers/validate": self.validate_order_number,
            "/health": lambda query: {"status": "ok"},
        }

    def handle(self, target: str) -> dict[str, Any]:
        """Answer a ``GET`` of ``target`` (path and query string) or raise :class:`RequestError`."""
        if len(target) > MAX_URL_LENGTH:
            raise RequestError(
                HTTPStatus.REQUEST_URI_TOO_LONG, f"URL longer than {MAX_URL_LENGTH} characters"
            )
        parts = urlsplit(target)
        route = self._routes.get(parts.path.rstrip("/") or "/")
        if route is None:
            raise RequestError(
                HTTPStatus.NOT_FOUND,
                f"no endpoint {parts.path!r}; endpoints: {', '.join(sorted(self._routes))}",
            )
        try:
            query = parse_qs(parts.query, keep_blank_values=True, max_num_fields=self.max_values)
        except ValueError:
            raise RequestError(
                HTTPStatus.BAD_REQUEST, f"more than {self.max_values} query parameters"
            ) from None
        return route(query)

    def uuid7(self, query: Query) -> dict[str, Any]:
        """``/uuid7``: a batch of new UUIDv7 values."""
        _only(query, {"n", "format"})
        count = _integer(_single(query, "n", "1"), "n", 1, self.max_n)
        name = _single(query, "format", "canonical")
        formatter = FORMATTERS.get(name)
        if formatter is None:
            raise RequestError(
                HTTPStatus.BAD_REQUEST,
                f"format must be one of {', '.join(sorted(FORMATTERS))}, got {name[:40]!r}",
            )
        return {"format": name, "count": count, "uuids": list(map(formatter, uuid7_batch(count)))}

    def encode_order_numbers(self, query: Query) -> dict[str, Any]:
        """``/order-numbers/encode``: display forms of sequence values."""
        _only(query, {"value"})
        texts = query.get("value") or []
        if not texts:
            raise RequestError(HTTPStatus.BAD_REQUEST, "parameter 'value' is required")
        values = [_integer(text, "value", 1, self.codec.max_value) for text in texts]
        try:
            numbers = self.codec.encode_many(values)
        except KeyConfigurationError as error:
            raise RequestError(HTTPStatus.SERVICE_UNAVAILABLE, str(error)) from None
        except OrderNumberError as error:
            raise RequestError(HTTPStatus.UNPROCESSABLE_ENTITY, str(error)) from None
        return {
            "order_numbers": [
                {"value": v, "number": n} for v, n in zip(values, numbers, strict=True)
            ]
        }

    def validate_order_number(self, query: Query) -> dict[str, Any]:
        """``/order-numbers/validate``: is this user input a valid order number?"""
        _only(query, {"number"})
        text = _single(query, "number")
        if len(text) > 100:
            raise RequestError(HTTPStatus.BAD_REQUEST, "parameter 'number' is too long")
        try:
            display = self.codec.validate(text)
        except OrderNumberError as error:
            return {
                "number": text,
                "valid": False,
                "reason": type(error).__name__,
                "error": str(error),
            }
        return {"number": text, "valid": True, "normalized": display}


class _Handler(BaseHTTPRequestHandler):
    server: APIServer
    server_version = "sqla-ids"

    def do_GET(self) -> None:
        try:
            status, payload = HTTPStatus.OK, self.server.api.handle(self.path)
        except RequestError as error:
            status, payload = error.status, {"error": str(error), "status": int(error.status)}
        self._send(status, payload)

    def _refuse(self) -> None:
        self._send(
            HTTPStatus.METHOD_NOT_ALLOWED,
            {"error": f"method {self.command} not allowed; use GET", "status": 405},
            extra={"Allow": "GET"},
        )

    do_POST = do_PUT = do_DELETE = do_PATCH = _refuse

    def _send(
        self, status: HTTPStatus, payload: dict[str, Any], extra: dict[str, str] | None = None
    ) -> None:
        body = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")  # every answer is fresh
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        if not self.server.quiet:
            super().log_message(format, *args)


class APIServer(ThreadingHTTPServer):
    """A threading HTTP server answering with a :class:`GeneratorAPI`."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], api: GeneratorAPI, *, quiet: bool = False):
        super().__init__(address, _Handler)
        self.api = api
        self.quiet = quiet

    @property
    def url(self) -> str:
        """Base URL the server listens on."""
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


def make_server(
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    api: GeneratorAPI | None = None,
    quiet: bool = False,
) -> APIServer:
    """Create (bind) the server; ``port=0`` picks a free port. Call ``serve_forever()``."""
    return APIServer((host, port), api or GeneratorAPI(), quiet=quiet)


def serve_in_thread(server: APIServer) -> threading.Thread:
    """Run ``server`` in a daemon thread (stop it with ``server.shutdown()``)."""
    thread = threading.Thread(target=server.serve_forever, name="sqla-ids-serve", daemon=True)
    thread.start()
    return thread
