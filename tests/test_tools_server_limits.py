"""``sqla-ids serve`` under abuse: JSON for every method, request deadline, connection cap."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from sqla_ids.cli import main
from sqla_ids.tools.server import APIServer, GeneratorAPI, make_server, serve_in_thread

pytestmark = pytest.mark.pure_python


def _start(**options: Any) -> Iterator[APIServer]:
    server = make_server("127.0.0.1", 0, api=GeneratorAPI(max_n=100), quiet=True, **options)
    thread = serve_in_thread(server)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture(scope="module")
def server() -> Iterator[APIServer]:
    yield from _start()


def _request(server: APIServer, method: str, target: str = "/uuid7?n=2") -> tuple[Any, bytes]:
    host, port = server.server_address[:2]
    connection = http.client.HTTPConnection(str(host), int(port), timeout=10)
    try:
        connection.request(method, target)
        response = connection.getresponse()
        return response, response.read()
    finally:
        connection.close()


def _raw(server: APIServer, data: bytes) -> bytes:
    with socket.create_connection(server.server_address[:2], timeout=10) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


# -- methods and protocol errors: JSON, 405 with Allow (issue 14, item 6) ---------------


@pytest.mark.parametrize(
    "method", ["OPTIONS", "TRACE", "POST", "PUT", "DELETE", "PATCH", "CONNECT", "FROBNICATE"]
)
def test_other_methods_get_json_405_with_allow(server: APIServer, method: str) -> None:
    response, body = _request(server, method)
    assert response.status == 405
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["Allow"] == "GET, HEAD"
    document = json.loads(body)
    assert document["status"] == 405 and method in document["error"]


def test_head_answers_like_get_without_a_body(server: APIServer) -> None:
    response, body = _request(server, "HEAD", "/health")
    assert response.status == 200 and body == b""
    assert response.headers["Content-Type"] == "application/json"
    assert int(response.headers["Content-Length"]) == len(json.dumps({"status": "ok"}))
    response, body = _request(server, "HEAD", "/nothing")
    assert response.status == 404 and body == b""


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /health HTTP/1.1 and more\r\n\r\n", 400),  # malformed request line
        (b"GET /health HTTP/7.0\r\n\r\n", 505),  # unsupported HTTP version
        (b"GET /" + b"x" * 70_000 + b" HTTP/1.1\r\n\r\n", 414),  # longer than the stdlib reads
    ],
)
def test_protocol_errors_are_json(server: APIServer, request_bytes: bytes, status: int) -> None:
    answer = _raw(server, request_bytes)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.0 {status} ".encode())
    assert b"Content-Type: application/json" in head
    assert json.loads(body)["status"] == status


# -- request deadline and connection cap (item 5) ----------------------------------------


def _wait_closed(sock: socket.socket, limit: float) -> tuple[bytes, float]:
    """What the server sends before closing ``sock``, and when it closed it."""
    start = time.monotonic()
    sock.settimeout(limit)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except TimeoutError:
        return received, float("inf")
    except ConnectionResetError:
        pass
    return received, time.monotonic() - start


@pytest.mark.slow  # waits for real timeouts
def test_silent_connections_are_closed_after_the_timeout() -> None:
    for server in _start(request_timeout=0.5):
        socks = [socket.create_connection(server.server_address[:2]) for _ in range(5)]
        try:
            results = [_wait_closed(sock, 10) for sock in socks]
        finally:
            for sock in socks:
                sock.close()
        assert all(data == b"" for data, _ in results)
        assert max(elapsed for _, elapsed in results) < 3  # not held: closed at ~0.5 s
        response, _ = _request(server, "GET", "/health")
        assert response.status == 200


@pytest.mark.slow  # waits for real timeouts
def test_a_trickled_request_is_cut_off_at_the_deadline() -> None:
    for server in _start(request_timeout=0.6):
        with socket.create_connection(server.server_address[:2], timeout=10) as sock:
            start = time.monotonic()
            sent = 0
            try:
                for byte in b"GET /health HTTP/1.1\r\nX-Slow: " + b"a" * 100:
                    sock.send(bytes([byte]))  # each byte well within the per-read timeout
                    sent += 1
                    time.sleep(0.05)
            except OSError:
                pass
            data, _ = _wait_closed(sock, 10)
            elapsed = time.monotonic() - start
        assert data == b"" and sent < 100 and elapsed < 4


@pytest.mark.slow  # waits for real timeouts
def test_connections_beyond_the_cap_get_503_at_once() -> None:
    for server in _start(max_connections=2, request_timeout=30):
        held = [socket.create_connection(server.server_address[:2]) for _ in range(2)]
        try:
            time.sleep(0.3)  # both accepted and waiting for their request
            threads = threading.active_count()
            extra = socket.create_connection(server.server_address[:2])
            data, elapsed = _wait_closed(extra, 5)
            extra.close()
            head, _, body = data.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.0 503 ") and elapsed < 2
            assert b"Retry-After: 1" in head
            assert json.loads(body)["status"] == 503
            assert threading.active_count() <= threads  # no thread for the refused one
        finally:
            for sock in held:
                sock.close()
        time.sleep(0.3)  # the held ones end (EOF) and give their slots back
        response, _ = _request(server, "GET", "/health")
        assert response.status == 200


def test_server_refuses_bad_limits() -> None:
    with pytest.raises(ValueError, match="request_timeout"):
        make_server("127.0.0.1", 0, request_timeout=0)
    with pytest.raises(ValueError, match="max_connections"):
        make_server("127.0.0.1", 0, max_connections=0)


@pytest.mark.parametrize(
    ("options", "message"),
    [(["--timeout", "0"], "--timeout"), (["--max-connections", "0"], "--max-connections")],
)
def test_cli_serve_refuses_bad_limits(
    options: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--port", "0", *options]) == 2
    assert message in capsys.readouterr().err
