"""A backend that dies under its engine: every call then raises BackendDeadError, at once and never a hang; the
shared-backend registry loads a fresh backend for the next engine; the LangChain and LlamaIndex models sharing
the dead engine raise the same error; the HTTP backend says when every replica is down past its retry budget."""

from __future__ import annotations

import time

import pytest

import langchain_mfs
import llamaindex_mfs
import mfs_core.engine.registry
from mfs_core import MFSEngine, MFSSettings
from mfs_core.errors import BackendDeadError, MFSError
from tests.dying_backend import REASON, SETTINGS, DyingBackend

QUESTION = "Tom has 3 apples. He buys 4 more. How many now?"


def test_decodes_in_flight_fail_with_backend_dead_error_without_a_retry_each() -> None:
    backend = DyingBackend(hold=True)
    engine = MFSEngine(backend, SETTINGS)
    futures = engine.submit_prompts([engine.render(QUESTION)] * 3)
    assert backend.entered.wait(5)
    backend.die()
    started = time.monotonic()
    for future in futures:
        with pytest.raises(BackendDeadError) as caught:
            future.result(timeout=5)
        assert caught.value.reason == REASON and isinstance(caught.value.__cause__, RuntimeError)
    assert time.monotonic() - started < 2.0
    assert backend.attempts == 1  # the round's batched call; no decode was retried alone against a dead backend


def test_every_later_call_raises_at_once_and_says_how_to_get_a_new_backend() -> None:
    backend = DyingBackend()
    engine = MFSEngine(backend, SETTINGS)
    assert engine.decode([QUESTION])[0].answer == "7" and engine.dead_reason is None
    backend.die()
    calls = backend.attempts
    for call in (lambda: engine.decode([QUESTION], timeout=30), lambda: engine.submit_prompts(["x"]),
                 lambda: engine.stream_prompts(["x"])):
        started = time.monotonic()
        with pytest.raises(BackendDeadError) as caught:
            call()
        assert time.monotonic() - started < 0.5
    message = str(caught.value)
    assert isinstance(caught.value, MFSError) and isinstance(caught.value, RuntimeError)
    assert REASON in message and "MFSEngine.from_settings" in message and "\n" not in message
    assert engine.dead_reason == REASON
    assert backend.attempts == calls  # refused before any call to the dead backend


def test_the_models_sharing_a_dead_engine_raise_the_same_error() -> None:
    backend = DyingBackend()
    engine = MFSEngine(backend, SETTINGS)
    chat, llm, index = langchain_mfs.ChatMFS(engine=engine), langchain_mfs.MFSLLM(engine=engine), llamaindex_mfs.MFSLLM(engine=engine)
    assert chat.invoke(QUESTION, seed=1).content
    backend.die()
    for call in (lambda: chat.invoke(QUESTION), lambda: llm.invoke(QUESTION), lambda: index.complete(QUESTION),
                 lambda: list(chat.stream(QUESTION))):
        started = time.monotonic()
        with pytest.raises(BackendDeadError, match="MFSEngine.from_settings"):
            call()
        assert time.monotonic() - started < 1.0


def test_the_registry_drops_a_dead_backend_and_the_next_engine_loads_a_fresh_one(monkeypatch) -> None:
    made: list[DyingBackend] = []

    def create_backend(settings: MFSSettings) -> DyingBackend:
        made.append(DyingBackend())
        return made[-1]

    monkeypatch.setattr(mfs_core.engine.registry, "create_backend", create_backend)
    settings = SETTINGS.changed(max_retries=7)  # a backend key of this test's own
    first, second = MFSEngine.from_settings(settings), MFSEngine.from_settings(settings)
    assert len(made) == 1 and first.backend is second.backend
    made[0].die()
    third = MFSEngine.from_settings(settings)
    assert len(made) == 2 and third.backend is made[1]
    assert third.decode([QUESTION])[0].answer == "7"
    with pytest.raises(BackendDeadError):
        first.decode([QUESTION])
    first.close()
    assert not made[0].closed  # the second engine still holds it
    second.close()
    assert made[0].closed and not made[1].closed  # the dead one closes with its last engine, the fresh one serves on
    assert MFSEngine.from_settings(settings).backend is made[1]
    third.close()


def test_a_fatal_device_error_is_told_from_a_bad_request() -> None:
    torch = pytest.importorskip("torch")
    from mfs_core.backends.transformers import fatal_device_error

    assert "ran out of memory" in fatal_device_error(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB"))
    assert "device error" in fatal_device_error(RuntimeError("CUDA error: device-side assert triggered\nmore"))
    assert fatal_device_error(ValueError("CUDA error")) is None
    assert fatal_device_error(RuntimeError("shape mismatch")) is None


class _Response:
    def __init__(self, status_code: int) -> None:
        self.status_code = status_code


def test_the_http_backend_is_unavailable_only_once_every_replica_failed_past_its_budget() -> None:
    pytest.importorskip("httpx")
    from mfs_core.backends.openai import OpenAIBackend

    backend = OpenAIBackend(["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"], "m", max_retries=2)
    refused = ConnectionRefusedError("refused")
    backend.sender.note_replica("http://127.0.0.1:1/v1/completions", None, refused)
    backend.sender.note_replica("http://127.0.0.1:2/v1/completions", _Response(503), None)
    assert backend.unavailable_reason is None  # both failed, but no request has spent its retries yet
    backend.sender._failed(0, 0, type("F", (), {"message": "HTTP 503"})())
    reason = backend.unavailable_reason
    assert reason.startswith("every replica of the HTTP backend is down past its retry budget (max_retries=2)")
    assert "http://127.0.0.1:1/v1: ConnectionRefusedError: refused" in reason and "http://127.0.0.1:2/v1: HTTP 503" in reason
    backend.sender.note_replica("http://127.0.0.1:2/v1/completions", _Response(200), None)
    assert backend.unavailable_reason is None  # one replica answers again
