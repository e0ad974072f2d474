"""A small HTTP API for batch generation (docs/tools.md), on the standard library.

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

Every answer is JSON: bad requests get a 4xx answer ``{"error": "...",
"status": N}`` naming the problem, methods other than ``GET`` and ``HEAD``
get 405 with an ``Allow`` header. The server binds to loopback by default,
serves at most ``max_connections`` connections at once (503 beyond) and gives
each ``request_timeout`` seconds for its request to arrive.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
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
DEFAULT_REQUEST_TIMEOUT = 10.0
"""Seconds for a request to arrive, and for each write of the answer."""
DEFAULT_MAX_CONNECTIONS = 64
"""Connections served at once, each by a thread; further ones get 503."""
MAX_URL_LENGTH = 8_192
MAX_DISCARDED_BODY = 65_536
ALLOWED_METHODS = "GET, HEAD"


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
    expired = False  # set by the server when the request did not arrive in time

    def setup(self) -> None:
        super().setup()
        # Every read and write on the socket waits at most this long...
        self.connection.settimeout(self.server.request_timeout)
        # ...and the whole request must arrive within it, however slowly it trickles.
        self.server._watch(self)

    def parse_request(self) -> bool:
        parsed = super().parse_request()  # reads the headers
        if not self.server._unwatch(self):
            self.close_connection = True
            return False  # cut off: whatever arrived is incomplete
        return parsed

    def finish(self) -> None:
        self.server._unwatch(self)
        with contextlib.suppress(OSError):  # the client is gone; nothing left to flush to
            super().finish()

    def do_GET(self) -> None:
        try:
            status, payload = HTTPStatus.OK, self.server.api.handle(self.path)
        except RequestError as error:
            status, payload = error.status, {"error": str(error), "status": int(error.status)}
        self._send(status, payload)

    def do_HEAD(self) -> None:
        self.do_GET()  # the same status and headers; ``_send`` leaves the body out

    def _refuse(self) -> None:
        self._discard_body()
        self._send(
            HTTPStatus.METHOD_NOT_ALLOWED,
            {"error": f"method {self.command} not allowed; use GET or HEAD", "status": 405},
            extra={"Allow": ALLOWED_METHODS},
        )

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_TRACE = do_CONNECT = _refuse

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's own refusals, as JSON like every other answer."""
        if code == HTTPStatus.NOT_IMPLEMENTED and self.command:  # a method it does not know
            self._refuse()
            return
        status = HTTPStatus(code)
        self.close_connection = True
        if self.request_version == "HTTP/0.9":  # the request line was not understood:
            self.request_version = "HTTP/1.0"  # answer with a status line and headers anyway
        self._send(status, {"error": message or status.phrase, "status": int(status)})

    def _discard_body(self) -> None:
        """Read a small request body, so closing the socket does not reset the answer."""
        self.close_connection = True
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            return
        if 0 < length <= MAX_DISCARDED_BODY:
            self.rfile.read(length)

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
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        if not self.server.quiet:
            super().log_message(format, *args)


class APIServer(ThreadingHTTPServer):
    """A threading HTTP server answering with a :class:`GeneratorAPI`.

    Each connection gets a thread, at most ``max_connections`` at once (the
    next ones are answered 503 at once and closed), and ``request_timeout``
    seconds: for the whole request to arrive, and for each later write.
    """

    daemon_threads = True
    request_queue_size = 128  # the listen backlog: bursts wait in the kernel, not in threads

    def __init__(
        self,
        address: tuple[str, int],
        api: GeneratorAPI,
        *,
        quiet: bool = False,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ):
        if not request_timeout > 0:
            raise ValueError(f"request_timeout must be positive seconds, got {request_timeout}")
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections}")
        super().__init__(address, _Handler)
        self.api = api
        self.quiet = quiet
        self.request_timeout = request_timeout
        self.max_connections = max_connections
        self._slots = threading.BoundedSemaphore(max_connections)
        self._deadlines: dict[_Handler, float] = {}
        self._deadlines_lock = threading.Lock()
        self._closing = threading.Event()
        self._reaper = threading.Thread(target=self._reap, name="sqla-ids-reaper", daemon=True)
        self._reaper.start()

    @property
    def url(self) -> str:
        """Base URL the server listens on."""
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- the connection cap -------------------------------------------------------------

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._turn_away(request, client_address)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def _turn_away(self, request: socket.socket, client_address: Any) -> None:
        """Answer 503 without a thread: the accepting thread writes a few bytes and closes."""
        body = json.dumps(
            {
                "error": f"too many connections (at most {self.max_connections}); retry shortly",
                "status": 503,
            }
        ).encode("utf-8")
        head = (
            "HTTP/1.0 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
        ).encode("ascii")
        try:
            request.setblocking(False)
            with contextlib.suppress(BlockingIOError, InterruptedError):
                request.recv(65536)  # what the client already sent, so closing does not reset
            request.send(head + body)  # fits the empty send buffer of a new connection
        except OSError:
            pass
        if not self.quiet:
            host = client_address[0] if isinstance(client_address, tuple) else client_address
            sys.stderr.write(
                f"{host} - - turned away (503): {self.max_connections} connections open\n"
            )

    # -- the request deadline -----------------------------------------------------------

    def _watch(self, handler: _Handler) -> None:
        with self._deadlines_lock:
            self._deadlines[handler] = time.monotonic() + self.request_timeout

    def _unwatch(self, handler: _Handler) -> bool:
        """Stop watching ``handler``; False if its deadline had already cut it off."""
        with self._deadlines_lock:
            self._deadlines.pop(handler, None)
            return not handler.expired

    def _reap(self) -> None:
        """Cut off connections whose request did not arrive within ``request_timeout``."""
        tick = min(0.25, self.request_timeout / 4)
        while not self._closing.wait(tick):
            now = time.monotonic()
            with self._deadlines_lock:
                late = [h for h, deadline in self._deadlines.items() if deadline <= now]
                for handler in late:
                    del self._deadlines[handler]
                    handler.expired = True
            for handler in late:
                handler.log_message("closed: no complete request within %g s", self.request_timeout)
                with contextlib.suppress(OSError):
                    handler.connection.shutdown(socket.SHUT_RDWR)  # wakes its blocked read

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):  # a client that went away mid-answer
            return
        super().handle_error(request, client_address)

    def server_close(self) -> None:
        self._closing.set()
        super().server_close()


def make_server(
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    api: GeneratorAPI | None = None,
    quiet: bool = False,
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
) -> APIServer:
    """Create (bind) the server; ``port=0`` picks a free port. Call ``serve_forever()``."""
    return APIServer(
        (host, port),
        api or GeneratorAPI(),
        quiet=quiet,
        request_timeout=request_timeout,
        max_connections=max_connections,
    )


def serve_in_thread(server: APIServer) -> threading.Thread:
    """Run ``server`` in a daemon thread (stop it with ``server.shutdown()``)."""
    thread = threading.Thread(target=server.serve_forever, name="sqla-ids-serve", daemon=True)
    thread.start()
    return thread
