"""VLLMBackend.close stops the engine's leftover processes by PID (terminate, bounded wait, kill).

Under load vLLM's own shutdown can force-kill its engine core and leave the worker orphaned
(seen in CI: a worker still running after ``with MFSEngine.from_settings(...)`` had closed).
These tests run real processes, not vLLM: one that exits on SIGTERM, one that ignores it.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

psutil = pytest.importorskip("psutil")

from mfs_core.backends.vllm_processes import _stop_processes  # noqa: E402

SLEEPER = "import time; time.sleep(60)"
STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"


def _start(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


def test_a_running_process_is_terminated():
    child = _start(SLEEPER)
    proc = psutil.Process(child.pid)
    try:
        _stop_processes([proc], timeout=5.0)
        assert proc.returncode == -15  # SIGTERM (psutil.wait_procs reaped it and set the code)
        assert not psutil.pid_exists(child.pid)
    finally:
        child.kill()


def test_a_process_that_ignores_sigterm_is_killed_after_the_wait():
    child = _start(STUBBORN)
    try:
        assert child.stdout.readline().strip() == "ready"  # its SIGTERM handler is installed
        proc = psutil.Process(child.pid)
        start = time.monotonic()
        _stop_processes([proc], timeout=0.5)
        assert proc.returncode == -9  # SIGKILL, after the 0.5 s wait
        assert time.monotonic() - start >= 0.5 and not psutil.pid_exists(child.pid)
    finally:
        child.kill()


def test_processes_already_gone_are_skipped():
    child = _start("pass")
    proc = psutil.Process(child.pid)
    child.wait(timeout=10)
    _stop_processes([proc], timeout=0.1)  # no error: the process has exited (and was reaped)
    _stop_processes([], timeout=0.1)
