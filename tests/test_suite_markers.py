"""The test suite's own markers land where pytest reads them.

A ``@pytest.mark.slow`` above a helper function marks nothing: pytest reads
marks on tests (and their classes, modules and parameters) only. One such
misplaced mark (on a helper just above the test it was meant for) put a 38 s
kill-after-each-statement test into the quick loop (`pytest -m "not slow"`).
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _misplaced_marks() -> list[str]:
    found = []
    for path in sorted(TESTS.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if node.name.startswith(("test", "Test")):
                continue
            for decorator in node.decorator_list:
                text = ast.unparse(decorator)
                if text.startswith("pytest.mark."):
                    found.append(f"{path.name}:{node.lineno} {text} on {node.name}")
    return found


def test_marks_sit_on_tests_not_on_helpers() -> None:
    assert _misplaced_marks() == []
