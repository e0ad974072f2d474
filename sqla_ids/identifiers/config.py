"""Generators configured from a named JSON document kept outside the code.

A document maps names to generator settings::

    {
      "generators": {
        "default": {"layout": "default"},
        "orders":  {"counter_bits": 42, "guard_bits": 1, "shift_ms": -86400000,
                    "clock": "monotonic"}
      }
    }

``layout`` names a preset (``default``, ``cpython314``, ``uuid-crate``,
``no-counter``); ``counter_bits``/``guard_bits`` override it; ``shift_ms``
moves every timestamp; ``clock`` is ``system`` or ``monotonic``. The document
comes from a dict, a JSON string, a file path, or the file named by the
``SQLA_IDS_CONFIG`` environment variable.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sqla_ids.identifiers.clock import CLOCKS
from sqla_ids.identifiers.generator import UUIDv7Generator
from sqla_ids.identifiers.layout import PRESETS, Layout

CONFIG_ENV_VAR = "SQLA_IDS_CONFIG"
_KNOWN_KEYS = frozenset({"layout", "counter_bits", "guard_bits", "shift_ms", "clock"})


class ConfigError(ValueError):
    """A generator configuration document is missing, malformed or inconsistent."""


def load_config_document(source: Mapping[str, Any] | str | Path | None = None) -> dict[str, Any]:
    """Return the configuration document from a dict, JSON text, a path or ``$SQLA_IDS_CONFIG``.

    >>> load_config_document('{"generators": {"default": {}}}')
    {'generators': {'default': {}}}
    >>> load_config_document('{"generators": ')
    Traceback (most recent call last):
    ...
    sqla_ids.identifiers.config.ConfigError: JSON text is not valid JSON: Expecting value: ...
    """
    if source is None:
        env_path = os.environ.get(CONFIG_ENV_VAR)
        if not env_path:
            raise ConfigError(f"no generator configuration given and ${CONFIG_ENV_VAR} is not set")
        source = Path(env_path)
    if isinstance(source, Mapping):
        return dict(source)
    if isinstance(source, str) and source.lstrip().startswith("{"):
        text, origin = source, "JSON text"
    else:
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise ConfigError(f"cannot read generator configuration {path}: {error}") from None
        origin = str(path)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(f"{origin} is not valid JSON: {error}") from None
    if not isinstance(document, dict):
        raise ConfigError(f"{origin} must hold a JSON object")
    return document


def _layout_from(name: str, settings: Mapping[str, Any]) -> Layout:
    preset_name = settings.get("layout", "default")
    try:
        preset = PRESETS[preset_name]
    except (KeyError, TypeError):
        raise ConfigError(
            f"generator {name!r}: unknown layout {preset_name!r} "
            f"(known: {', '.join(sorted(PRESETS))})"
        ) from None
    counter_bits = settings.get("counter_bits", preset.counter_bits)
    guard_bits = settings.get(
        "guard_bits",
        min(preset.guard_bits, counter_bits)
        if isinstance(counter_bits, int)
        else preset.guard_bits,
    )
    try:
        return Layout(counter_bits, guard_bits)
    except ValueError as error:
        raise ConfigError(f"generator {name!r}: {error}") from None


def generator_from_config(
    name: str = "default", source: Mapping[str, Any] | str | Path | None = None
) -> UUIDv7Generator:
    """Build the generator called ``name`` in a configuration document.

    >>> document = {
    ...     "generators": {
    ...         "orders": {"layout": "cpython314", "shift_ms": -86_400_000, "clock": "monotonic"}
    ...     }
    ... }
    >>> generator = generator_from_config("orders", document)
    >>> generator.layout
    Layout(counter_bits=42, guard_bits=1)
    >>> generator().version
    7
    >>> generator_from_config("billing", document)
    Traceback (most recent call last):
    ...
    sqla_ids.identifiers.config.ConfigError: no generator named 'billing' ... (known: orders)
    """
    document = load_config_document(source)
    generators = document.get("generators")
    if not isinstance(generators, dict):
        raise ConfigError('the configuration needs a "generators" object')
    if name not in generators:
        known = ", ".join(sorted(generators)) or "none"
        raise ConfigError(f"no generator named {name!r} in the configuration (known: {known})")
    settings = generators[name]
    if not isinstance(settings, dict):
        raise ConfigError(f"generator {name!r} must be a JSON object")
    unknown = sorted(set(settings) - _KNOWN_KEYS)
    if unknown:
        raise ConfigError(
            f"generator {name!r}: unknown setting(s) {', '.join(unknown)} "
            f"(known: {', '.join(sorted(_KNOWN_KEYS))})"
        )
    shift = settings.get("shift_ms", 0)
    if not isinstance(shift, int) or isinstance(shift, bool):
        raise ConfigError(f"generator {name!r}: shift_ms must be an integer, got {shift!r}")
    clock_name = settings.get("clock", "system")
    if clock_name not in CLOCKS:
        raise ConfigError(
            f"generator {name!r}: unknown clock {clock_name!r} (known: {', '.join(CLOCKS)})"
        )
    clock = None if clock_name == "system" else CLOCKS[clock_name]()
    return UUIDv7Generator(_layout_from(name, settings), shift=shift, clock=clock)
