"""tests/scripts.py: a benchmark script that overruns its smoke test's timeout is
interrupted, not killed -- its clean-up (``finally``) runs -- and the test fails
with its output."""

from __future__ import annotations

from pathlib import Path

import pytest
from scripts import run_script


@pytest.mark.slow  # (waits out its timeout)
def test_an_overrunning_script_cleans_up_before_the_test_fails(tmp_path: Path) -> None:
    marker = tmp_path / "cleaned up"
    script = tmp_path / "overruns.py"
    script.write_text(
        "import time\n"
        "print('made a scratch schema', flush=True)\n"
        "try:\n"
        "    time.sleep(600)\n"
        "finally:\n"
        f"    open({str(marker)!r}, 'w').close()\n"
    )
    # (5 s: the interpreter is long started when the interrupt comes.)
    with pytest.raises(AssertionError, match="ran over 5 s") as failed:
        run_script(script, timeout=5)
    assert marker.exists()
    assert "made a scratch schema" in str(failed.value)


def test_a_failing_script_fails_the_test_with_its_output(tmp_path: Path) -> None:
    script = tmp_path / "fails.py"
    script.write_text("import sys\nprint('partial table')\nsys.exit('no server')\n")
    with pytest.raises(AssertionError, match="exited with 1") as failed:
        run_script(script, timeout=60)
    assert "partial table" in str(failed.value) and "no server" in str(failed.value)
