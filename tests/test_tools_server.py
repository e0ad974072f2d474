"""``sqla-ids serve``: the HTTP API, started on an ephemeral loopback port."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from sqla_ids.identifiers import from_base32, parse_uuid, uuid7_timestamp_ms
from sqla_ids.order_numbers import Keyring, OrderNumberCodec
from sqla_ids.tools.server import APIServer, GeneratorAPI, make_server, serve_in_thread

pytestmark = pytest.mark.pure_python

TEST_KEY = "2DE79D232DF5585D68CE47882AE256D6"  # NIST FF3-1 sample key: test only
TEST_TWEAK = "CBD09280979564"


def _codec(with_key: bool) -> OrderNumberCodec:
    keyring = Keyring(environ={})
    if with_key:
        keyring.register("default", TEST_KEY, TEST_TWEAK)
    return OrderNumberCodec(keyring=keyring)


def _start(api: GeneratorAPI) -> Iterator[APIServer]:
    server = make_server("127.0.0.1", 0, api=api, quiet=True)
    thread = serve_in_thread(server)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture(scope="module")  # one server: shutting one down takes 0.5 s
def server() -> Iterator[APIServer]:
    yield from _start(GeneratorAPI(max_n=5000, max_values=50, codec=_codec(True)))


def get(server: APIServer, target: str, method: str = "GET") -> tuple[int, Any]:
    request = urllib.request.Request(server.url + target, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.headers["Content-Type"] == "application/json"
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        assert error.headers["Content-Type"] == "application/json"
        return error.code, json.loads(error.read())


def test_uuid7_batch_is_monotonic_and_unique(server: APIServer) -> None:
    status, body = get(server, "/uuid7?n=1000")
    assert status == 200 and body["count"] == 1000 and body["format"] == "canonical"
    values = [parse_uuid(text) for text in body["uuids"]]
    assert values == sorted(values) and len(set(values)) == 1000
    assert all(v.version == 7 for v in values)
    _, again = get(server, "/uuid7?n=1000")
    assert parse_uuid(again["uuids"][0]) > values[-1]  # one generator, still monotonic


@pytest.mark.parametrize("name", ["hex", "base32"])
def test_uuid7_formats(server: APIServer, name: str) -> None:
    status, body = get(server, f"/uuid7?n=3&format={name}")
    assert status == 200
    read = from_base32 if name == "base32" else parse_uuid
    assert all(uuid7_timestamp_ms(read(text)) > 0 for text in body["uuids"])
    assert all(len(text) == (32 if name == "hex" else 26) for text in body["uuids"])


def test_default_is_one(server: APIServer) -> None:
    assert len(get(server, "/uuid7")[1]["uuids"]) == 1


@pytest.mark.parametrize(
    ("target", "status", "message"),
    [
        ("/uuid7?n=0", 400, "from 1 to 5,000"),
        ("/uuid7?n=5001", 400, "from 1 to 5,000"),
        ("/uuid7?n=ten", 400, "must be an integer"),
        ("/uuid7?n=1&n=2", 400, "more than once"),
        ("/uuid7?format=octal", 400, "format must be one of"),
        ("/uuid7?count=3", 400, "unknown parameter(s) count"),
        ("/nothing", 404, "no endpoint"),
        ("/uuid7?" + "x" * 9000, 414, "URL longer"),
        ("/order-numbers/encode", 400, "'value' is required"),
        ("/order-numbers/encode?value=0", 400, "must be from 1"),
        ("/order-numbers/encode?" + "&".join(["value=1"] * 60), 400, "more than 50"),
        ("/order-numbers/validate", 400, "'number' is required"),
    ],
)
def test_bad_requests_get_clear_json_errors(
    server: APIServer, target: str, status: int, message: str
) -> None:
    got, body = get(server, target)
    assert got == status and body["status"] == status
    assert message in body["error"]


def test_only_get_is_allowed(server: APIServer) -> None:
    status, body = get(server, "/uuid7", method="POST")
    assert status == 405 and "use GET" in body["error"]


def test_order_numbers_encode_and_validate(server: APIServer) -> None:
    codec = _codec(True)
    status, body = get(server, "/order-numbers/encode?value=1&value=123")
    assert status == 200
    numbers = body["order_numbers"]
    assert [n["value"] for n in numbers] == [1, 123]
    assert [n["number"] for n in numbers] == codec.encode_many([1, 123])
    typed = numbers[1]["number"].replace("-", "")
    status, body = get(server, f"/order-numbers/validate?number={typed}")
    assert status == 200 and body == {
        "number": typed,
        "valid": True,
        "normalized": numbers[1]["number"],
    }
    wrong = typed[:-1] + str((int(typed[-1]) + 1) % 10)
    status, body = get(server, f"/order-numbers/validate?number={wrong}")
    assert status == 200 and body["valid"] is False
    assert body["reason"] == "WrongCheckDigitError"
    assert "value" not in body  # the API never reveals the sequence value


def test_encode_without_key_is_503_and_secret_free() -> None:
    for server in _start(GeneratorAPI(codec=_codec(False))):
        status, body = get(server, "/order-numbers/encode?value=7")
        assert status == 503 and "no order-number key" in body["error"]
        assert get(server, "/uuid7?n=2")[0] == 200  # the rest keeps working


def test_cli_serve_starts_and_answers() -> None:
    environment = {**os.environ, "SQLA_IDS_ORDER_KEY": TEST_KEY, "SQLA_IDS_ORDER_TWEAK": TEST_TWEAK}
    process = subprocess.Popen(
        [sys.executable, "-m", "sqla_ids.cli", "serve", "--port", "0", "--quiet"],
        stdout=subprocess.PIPE,
        text=True,
        env=environment,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "listening on http://127.0.0.1:" in line and "encoding enabled" in line
        url = line.split("listening on ")[1].split()[0]
        with urllib.request.urlopen(url + "/uuid7?n=5", timeout=10) as response:
            assert len(json.loads(response.read())["uuids"]) == 5
        assert TEST_KEY not in line
    finally:
        process.terminate()
        process.wait(10)


def test_cli_serve_rejects_bad_port(capsys: pytest.CaptureFixture[str]) -> None:
    from sqla_ids.cli import main

    assert main(["serve", "--port", "70000"]) == 2
    assert "--port" in capsys.readouterr().err
