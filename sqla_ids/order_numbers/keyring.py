"""The keyring: FF3-1 keys and tweaks, referred to by name.

Keys are configuration, never literals in models or migrations: register them
at start-up (``register_key``) or let them be read from the environment
(``SQLA_IDS_ORDER_KEY`` / ``SQLA_IDS_ORDER_TWEAK`` for the key named
``"default"``, ``SQLA_IDS_ORDER_KEY_<NAME>`` / ``SQLA_IDS_ORDER_TWEAK_<NAME>``
for others). Malformed material is refused when it is configured; a missing
key is reported when it is first used. No repr, log line or message ever
shows the material itself.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping

from sqla_ids.order_numbers.errors import KeyConfigurationError, MissingKeyError

__all__ = [
    "DEFAULT_KEY_NAME",
    "FPEKey",
    "Keyring",
    "default_keyring",
    "environment_variable_names",
    "register_key",
]

DEFAULT_KEY_NAME = "default"
_KEY_BYTES = (16, 24, 32)  # AES-128/192/256
_TWEAK_BYTES = 7  # FF3-1 uses a 56-bit tweak
_HEX = re.compile(r"[0-9a-fA-F]*")
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise KeyConfigurationError(
            f"key name {name!r} must start with a letter and hold only letters, digits and _"
        )
    return name


def _hex_bytes(what: str, name: str, text: str, lengths: tuple[int, ...]) -> bytes:
    # Never echo ``text``: it is the secret.
    text = text.strip() if isinstance(text, str) else text
    if not isinstance(text, str) or not _HEX.fullmatch(text) or len(text) % 2:
        raise KeyConfigurationError(
            f"{what} of order-number key {name!r} is not a hexadecimal string "
            f"of an even number of characters"
        )
    material = bytes.fromhex(text)
    if len(material) not in lengths:
        expected = " or ".join(str(n * 8) for n in lengths)
        raise KeyConfigurationError(
            f"{what} of order-number key {name!r} has {len(material) * 8} bits; "
            f"expected {expected} bits ({' or '.join(str(n * 2) for n in lengths)} hex characters)"
        )
    return material


class FPEKey:
    """An FF3-1 key and tweak under a name; its repr shows only name and size.

    With a published sample key (never use a published key in production):

    >>> key = FPEKey("sample", "2DE79D232DF5585D68CE47882AE256D6", "CBD09280979564")
    >>> key
    <FPEKey 'sample' AES-128>
    >>> key.key_bits
    128
    >>> FPEKey("sample", "2DE79D23", "CBD09280979564")
    Traceback (most recent call last):
    ...
    sqla_ids.order_numbers.errors.KeyConfigurationError: key of ... 'sample' has 32 bits; ...
    """

    __slots__ = ("_key", "_tweak", "name")

    def __init__(self, name: str, key_hex: str, tweak_hex: str) -> None:
        self.name = _check_name(name)
        self._key = _hex_bytes("key", name, key_hex, _KEY_BYTES)
        self._tweak = _hex_bytes("tweak", name, tweak_hex, (_TWEAK_BYTES,))

    @property
    def key_bits(self) -> int:
        """Key size in bits (128, 192 or 256)."""
        return len(self._key) * 8

    def key_hex(self) -> str:
        """The key as hex, for handing to the FF3-1 cipher only."""
        return self._key.hex()

    def tweak_hex(self) -> str:
        """The 56-bit tweak as hex, for handing to the FF3-1 cipher only."""
        return self._tweak.hex()

    def __repr__(self) -> str:
        return f"<FPEKey {self.name!r} AES-{self.key_bits}>"

    __str__ = __repr__

    def __reduce__(self) -> str | tuple[object, ...]:
        # Pickling would copy the secret into caches and task queues.
        raise TypeError("FPEKey objects cannot be pickled")


def environment_variable_names(name: str) -> tuple[str, str]:
    """The (key, tweak) environment variables read for key ``name``.

    >>> environment_variable_names("default")
    ('SQLA_IDS_ORDER_KEY', 'SQLA_IDS_ORDER_TWEAK')
    >>> environment_variable_names("billing")
    ('SQLA_IDS_ORDER_KEY_BILLING', 'SQLA_IDS_ORDER_TWEAK_BILLING')
    """
    if name == DEFAULT_KEY_NAME:
        return "SQLA_IDS_ORDER_KEY", "SQLA_IDS_ORDER_TWEAK"
    suffix = _check_name(name).upper()
    return f"SQLA_IDS_ORDER_KEY_{suffix}", f"SQLA_IDS_ORDER_TWEAK_{suffix}"


class Keyring:
    """Named FPE keys; falls back to environment variables for unknown names.

    >>> ring = Keyring(environ={})  # an empty environment instead of os.environ
    >>> ring.register("sample", "2DE79D232DF5585D68CE47882AE256D6", "CBD09280979564")
    <FPEKey 'sample' AES-128>
    >>> "sample" in ring, ring
    (True, <Keyring names=['sample']>)
    >>> ring.get("billing")
    Traceback (most recent call last):
    ...
    sqla_ids.order_numbers.errors.MissingKeyError: no order-number key 'billing' is configured: ...

    >>> environ = {
    ...     "SQLA_IDS_ORDER_KEY_BILLING": "2DE79D232DF5585D68CE47882AE256D6",
    ...     "SQLA_IDS_ORDER_TWEAK_BILLING": "CBD09280979564",
    ... }
    >>> Keyring(environ=environ).get("billing")
    <FPEKey 'billing' AES-128>
    """

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._keys: dict[str, FPEKey] = {}
        self._environ = environ
        self._lock = threading.Lock()

    def register(self, name: str, key_hex: str, tweak_hex: str) -> FPEKey:
        """Validate and store a key under ``name`` (replacing any previous one)."""
        key = FPEKey(name, key_hex, tweak_hex)
        with self._lock:
            self._keys[name] = key
        return key

    def load_environment(self, name: str = DEFAULT_KEY_NAME) -> FPEKey:
        """Read and validate key ``name`` from the environment now (call at start-up)."""
        environ = os.environ if self._environ is None else self._environ
        key_var, tweak_var = environment_variable_names(name)
        missing = [var for var in (key_var, tweak_var) if not environ.get(var)]
        if missing:
            raise MissingKeyError(
                f"no order-number key {name!r} is configured: register it with "
                f"register_key({name!r}, ...) or set {' and '.join(missing)}"
            )
        return self.register(name, environ[key_var], environ[tweak_var])

    def get(self, name: str = DEFAULT_KEY_NAME) -> FPEKey:
        """Return key ``name``, reading it from the environment if not registered."""
        key = self._keys.get(name)
        if key is None:
            key = self.load_environment(name)
        return key

    def forget(self, name: str) -> None:
        """Remove key ``name`` (it will be looked up in the environment again)."""
        with self._lock:
            self._keys.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._keys

    def __repr__(self) -> str:
        return f"<Keyring names={sorted(self._keys)!r}>"


default_keyring = Keyring()


def register_key(name: str, key_hex: str, tweak_hex: str) -> FPEKey:
    """Register a key in the default keyring (see :class:`Keyring.register`)."""
    return default_keyring.register(name, key_hex, tweak_hex)
