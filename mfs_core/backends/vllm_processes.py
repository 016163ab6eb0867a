"""The processes behind a vLLM engine: which ones this process started, stopping them by PID, and
whether the engine core is still alive (:func:`engine_dead_reason`), for :mod:`mfs_core.backends.vllm`
and :mod:`mfs_core.backends.vllm_async`.

Coded against vLLM 0.32.0's CPU build (files read: ``vllm/v1/engine/core_client.py``:
``BackgroundResources.engine_dead``, ``MPClient.start_engine_core_monitor``;
``vllm/v1/engine/utils.py``: ``CoreEngineProcManager.monitor_engine_liveness`` and
``finished_procs``; ``vllm/entrypoints/launchers/launcher.py``: ``watchdog_loop`` and
``terminate_if_errored``, the API server's own reaction to a dead engine).

One gap of vLLM's own is closed here (:func:`woken_on_engine_death`): the synchronous client
(``SyncMPClient``, behind ``vllm.LLM``) waits for outputs on ``outputs_queue.get()`` with no timeout,
and when its monitor finds the engine core dead it shuts the output thread down
(``process_outputs_socket`` leaves its loop on the shutdown socket) without putting anything in
that queue, so an ``LLM.generate`` in flight would wait forever. The async client does not have the
gap (its output handler fails every request with ``EngineDeadError``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["DEATH_POLL_SECONDS", "engine_dead_reason", "woken_on_engine_death"]

logger = logging.getLogger("mfs_core.backends.vllm")


def _child_processes() -> list[Any]:
    """This process's descendants as ``psutil.Process`` objects (empty without psutil, a vLLM dependency)."""
    try:
        import psutil
    except ImportError:  # pragma: no cover - vLLM requires psutil
        return []
    return psutil.Process().children(recursive=True)


def _stop_processes(processes: list[Any], timeout: float = 10.0) -> None:
    """Stop the processes of ``processes`` that still run: SIGTERM, up to ``timeout`` s, then SIGKILL.

    ``psutil`` checks a process's creation time before signalling it, so a PID reused by
    another program is left alone. Processes already gone (or zombies) are skipped.
    """
    if not processes:
        return
    import psutil

    alive = []
    for proc in processes:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                proc.terminate()
                alive.append(proc)
        except psutil.Error:
            continue
    _, left = psutil.wait_procs(alive, timeout=timeout)
    for proc in left:
        try:
            proc.kill()
        except psutil.Error:
            continue
    psutil.wait_procs(left, timeout=timeout)


def engine_dead_reason(llm: Any) -> str | None:
    """Why vLLM's engine core behind ``llm`` (a ``vllm.LLM`` or an ``AsyncLLM``) is gone, or None while it runs.

    vLLM's client watches its engine-core processes (``MPClient.start_engine_core_monitor``, vLLM PR
    #21728): within about a second of one exiting it sets ``resources.engine_dead``, shuts the client
    down and fails every request awaited with ``EngineDeadError``; ``engine_manager.finished_procs()``
    gives the exit codes (``-9``: killed by SIGKILL). Read without a call to the engine, so it is
    cheap enough for every round and every ``/health`` probe. An engine run in-process
    (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) has no such flag: None.
    """
    core = getattr(llm, "engine_core", None)  # AsyncLLM
    if core is None:
        core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)  # vllm.LLM's LLMEngine
    resources = getattr(core, "resources", None)
    if getattr(resources, "engine_dead", False) is not True:
        return None
    exits = ""
    try:
        finished = resources.engine_manager.finished_procs()
        exits = ", ".join(f"{name} exited with {f'signal {-code}' if code < 0 else f'status {code}'}"
                          for name, code in finished.items())
    except Exception:  # the reason's detail only: never fails the check
        logger.debug("cannot read the engine-core exit codes", exc_info=True)
    return f"vLLM's engine core died ({exits or 'EngineDeadError'}); vLLM cannot restart it in this process"


DEATH_POLL_SECONDS = 0.25
"""Seconds between two looks at the engine core's liveness while a synchronous vLLM call runs."""


@contextlib.contextmanager
def woken_on_engine_death(llm: Any, poll: float = DEATH_POLL_SECONDS) -> Iterator[None]:
    """Around a synchronous ``LLM.generate``: once the engine core dies (:func:`engine_dead_reason`), put vLLM's
    own ``EngineDeadError`` in the client's ``outputs_queue``, so the call raises it instead of waiting forever
    (see the module docstring). A no-op for an ``llm`` without that queue (an in-process engine, a fake).

    Args:
        llm: the ``vllm.LLM`` whose call the block makes.
        poll: seconds between two looks (a watcher thread lives as long as the block).
    """
    queue = getattr(getattr(getattr(llm, "llm_engine", None), "engine_core", None), "outputs_queue", None)
    if queue is None or not callable(getattr(queue, "put_nowait", None)):
        yield
        return
    done = threading.Event()

    def watch() -> None:
        while not done.wait(poll):
            if engine_dead_reason(llm) is not None:
                from vllm.v1.engine.exceptions import EngineDeadError

                logger.warning("vLLM's engine core died during a call; failing the call with EngineDeadError")
                queue.put_nowait(EngineDeadError())
                return

    watcher = threading.Thread(target=watch, name="mfs-vllm-death-watch", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
