"""``generate`` streams, ``inspect`` tells what a UUID is, every option has help."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import uuid
from typing import Any

import pytest

import sqla_ids
from sqla_ids.cli import build_parser, main, uuid_commands
from sqla_ids.identifiers import uuid7_timestamp_ms

pytestmark = pytest.mark.pure_python

# RFC 9562 Appendix A test vectors: Tuesday, February 22, 2022 2:22:22.00 PM GMT-05:00.
RFC_V1 = "C232AB00-9414-11EC-B3C8-9F6BDECED846"
RFC_V6 = "1EC9414C-232A-6B00-B3C8-9F6BDECED846"
RFC_TIME = "2022-02-22T19:22:22.000000+00:00"
NIL = "00000000-0000-0000-0000-000000000000"
MAX = "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF"


# -- generate: streamed in chunks (issue 14, item 4) -------------------------------------


def test_generate_makes_values_in_chunks(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sizes: list[int] = []
    batch = uuid_commands.uuid7_batch

    def recording_batch(count: int) -> list[uuid.UUID]:
        sizes.append(count)
        return batch(count)

    monkeypatch.setattr(uuid_commands, "uuid7_batch", recording_batch)
    count = 200_001
    assert main(["generate", "-n", str(count), "--format", "hex"]) == 0
    out = capsys.readouterr().out
    # Memory is bounded by the chunk, not by -n.
    assert len(sizes) > 1 and max(sizes) <= 100_000 and sum(sizes) == count
    # The output is what one big batch gave: one value a line, a final newline,
    # strictly increasing across chunk borders.
    assert out.endswith("\n") and "\n\n" not in out
    lines = out.splitlines()
    assert len(lines) == count and all(len(line) == 32 for line in lines)
    assert lines == sorted(lines) and len(set(lines)) == count


def test_generate_into_a_closed_pipe_stops_quietly() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "sqla_ids.cli", "generate", "-n", "10000000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    first = process.stdout.readline()
    process.stdout.close()  # like `| head -1`
    status = process.wait(60)
    error = process.stderr.read().decode()
    process.stderr.close()
    assert uuid.UUID(first.decode().strip()).version == 7
    assert "Traceback" not in error and "Broken pipe" not in error
    assert status == 141  # what a shell reports for a writer stopped by SIGPIPE


# -- inspect (item 10) -------------------------------------------------------------------


def _inspect(capsys: pytest.CaptureFixture[str], value: str) -> tuple[dict[str, Any], str]:
    assert main(["inspect", value, "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert main(["inspect", value]) == 0
    return facts, capsys.readouterr().out


def test_bad_input_length_counts_what_was_typed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "not-a-uuid"]) == 2
    assert "got 10 characters" in capsys.readouterr().err
    assert main(["inspect", "01890a5d-ac96"]) == 2
    assert "got 13 characters" in capsys.readouterr().err


@pytest.mark.parametrize(("value", "version"), [(RFC_V1, 1), (RFC_V6, 6)])
def test_uuid_v1_and_v6_timestamps_are_decoded(
    capsys: pytest.CaptureFixture[str], value: str, version: int
) -> None:
    facts, text = _inspect(capsys, value)
    assert facts["version"] == version and facts["timestamp"] == RFC_TIME
    assert f"UUIDv{version}" in facts["note"] and "no timestamp" not in facts["note"]
    assert RFC_TIME in text and "no timestamp" not in text


def test_uuid_v4_note_is_in_json_too(capsys: pytest.CaptureFixture[str]) -> None:
    facts, text = _inspect(capsys, str(uuid.uuid4()))
    assert "not a UUIDv7" in facts["note"] and "UUIDv4" in facts["note"]
    assert "timestamp" not in facts
    assert facts["note"] in text


@pytest.mark.parametrize(("value", "name"), [(NIL, "nil UUID"), (MAX, "max UUID")])
def test_nil_and_max_uuid(capsys: pytest.CaptureFixture[str], value: str, name: str) -> None:
    facts, text = _inspect(capsys, value)
    assert facts["version"] is None and name in facts["note"]
    assert "None" not in text and name in text
    assert next(line for line in text.splitlines() if line.startswith("version")).endswith("-")


def test_variant_is_named_after_rfc_9562(capsys: pytest.CaptureFixture[str]) -> None:
    for value in (RFC_V1, NIL, str(uuid.uuid4()), "017F22E2-79B0-7CC3-98C4-DC0C0C07398F"):
        facts, text = _inspect(capsys, value)
        assert "4122" not in text and "4122" not in json.dumps(facts)
    assert facts["variant"] == "RFC 9562"


def test_not_a_uuid7_error_names_the_kind() -> None:
    with pytest.raises(ValueError, match=r"not a UUIDv7 \(the nil UUID\)"):
        uuid7_timestamp_ms(uuid.UUID(NIL))
    with pytest.raises(ValueError, match=r"not a UUIDv7 \(version 1, RFC 9562 variant\)") as error:
        uuid7_timestamp_ms(uuid.UUID(RFC_V1))
    assert "4122" not in str(error.value)


# -- version and help (item 11) ----------------------------------------------------------


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"sqla-ids {sqla_ids.__version__}"


def _parsers(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(parser.prog, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                found += _parsers(sub)
    return found


def test_every_option_has_help() -> None:
    missing = [
        f"{prog} {action.option_strings or action.dest}"
        for prog, parser in _parsers(build_parser())
        for action in parser._actions
        if not isinstance(action, argparse._SubParsersAction) and not action.help
    ]
    assert not missing


def test_help_texts_are_plain_text(capsys: pytest.CaptureFixture[str]) -> None:
    for prog, parser in _parsers(build_parser()):
        text = parser.format_help()
        assert "``" not in text and ":class:" not in text, prog


def test_order_number_help_names_the_key_variables(capsys: pytest.CaptureFixture[str]) -> None:
    for action in ("encode", "decode"):
        with pytest.raises(SystemExit):
            main(["order-number", action, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        for variable in ("SQLA_IDS_ORDER_KEY", "SQLA_IDS_ORDER_TWEAK"):
            assert variable in text and f"{variable}_<NAME>" in text
        assert "--alphabet" in text and "Crockford" in text and "check-digit scheme" in text
