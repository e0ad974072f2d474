"""Generators built from a named JSON configuration document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sqla_ids import uuid7_timestamp_ms
from sqla_ids.identifiers import ConfigError, Layout, generator_from_config
from sqla_ids.identifiers.clock import MonotonicClock

pytestmark = pytest.mark.pure_python

DOCUMENT = {
    "generators": {
        "default": {},
        "orders": {"layout": "cpython314", "shift_ms": -86_400_000, "clock": "monotonic"},
        "tight": {"counter_bits": 12, "guard_bits": 2},
    }
}


def test_named_generators_from_a_file_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ids.json"
    path.write_text(json.dumps(DOCUMENT))
    orders = generator_from_config("orders", path)
    assert orders.layout == Layout.CPYTHON_314 and orders.shift_ms == -86_400_000
    import time

    assert abs(uuid7_timestamp_ms(orders()) - (time.time_ns() // 1_000_000 - 86_400_000)) < 2000
    assert isinstance(orders._clock, MonotonicClock)
    monkeypatch.setenv("SQLA_IDS_CONFIG", str(path))
    assert generator_from_config("tight").layout == Layout(12, 2)
    assert generator_from_config().layout == Layout.DEFAULT
    assert generator_from_config("tight", json.dumps(DOCUMENT)).layout == Layout(12, 2)
    assert generator_from_config("tight", DOCUMENT).layout == Layout(12, 2)


@pytest.mark.parametrize(
    ("document", "name", "message"),
    [
        ({"generators": {"a": {"counter_bits": 50}}}, "a", "generator 'a': counter_bits"),
        ({"generators": {"a": {"layout": "fast"}}}, "a", "unknown layout 'fast'"),
        ({"generators": {"a": {"clock": "ntp"}}}, "a", "unknown clock 'ntp'"),
        ({"generators": {"a": {"shift": 5}}}, "a", r"unknown setting\(s\) shift"),
        ({"generators": {"a": {"shift_ms": "1h"}}}, "a", "shift_ms must be an integer"),
        ({"generators": {"a": {}}}, "b", r"no generator named 'b' .*known: a"),
        ({"generator": {}}, "a", 'needs a "generators" object'),
        ("{not json", "a", "not valid JSON"),
    ],
)
def test_configuration_errors_name_the_problem(document: object, name: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        generator_from_config(name, document)  # type: ignore[arg-type]


def test_missing_configuration(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SQLA_IDS_CONFIG", raising=False)
    with pytest.raises(ConfigError, match=r"\$SQLA_IDS_CONFIG is not set"):
        generator_from_config()
    with pytest.raises(ConfigError, match="cannot read generator configuration"):
        generator_from_config("a", tmp_path / "missing.json")
