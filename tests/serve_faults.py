"""Servers that lose their backend for real, for the tests of what ``mfs serve`` then does.

As a library: :func:`launch` starts any server command on 127.0.0.1 (bounded wait for ``/health``),
:class:`StreamReader` reads a streamed chat completion on a thread, :func:`wait_exit` waits (bounded) for
the process to end, :func:`engine_core` finds vLLM's engine-core process among a server's children.

As a program (run with the repository root as working directory):

* ``python tests/serve_faults.py replica``: a vLLM-shaped ``/v1/completions`` replica
  (:class:`tests.integration.openai_server.CompletionServer` over the demo model); prints its URL.
* ``python tests/serve_faults.py fatal FLAG [mfs serve flags]``: ``mfs serve`` on the transformers
  backend whose model raises ``torch.OutOfMemoryError`` in every forward pass while the file FLAG exists
  (what a CUDA out-of-memory does), also in a reloaded backend.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.serve_process import ServerProcess, free_port, stop_process

__all__ = ["QUESTION", "StreamReader", "engine_core", "launch", "wait_exit"]

QUESTION = [{"role": "user", "content": "Grace has 7 bags with 9 cards in each bag. Sadly, 6 cards break. How many "
                                        "cards are there now?"}]
ENV = {"MFS_DEVICE": "cpu", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def launch(command: Sequence[str], env: dict[str, str] | None = None, start_timeout: float = 400.0) -> ServerProcess:
    """Start ``command`` plus ``--host 127.0.0.1 --port P`` (a free port) and wait for ``GET /health`` 200.

    Raises:
        RuntimeError: the server exited or did not answer within ``start_timeout`` s (its log's end in the message).
    """
    import httpx

    port = free_port()
    log = Path(tempfile.mkstemp(prefix="mfs-faults-", suffix=".log")[1])
    with log.open("wb") as sink:
        process = subprocess.Popen([*command, "--host", "127.0.0.1", "--port", str(port)], stdout=sink,
                                   stderr=subprocess.STDOUT, env={**os.environ, **ENV, **(env or {})}, cwd=ROOT)
    server = ServerProcess(process, f"http://127.0.0.1:{port}", log)
    deadline = time.monotonic() + start_timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}: {server.log_text()[-3000:]}")
        try:
            if httpx.get(server.url + "/health", timeout=2.0).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            stop_process(process)
            raise RuntimeError(f"no answer on /health within {start_timeout} s: {server.log_text()[-3000:]}")
        time.sleep(0.2)


def finish(server: ServerProcess) -> int:
    """Stop ``server`` by its PID if it still runs (SIGTERM, bounded wait, SIGKILL); keep its log; its exit status."""
    code = stop_process(server.process)
    server.final_log = server.log.read_text(errors="replace")
    server.log.unlink(missing_ok=True)
    return code


class StreamReader(threading.Thread):
    """Reads one streamed chat completion of ``url`` on its own thread.

    Attributes:
        events: the payloads of the ``data:`` lines, in order (``"[DONE]"`` included).
        first: set at the first event (or the end).
        ended_at: ``time.monotonic()`` when the stream ended.
        error: the transport error that ended it, if any.
    """

    def __init__(self, url: str, body: dict[str, Any] | None = None, timeout: float = 300.0) -> None:
        super().__init__(daemon=True)
        self.url, self.timeout = url, timeout
        self.body = body or {"model": "mfs-demo", "messages": QUESTION, "seed": 5, "stream": True}
        self.events: list[str] = []
        self.first = threading.Event()
        self.ended_at: float | None = None
        self.error: str | None = None
        self.status: int | None = None

    def run(self) -> None:
        import httpx

        try:
            with httpx.stream("POST", self.url + "/v1/chat/completions", json=self.body, timeout=self.timeout) as reply:
                self.status = reply.status_code
                for line in reply.iter_lines():
                    if line.startswith("data: "):
                        self.events.append(line[6:])
                        self.first.set()
        except httpx.HTTPError as exc:
            self.error = f"{type(exc).__name__}: {exc}"
        self.ended_at = time.monotonic()
        self.first.set()

    def error_event(self) -> dict[str, Any] | None:
        """The ``error`` object of the stream's error event (None without one)."""
        for event in self.events:
            if event != "[DONE]" and '"error"' in event:
                return json.loads(event)["error"]
        return None


def wait_exit(process: subprocess.Popen, seconds: float) -> float | None:
    """Seconds until ``process`` exited, polled every 0.1 s for at most ``seconds`` (None: it still runs)."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if process.poll() is not None:
            return time.monotonic() - started
        time.sleep(0.1)
    return None


def engine_core(pid: int, exclude: set[int] = frozenset()) -> Any:
    """The ``psutil.Process`` of vLLM's engine core among ``pid``'s descendants (its title names it), not one of
    the PIDs in ``exclude`` (engines started before).

    Raises:
        LookupError: none is found.
    """
    import psutil

    for child in psutil.Process(pid).children(recursive=True):
        if child.pid in exclude:
            continue
        try:
            if "EngineCore" in child.name() or any("EngineCore" in part for part in child.cmdline()):
                return child
        except psutil.Error:
            continue
    raise LookupError(f"no vLLM engine-core process under PID {pid}")


def _replica() -> None:
    from mfs_core.backends.transformers import TransformersBackend
    from mfs_core.settings import MFSSettings
    from tests.integration.openai_server import CompletionServer

    server = CompletionServer(TransformersBackend.from_settings(MFSSettings(device="cpu", dtype="float32"))).start()
    print(server.url, flush=True)
    threading.Event().wait()


def _fatal(flag: str, args: list[str]) -> None:
    import torch

    from mfs_core.backends import transformers
    from mfs_core.cli import app

    load = transformers.TransformersBackend.from_settings.__func__

    def from_settings(cls, settings):
        backend = load(cls, settings)
        forward = backend.model.forward

        def failing(*pos, **named):
            if os.path.exists(flag):
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (injected by the test)")
            return forward(*pos, **named)

        backend.model.forward = failing
        return backend

    transformers.TransformersBackend.from_settings = classmethod(from_settings)
    app(["serve", *args])


if __name__ == "__main__":
    if sys.argv[1] == "replica":
        _replica()
    else:
        _fatal(sys.argv[2], sys.argv[3:])
