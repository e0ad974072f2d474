"""The ``>>>`` examples in the pure layers' docstrings run and pass.

Every module of :mod:`sqla_ids.identifiers` and :mod:`sqla_ids.order_numbers`
is found with ``pkgutil``, so a new module is covered as soon as it exists.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from types import ModuleType

import pytest

import sqla_ids.identifiers
import sqla_ids.order_numbers

pytestmark = pytest.mark.pure_python

PACKAGES = [sqla_ids.identifiers, sqla_ids.order_numbers]
OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
# The examples written so far number well above this; the floor keeps the
# test from passing with no examples at all (e.g. when run under ``python -OO``).
MIN_EXAMPLES = 100


def _modules() -> list[ModuleType]:
    modules = []
    for package in PACKAGES:
        modules.append(package)
        for info in pkgutil.iter_modules(package.__path__, prefix=f"{package.__name__}."):
            modules.append(importlib.import_module(info.name))
    return modules


MODULES = _modules()


@pytest.mark.parametrize("module", MODULES, ids=lambda module: module.__name__)
def test_module_examples_pass(module: ModuleType) -> None:
    result = doctest.testmod(module, optionflags=OPTIONS)
    assert result.failed == 0, f"{result.failed} example(s) failed in {module.__name__}"


def test_enough_examples_are_run() -> None:
    attempted = {
        module.__name__: doctest.testmod(module, optionflags=OPTIONS, report=False).attempted
        for module in MODULES
    }
    assert sum(attempted.values()) >= MIN_EXAMPLES, attempted
