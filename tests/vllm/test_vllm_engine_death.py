"""vLLM's engine-core process killed by PID (SIGKILL, as an out-of-memory kill or a crashed kernel ends it), on the
demo model: under ``mfs serve`` mid-stream and between requests (what the client in flight, ``/health``, the next
request and the process see), and under the library (every call raises BackendDeadError within its timeout, a
new engine with the same settings loads a fresh backend). Every wait is bounded."""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import psutil
import pytest

pytest.importorskip("starlette")
httpx = pytest.importorskip("httpx")

from mfs_core import MFSEngine
from mfs_core.errors import BackendDeadError
from tests.serve_faults import StreamReader, engine_core, finish, launch, wait_exit
from tests.vllm.conftest import EAGER, VLLM_SETTINGS

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.allow_hosts(["127.0.0.1"])]

SHUTDOWN = 10.0
"""The server's shutdown_timeout (seconds)."""
EXIT_BOUND = SHUTDOWN + 45.0
"""Most seconds from the kill to the server's exit: vLLM notices within about 1 s, then the drain, uvicorn's close
(5 s) and closing what is left of the engine (its worker stopped by PID)."""
COMMAND = [sys.executable, "-m", "mfs_core.cli", "serve", "--backend", "vllm", "--dtype", "float32",
           "--step-beam-size", "2", "--num-rollouts", "2", "--max-steps", "4"]
ENV = {"MFS_KV_CACHE_GIB": "1", "MFS_SERVER_SHUTDOWN_TIMEOUT": str(SHUTDOWN), "VLLM_LOGGING_LEVEL": "WARNING",
       "MFS_VLLM_KWARGS": json.dumps(EAGER)}
BODY = {"model": "mfs-demo", "seed": 5, "messages": [{"role": "user", "content": "Tom has 3 apples. Then Tom buys 4 "
                                                      "more apples. How many apples does Tom have now?"}]}
WORDS = "vLLM's engine core died"


def serve():
    return launch(["nice", "-n", "19", *COMMAND], env=ENV, start_timeout=900.0)


def check_dead_then_exit(server, killed_at: float, children: list[psutil.Process]) -> None:
    """The server answers 503 (health and requests) until it exits with status 2 within :data:`EXIT_BOUND`
    seconds of the kill, leaving none of its vLLM processes behind."""
    try:
        after = httpx.post(server.url + "/v1/chat/completions", json=BODY, timeout=30)
        assert after.status_code == 503 and WORDS in after.json()["error"]["message"]
        assert after.headers["retry-after"] == "5"
        health = httpx.get(server.url + "/health", timeout=5)
        assert health.status_code == 503 and WORDS in health.json()["reason"]
    except httpx.TransportError:  # the listener already closed: the process is exiting
        pass
    waited = wait_exit(server.process, max(0.0, EXIT_BOUND - (time.monotonic() - killed_at)))
    assert waited is not None, f"still running {EXIT_BOUND} s after the engine core was killed"
    assert server.process.returncode == 2
    deadline = time.monotonic() + 15
    while any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in children if psutil.pid_exists(p.pid)):
        assert time.monotonic() < deadline, "vLLM processes outlived the server"
        time.sleep(0.2)


def test_the_engine_core_killed_mid_stream_ends_the_stream_and_the_server() -> None:
    server = serve()
    try:
        assert httpx.post(server.url + "/v1/chat/completions", json=BODY, timeout=300).status_code == 200
        children = psutil.Process(server.process.pid).children(recursive=True)
        reader = StreamReader(server.url, {**BODY, "stream": True})
        reader.start()
        assert reader.first.wait(300)
        os.kill(engine_core(server.process.pid).pid, signal.SIGKILL)
        killed_at = time.monotonic()
        reader.join(60)
        assert not reader.is_alive() and reader.events[-1] == "[DONE]"
        error = reader.error_event()
        assert error["code"] == 503 and WORDS in error["message"] and "signal 9" in error["message"]
        assert reader.ended_at - killed_at < 15.0
        check_dead_then_exit(server, killed_at, children)
    finally:
        finish(server)
    assert "exiting: the backend could not serve" in server.final_log


def test_the_engine_core_killed_between_requests_is_seen_without_a_request() -> None:
    server = serve()
    try:
        assert httpx.post(server.url + "/v1/chat/completions", json=BODY, timeout=300).status_code == 200
        assert httpx.get(server.url + "/health", timeout=5).json()["status"] == "ok"
        children = psutil.Process(server.process.pid).children(recursive=True)
        os.kill(engine_core(server.process.pid).pid, signal.SIGKILL)
        killed_at = time.monotonic()
        # no request is sent: vLLM's monitor (about 1 s) and the server's watch (1 s) find it and the drain starts
        waited = wait_exit(server.process, EXIT_BOUND)
        assert waited is not None and server.process.returncode == 2
        check_dead_then_exit(server, killed_at, children)
    finally:
        finish(server)
    assert f"the backend cannot serve: {WORDS}" in server.final_log


@pytest.mark.parametrize("scheduling", ["continuous", "lockstep"])
def test_an_engine_whose_core_was_killed_mid_decode_raises_and_a_new_one_loads_afresh(scheduling: str) -> None:
    settings = VLLM_SETTINGS.changed(scheduling=scheduling, step_beam_size=2, num_rollouts=2, max_steps=4,
                                     kv_cache_gib=0.5, vllm_kwargs=EAGER)
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    engine = MFSEngine.from_settings(settings)
    fresh = None
    try:
        question = "Tom has 3 apples. Then Tom buys 4 more apples. How many apples does Tom have now?"
        assert engine.decode([question], timeout=300)[0].output_tokens > 0
        llm, core = engine.backend.llm, engine_core(os.getpid(), exclude=before)
        send = llm.generate
        killed_at: list[float] = []

        def generate(*args, **kwargs):
            if not killed_at:
                os.kill(core.pid, signal.SIGKILL)
                killed_at.append(time.monotonic())
            return send(*args, **kwargs)

        llm.generate = generate
        with pytest.raises(BackendDeadError) as caught:
            engine.decode([question], timeout=120)
        assert killed_at and time.monotonic() - killed_at[0] < 30.0  # well within the call's 120 s: no hang
        assert WORDS in str(caught.value) and "MFSEngine.from_settings" in str(caught.value)
        started = time.monotonic()
        with pytest.raises(BackendDeadError):
            engine.decode([question], timeout=60)
        assert time.monotonic() - started < 1.0
        if scheduling == "lockstep":  # a fresh engine loads the same way under both (one load saved for CI's time)
            return
        fresh = MFSEngine.from_settings(settings)
        assert fresh.backend is not engine.backend and fresh.dead_reason is None
        assert fresh.decode([question], timeout=300)[0].output_tokens > 0
    finally:
        engine.close()
        if fresh is not None:
            fresh.close()
