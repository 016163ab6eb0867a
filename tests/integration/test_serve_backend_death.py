"""``mfs serve`` as a process whose backend fails for real: every HTTP replica stops (killed by PID) and the
transformers backend meets a fatal error (an injected ``torch.OutOfMemoryError``). Each test asserts what the
client in flight saw, what ``/health`` says before and after, what the next request gets, and that the process
exits non-zero within its shutdown timeout, or reloads the backend with ``on_backend_death=reload``; every
wait is bounded."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("starlette")
httpx = pytest.importorskip("httpx")

from tests.serve_faults import QUESTION, ROOT, StreamReader, finish, launch, wait_exit

pytestmark = [pytest.mark.slow, pytest.mark.allow_hosts(["127.0.0.1"])]

SEARCH = ["--dtype", "float32", "--step-beam-size", "2", "--num-rollouts", "2", "--max-steps", "4"]
SHUTDOWN = 10.0
"""The servers' shutdown_timeout (seconds): a dead backend's server exits within it plus closing."""
EXIT_BOUND = SHUTDOWN + 20.0
"""Most seconds from the fault to the process's exit: the drain, uvicorn's close (5 s), closing the backend."""
BODY = {"model": "mfs-demo", "messages": QUESTION, "seed": 5}
ENV = {"MFS_SERVER_SHUTDOWN_TIMEOUT": str(SHUTDOWN)}


def nice(command: list[str]) -> list[str]:
    return ["nice", "-n", "19", *command]


@pytest.fixture
def replicas() -> Iterator[list[subprocess.Popen]]:
    """Two vLLM-shaped replicas of the demo model (tests' CompletionServer), each in its own process; their URLs
    are in ``proc.url``; stopped by PID at the end."""
    started: list[subprocess.Popen] = []
    try:
        for _ in range(2):
            proc = subprocess.Popen(nice([sys.executable, "tests/serve_faults.py", "replica"]), cwd=ROOT, text=True,
                                    stdout=subprocess.PIPE, env={**os.environ, "HF_HUB_OFFLINE": "1"})
            started.append(proc)
        for proc in started:
            proc.url = proc.stdout.readline().strip()  # the replica prints its URL once it listens
            assert proc.url.startswith("http://127.0.0.1:")
        yield started
    finally:
        for proc in started:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(10)


def assert_dead_then_exits(server, fault_at: float, words: str) -> float:
    """/health is 503 with a reason holding ``words`` (or the process has already exited), the next request
    is 503 with Retry-After, and the process exits with status 2 within :data:`EXIT_BOUND` s of the fault."""
    try:
        health = httpx.get(server.url + "/health", timeout=5)
        assert health.status_code == 503 and health.json()["status"] == "dead" and words in health.json()["reason"]
        ready = httpx.get(server.url + "/ready", timeout=5)
        assert ready.status_code == 503
        after = httpx.post(server.url + "/v1/chat/completions", json=BODY, timeout=30)
        assert after.status_code == 503 and after.headers["retry-after"] == "5"
        assert words in after.json()["error"]["message"]
    except httpx.TransportError:  # the listener is already closed: the process must now exit
        pass
    left = EXIT_BOUND - (time.monotonic() - fault_at)
    waited = wait_exit(server.process, max(left, 0.0))
    assert waited is not None, f"still running {EXIT_BOUND} s after the fault"
    assert server.process.returncode == 2
    return time.monotonic() - fault_at


def test_every_http_replica_stopping_mid_stream_makes_the_server_drain_and_exit(replicas) -> None:
    urls = [arg for proc in replicas for arg in ("--base-url", proc.url)]
    server = launch(nice([sys.executable, "-m", "mfs_core.cli", "serve", *urls, *SEARCH]), env=ENV)
    try:
        assert httpx.post(server.url + "/v1/chat/completions", json=BODY, timeout=120).status_code == 200
        assert httpx.get(server.url + "/health", timeout=5).json()["status"] == "ok"
        reader = StreamReader(server.url)
        reader.start()
        assert reader.first.wait(120)
        for proc in replicas:
            os.kill(proc.pid, signal.SIGKILL)
        fault_at = time.monotonic()
        reader.join(60)
        assert not reader.is_alive() and reader.events[-1] == "[DONE]"
        error = reader.error_event()
        assert error["code"] == 503 and "every replica of the HTTP backend is down" in error["message"]
        assert reader.ended_at - fault_at < 10.0
        took = assert_dead_then_exits(server, fault_at, "every replica of the HTTP backend is down")
        assert took < EXIT_BOUND
    finally:
        finish(server)
    assert "exiting: the backend could not serve" in server.final_log


def test_a_fatal_transformers_error_mid_stream_makes_the_server_drain_and_exit(tmp_path: Path) -> None:
    flag = tmp_path / "fault"
    server = launch(nice([sys.executable, "tests/serve_faults.py", "fatal", str(flag), *SEARCH]), env=ENV)
    try:
        assert httpx.post(server.url + "/v1/chat/completions", json=BODY, timeout=120).status_code == 200
        assert httpx.get(server.url + "/health", timeout=5).json()["status"] == "ok"
        reader = StreamReader(server.url)
        reader.start()
        assert reader.first.wait(120)
        flag.touch()
        fault_at = time.monotonic()
        reader.join(60)
        assert not reader.is_alive() and reader.events[-1] == "[DONE]"
        error = reader.error_event()
        assert error["code"] == 503 and "ran out of memory (OutOfMemoryError: CUDA out of memory" in error["message"]
        assert_dead_then_exits(server, fault_at, "ran out of memory")
    finally:
        finish(server)
    assert "the transformers backend of 'mfs-demo' is dead" in server.final_log


def test_with_reload_a_fatal_transformers_error_is_followed_by_a_fresh_backend(tmp_path: Path) -> None:
    flag = tmp_path / "fault"
    env = {**ENV, "MFS_SERVER_ON_BACKEND_DEATH": "reload", "MFS_SERVER_RELOAD_BACKOFF": "3"}
    server = launch(nice([sys.executable, "tests/serve_faults.py", "fatal", str(flag), *SEARCH]), env=env)
    try:
        flag.touch()
        failed = httpx.post(server.url + "/v1/chat/completions", json=BODY, timeout=60)
        assert failed.status_code == 503 and "ran out of memory" in failed.json()["error"]["message"]
        health = httpx.get(server.url + "/health", timeout=5)
        assert health.status_code == 200 and health.json()["status"] == "reloading"
        assert httpx.get(server.url + "/ready", timeout=5).status_code == 503
        flag.unlink()  # the device recovered: the reload's model works
        started = time.monotonic()
        while httpx.get(server.url + "/ready", timeout=5).status_code != 200:
            assert time.monotonic() - started < 60, "not reloaded within 60 s"
            time.sleep(0.2)
        assert httpx.get(server.url + "/health", timeout=5).json()["reloads"] == 1
        again = httpx.post(server.url + "/v1/chat/completions", json=BODY, timeout=120)
        assert again.status_code == 200 and again.json()["choices"][0]["message"]["content"]
        assert server.process.poll() is None
        metrics = httpx.get(server.url + "/metrics", timeout=5).text
        assert 'mfs_backend_reloads_total{outcome="ok"} 1.0' in metrics
        assert 'mfs_backend_failures_total{kind="dead"} 1.0' in metrics
    finally:
        code = finish(server)
    assert code == -signal.SIGTERM  # stopped by the test's SIGTERM (re-raised after the drain, as uvicorn does), not 2
    assert "backend reloaded (attempt 1 of 3" in server.final_log and "shut down; backend closed" in server.final_log
