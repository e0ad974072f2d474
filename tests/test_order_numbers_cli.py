"""``sqla-ids order-number`` through ``sqla_ids.cli.main``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sqla_ids.cli import main
from sqla_ids.order_numbers import Keyring, OrderNumberCodec, default_keyring

KEY = "EF4359D8D580AA4F7F036D6F04FC6A94"
TWEAK = "D8E7920AFA330A"


@pytest.fixture(autouse=True)
def environment_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SQLA_IDS_ORDER_KEY", KEY)
    monkeypatch.setenv("SQLA_IDS_ORDER_TWEAK", TWEAK)
    monkeypatch.delenv("SQLA_IDS_ORDER_KEY_OTHER", raising=False)
    default_keyring.forget("default")
    default_keyring.forget("other")
    yield
    default_keyring.forget("default")  # the CLI loaded it from this test's environment


def _expected(value: int) -> str:
    ring = Keyring(environ={})
    ring.register("k", KEY, TWEAK)
    return OrderNumberCodec("k", keyring=ring).encode(value)


def test_encode_decode_validate(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["order-number", "encode", "1", "42"]) == 0
    out = capsys.readouterr().out
    assert out == f"1\t{_expected(1)}\n42\t{_expected(42)}\n"
    typed = _expected(42).replace("-", "")
    assert main(["order-number", "decode", typed]) == 0
    assert capsys.readouterr().out == f"{_expected(42)}\t42\n"
    assert main(["order-number", "validate", typed, typed[:-1] + "x"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"OK\t{_expected(42)}"
    assert lines[1].startswith("INVALID") and "not allowed" in lines[1]


def test_encode_range_uses_batch(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["order-number", "encode", "--range", "1", "500", "--separator", "none"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 500
    assert lines[41] == f"42\t{_expected(42).replace('-', '')}"


def test_errors_are_command_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["order-number", "decode", "123-456-789"]) == 2
    err = capsys.readouterr().err
    assert "check digit is wrong" in err
    assert main(["order-number", "encode", "0"]) == 2
    assert "outside" in capsys.readouterr().err
    assert main(["order-number", "encode", "--key", "other", "1"]) == 2
    err = capsys.readouterr().err
    assert "SQLA_IDS_ORDER_KEY_OTHER" in err
    assert KEY.lower() not in err.lower()


def test_bad_key_in_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SQLA_IDS_ORDER_KEY", "not-hex-secret")
    assert main(["order-number", "encode", "1"]) == 2
    err = capsys.readouterr().err
    assert "not a hexadecimal" in err and "not-hex-secret" not in err


def test_qr_svg(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("segno")
    number = _expected(7)
    assert main(["order-number", "qr", number, "--url", "https://shop.example/o/{number}"]) == 0
    svg = capsys.readouterr().out
    assert svg.startswith("<svg") and "</svg>" in svg
    assert (
        main(["order-number", "qr", number[:-1] + "0" if number[-1] != "0" else number[:-1] + "1"])
        == 2
    )


@pytest.mark.parametrize(
    ("action", "keyed"), [("encode", True), ("decode", True), ("validate", False), ("qr", False)]
)
def test_only_the_actions_that_use_the_key_offer_key(
    action: str, keyed: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["order-number", action, "--help"])
    assert exit_.value.code == 0
    shown = capsys.readouterr().out
    assert ("--key NAME" in shown) is keyed
    assert ("no key is needed" in shown) is not keyed


def test_validate_works_without_any_key_configured(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    number = _expected(7)
    monkeypatch.delenv("SQLA_IDS_ORDER_KEY")
    monkeypatch.delenv("SQLA_IDS_ORDER_TWEAK")
    default_keyring.forget("default")
    assert main(["order-number", "validate", number.replace("-", "")]) == 0
    assert capsys.readouterr().out == f"OK\t{number}\n"
    with pytest.raises(SystemExit):  # argparse: no such option
        main(["order-number", "validate", "--key", "other", number])
