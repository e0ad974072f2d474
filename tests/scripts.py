"""Run a benchmark script as a child process, as its smoke tests do (a test helper).

``subprocess.run(..., timeout=...)`` kills a child that overruns with ``SIGKILL``:
its ``finally`` blocks never run, and a benchmark that made its own scratch schema
or database on the shared server leaves it there (seen: a PostgreSQL schema
``sqla_ids_bench_online_*`` left after a smoke run overran, behind a transaction
another process held open). :func:`run_script` interrupts it instead, as Ctrl-C
would, waits for its clean-up, and kills it only if that does not end it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

#: How long a script interrupted at its timeout has to clean up before it is killed.
CLEAN_UP_SECONDS = 60


def run_script(script: Path, *args: str, timeout: float, cwd: Path | None = None) -> str:
    """``script``'s standard output, run with ``args`` by this interpreter; a failed
    or overrunning run fails the test with its output."""
    child = subprocess.Popen(
        [sys.executable, str(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
    )
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.send_signal(signal.SIGINT)  # KeyboardInterrupt: its finally blocks run
        try:
            out, err = child.communicate(timeout=CLEAN_UP_SECONDS)
        except subprocess.TimeoutExpired:
            child.kill()
            out, err = child.communicate()
        raise AssertionError(
            f"{script.name} ran over {timeout:g} s (interrupted, then cleaned up)\n{out}{err}"
        ) from None
    assert child.returncode == 0, f"{script.name} exited with {child.returncode}\n{out}{err}"
    return out
