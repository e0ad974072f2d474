"""``sqla-ids generate``, ``inspect`` and ``demo``."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

from sqla_ids.cli import main
from sqla_ids.identifiers import from_base32


def test_generate_formats(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["generate", "-n", "5"]) == 0
    lines = capsys.readouterr().out.split()
    values = [uuid.UUID(line) for line in lines]
    assert len(values) == 5 and values == sorted(values) and {v.version for v in values} == {7}
    assert main(["generate", "-n", "3", "--format", "base32"]) == 0
    assert all(from_base32(t).version == 7 for t in capsys.readouterr().out.split())
    assert main(["generate", "--format", "hex"]) == 0
    assert len(capsys.readouterr().out.strip()) == 32


def test_generate_rejects_bad_count(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["generate", "-n", "0"]) == 2
    assert "-n must be between 1 and" in capsys.readouterr().err


def test_inspect_rfc_example(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "017F22E2-79B0-7CC3-98C4-DC0C0C07398F", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["timestamp"] == "2022-02-22T19:22:22.000+00:00"
    assert facts["version"] == 7 and facts["base32"] == "01FWHE4YDGFK1SHH6W1G60EECF"
    assert facts["sqlserver_sort_key"] == "dc0c0c07398f98c4c37cb079e2227f01"
    assert main(["inspect", facts["base32"].lower()]) == 0
    assert "2022-02-22T19:22:22.000+00:00" in capsys.readouterr().out


def test_inspect_non_v7_and_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(uuid.uuid4())]) == 0
    assert "not a UUIDv7" in capsys.readouterr().out
    assert main(["inspect", "12345"]) == 2
    assert "'12345' is not a UUID: expected 32 hex digits" in capsys.readouterr().err


def test_console_script_entry_point_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sqla_ids.cli", "generate", "-n", "2"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert len(result.stdout.split()) == 2
