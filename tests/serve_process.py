"""``mfs serve`` as a child process on loopback, for the tests and the documentation's examples.

:func:`serve_process` starts ``python -m mfs_core.cli serve`` on ``127.0.0.1`` with a free
port, waits at most ``start_timeout`` seconds for ``GET /health``, yields the base URL, and
stops the server by its PID (SIGTERM, bounded wait, then SIGKILL). Tests that talk to it
carry ``pytest.mark.allow_hosts(["127.0.0.1"])``: pytest-socket lets them reach loopback only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ServerProcess", "free_port", "serve_process", "stop_process"]

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class ServerProcess:
    """A running ``mfs serve``: its process, base URL (``http://127.0.0.1:PORT``) and log file."""

    process: subprocess.Popen
    url: str
    log: Path
    final_log: str | None = None

    def log_text(self) -> str:
        """What the server wrote to stdout and stderr so far (all of it once stopped)."""
        return self.final_log if self.final_log is not None else self.log.read_text(errors="replace")


def stop_process(process: subprocess.Popen, timeout: float = 30.0) -> int:
    """SIGTERM ``process`` by its PID, wait at most ``timeout`` s, then SIGKILL; its exit status."""
    if process.poll() is None:
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=timeout)
    return process.returncode


@contextlib.contextmanager
def serve_process(args: Sequence[str] = (), env: dict[str, str] | None = None,
                  start_timeout: float = 300.0) -> Iterator[ServerProcess]:
    """``mfs serve ARGS`` on 127.0.0.1 and a free port, answering ``/health`` (bounded wait).

    Args:
        args: further flags of ``mfs serve``.
        env: variables added to this process's environment (``MFS_*``, ``MFS_SERVER_*``).
        start_timeout: most seconds to wait for ``GET /health`` to answer 200.

    Raises:
        RuntimeError: the server exited or did not answer in time (its log's end in the message).
    """
    import httpx

    port = free_port()
    environment = {**os.environ, "MFS_DEVICE": "cpu", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                   "TOKENIZERS_PARALLELISM": "false", **(env or {})}
    log = Path(tempfile.mkstemp(prefix="mfs-serve-", suffix=".log")[1])
    command = [sys.executable, "-m", "mfs_core.cli", "serve", "--host", "127.0.0.1", "--port", str(port), *args]
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=environment, cwd=ROOT)
    server = ServerProcess(process, f"http://127.0.0.1:{port}", log)
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"mfs serve exited with {process.returncode}: {server.log_text()[-2000:]}")
            try:
                if httpx.get(server.url + "/health", timeout=2.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"mfs serve did not answer GET /health within {start_timeout} s: "
                                   f"{server.log_text()[-2000:]}")
            time.sleep(0.2)
        yield server
    finally:
        stop_process(process)
        server.final_log = log.read_text(errors="replace")
        log.unlink(missing_ok=True)
