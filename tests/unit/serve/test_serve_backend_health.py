"""``mfs serve`` in process (Starlette's TestClient) over a backend that dies: /health and /ready say so with a
reason, new requests get 503 with Retry-After, a streamed request in flight ends with its error event and [DONE],
/metrics counts the failure, and the server either stops (default) or reloads the backend with bounded attempts."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator

import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient

import mfs_core.engine.registry
from mfs_core import MFSEngine
from mfs_core.serve.app import create_app
from mfs_core.serve.config import ServerSettings
from tests.dying_backend import REASON, SETTINGS, DyingBackend

USER = [{"role": "user", "content": "What is 3 + 4?"}]


def wait_for(condition: Callable[[], bool], seconds: float = 10.0) -> float:
    """Seconds until ``condition()`` held (polled every 20 ms); fails the test past ``seconds``."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < seconds, f"not within {seconds} s"
        time.sleep(0.02)
    return time.monotonic() - started


def metric(client: TestClient, line_start: str) -> float:
    """The value of the first /metrics line that starts with ``line_start`` (0.0 when absent)."""
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.fixture
def serve(monkeypatch) -> Iterator[Callable[..., tuple[TestClient, DyingBackend, list[float]]]]:
    """Start the app over a fresh shared :class:`DyingBackend` (the registry's ``create_backend`` makes them);
    returns the client, the backend and the times ``on_exit`` was called."""
    made: list[DyingBackend] = []
    failing = {"loads": 0}

    def create_backend(settings):
        if failing["loads"]:
            failing["loads"] -= 1
            raise OSError("the model cannot be loaded (test)")
        made.append(DyingBackend(hold=failing.get("hold", False)))
        return made[-1]

    monkeypatch.setattr(mfs_core.engine.registry, "create_backend", create_backend)
    opened: list[TestClient] = []

    def start(hold: bool = False, failed_loads: int = 0, **config) -> tuple[TestClient, DyingBackend, list[float]]:
        failing["hold"] = hold
        engine = MFSEngine.from_settings(SETTINGS.changed(max_retries=9))
        failing["hold"], failing["loads"] = False, failed_loads
        app = create_app(engine, ServerSettings(**{"health_interval": 0.05, "shutdown_timeout": 2.0,
                                                   "reload_backoff": 0.0, **config}))
        exits: list[float] = []
        app.state.mfs.watch.on_exit = lambda: exits.append(time.monotonic())
        client = TestClient(app, raise_server_exceptions=False).__enter__()
        opened.append(client)
        return client, made[-1], exits

    yield start
    for client in opened:
        client.__exit__(None, None, None)


def test_health_ready_and_requests_say_the_backend_died_then_the_server_stops(serve) -> None:
    client, backend, exits = serve()
    assert client.get("/health").json()["status"] == "ok" and client.get("/ready").status_code == 200
    assert client.post("/v1/chat/completions", json={"messages": USER}).status_code == 200
    assert metric(client, "mfs_backend_up") == 1.0
    backend.die()
    health = client.get("/health")
    assert health.status_code == 503 and health.json()["status"] == "dead" and health.json()["reason"] == REASON
    ready = client.get("/ready")
    assert ready.status_code == 503 and ready.headers["retry-after"] == "5"
    refused = client.post("/v1/chat/completions", json={"messages": USER})
    assert refused.status_code == 503 and refused.headers["retry-after"] == "5"
    assert REASON in refused.json()["error"]["message"]
    assert wait_for(lambda: exits, 5.0) < 5.0  # drained (nothing in flight) and told to exit
    state = client.app.state.mfs.watch
    assert state.state == "dead" and state.exit_reason == REASON
    assert metric(client, 'mfs_backend_failures_total{kind="dead"}') == 1.0 and metric(client, "mfs_backend_up") == 0.0


def test_a_streamed_request_in_flight_ends_with_a_503_error_event_and_done(serve) -> None:
    client, backend, exits = serve(hold=True)
    lines: list[str] = []

    def read() -> None:
        with client.stream("POST", "/v1/chat/completions", json={"messages": USER, "stream": True}) as response:
            lines.extend(line for line in response.iter_lines() if line.startswith("data: "))

    reader = threading.Thread(target=read)
    reader.start()
    assert backend.entered.wait(5)
    backend.die()
    reader.join(10)
    assert not reader.is_alive()
    error = json.loads(lines[-2][6:])["error"]
    assert lines[-1] == "data: [DONE]" and error["code"] == 503 and REASON in error["message"]
    assert wait_for(lambda: exits, 5.0) < 5.0
    assert metric(client, 'mfs_backend_errors_total{error="BackendDeadError"}') == 1.0


def test_reload_loads_a_fresh_backend_and_says_so(serve) -> None:
    client, backend, exits = serve(on_backend_death="reload", reload_attempts=3, failed_loads=1, reload_backoff=0.5)
    backend.die()
    first = client.get("/health")
    assert first.status_code == 200 and first.json()["status"] == "reloading" and first.json()["reason"] == REASON
    assert client.get("/ready").status_code == 503
    refused = client.post("/v1/chat/completions", json={"messages": USER})
    assert refused.status_code == 503 and "reloading" in refused.json()["error"]["message"]
    wait_for(lambda: client.get("/health").json()["status"] == "ok", 10.0)
    assert client.get("/health").json()["reloads"] == 1 and client.get("/ready").status_code == 200
    server = client.app.state.mfs
    assert server.engine.backend is not backend and backend.closed  # the dead one was closed, a new one serves
    assert client.post("/v1/chat/completions", json={"messages": USER}).status_code == 200
    assert metric(client, 'mfs_backend_reloads_total{outcome="failed"}') == 1.0  # the first attempt failed to load
    assert metric(client, 'mfs_backend_reloads_total{outcome="ok"}') == 1.0 and metric(client, "mfs_backend_up") == 1.0
    assert exits == []


def test_reload_gives_up_after_its_attempts_and_the_server_stops(serve) -> None:
    client, backend, exits = serve(on_backend_death="reload", reload_attempts=2, failed_loads=5)
    backend.die()
    assert wait_for(lambda: exits, 10.0) < 10.0
    watch = client.app.state.mfs.watch
    assert watch.exit_reason.startswith("2 reload attempt(s) failed; last: OSError: the model cannot be loaded")
    assert metric(client, 'mfs_backend_reloads_total{outcome="failed"}') == 2.0
    health = client.get("/health")
    assert health.status_code == 503 and health.json()["status"] == "dead"
