"""The engine schedules: sync and async entry points agree, a shared backend
closes with its last engine, and answer keys shape requests through mfs_core.engine.requests."""

from __future__ import annotations

import asyncio
import inspect
import time

import pytest

import mfs_core.engine.registry
from mfs_core.errors import DecodeTimeoutError
from mfs_core import MFSEngine, MFSSettings
from mfs_core.decoders import get_decoder
from mfs_core.engine.requests import check_answer_key, shape_requests
from mfs_core.types import GenerationRequest, TriggeredChoice
from tests.scripted import ScriptedBackend, synthetic_model

SETTINGS = MFSSettings(prompt_format="raw", step_beam_size=2, num_rollouts=2, max_steps=2)
PAIRS = [("decode", "adecode"), ("decode_prompts", "adecode_prompts")]


@pytest.mark.parametrize(("sync", "async_"), PAIRS)
def test_sync_and_async_entry_points_take_the_same_arguments(sync: str, async_: str) -> None:
    one, other = inspect.signature(getattr(MFSEngine, sync)), inspect.signature(getattr(MFSEngine, async_))
    assert list(one.parameters.values()) == list(other.parameters.values())
    assert {"timeout", "answer_key", "triggered_choice", "on_event"} <= set(one.parameters)


def _both(engine: MFSEngine, name: str, *args: object, **kwargs: object) -> list[BaseException]:
    """The exception each of ``name`` and its async twin raises with these arguments."""
    caught = []
    for call in (lambda: getattr(engine, name)(*args, **kwargs),
                 lambda: asyncio.run(getattr(engine, "a" + name)(*args, **kwargs))):
        with pytest.raises(Exception) as info:
            call()
        caught.append(info.value)
    return caught


@pytest.mark.parametrize(("name", "value", "kind", "text"), [
    ("decode", "a single question", TypeError, "questions must be a list of strings, got a single string 'a single question'"),
    ("decode", [], ValueError, "questions must not be empty, got []"),
    ("decode", 7, TypeError, "questions must be a list of strings, got int"),
    ("decode_prompts", "a prompt", TypeError, "prompts must be a list of strings, got str"),
    ("decode_prompts", [], ValueError, "prompts must not be empty, got []"),
])
def test_sync_and_async_raise_the_same_errors(name: str, value: object, kind: type, text: str) -> None:
    engine = MFSEngine(synthetic_model(), SETTINGS)
    for error in _both(engine, name, value):
        assert type(error) is kind and str(error) == text


class _Slow(ScriptedBackend):
    def generate(self, requests: list[GenerationRequest]) -> list:
        time.sleep(0.3)
        return synthetic_model().generate(requests)


@pytest.mark.parametrize("events", [False, True])
def test_a_timeout_is_the_same_error_sync_and_async(events: bool) -> None:
    engine = MFSEngine(_Slow(lambda request: []), SETTINGS)
    on_event = (lambda event: None) if events else None
    for error in _both(engine, "decode", ["q one", "q two"], timeout=0.05, on_event=on_event):
        assert type(error) is DecodeTimeoutError and isinstance(error, TimeoutError)
        assert str(error) == "2 MFS decode(s) did not finish within timeout=0.05 s (abandoned: the engine stops them)"


def test_an_answer_key_phi_cannot_take_is_refused_sync_and_async() -> None:
    engine = MFSEngine(synthetic_model(), SETTINGS)

    class Key:
        def __call__(self, text: str) -> str | None:
            return None

    for error in _both(engine, "decode", ["q"], method="phi", answer_key=Key()):
        assert type(error) is ValueError and "decoder 'phi' cannot vote over actions" in str(error)


def test_a_triggered_choice_reaches_every_request_sync_and_async() -> None:
    choice = TriggeredChoice(trigger="=", choices=(" 7",))
    for run in (lambda e: e.decode(["q"], triggered_choice=choice),
                lambda e: asyncio.run(e.adecode(["q"], triggered_choice=choice))):
        backend = synthetic_model()
        run(MFSEngine(backend, SETTINGS))
        sent = [request for call in backend.calls for request in call]
        assert sent and all(request.triggered_choice == choice for request in sent)


def test_shape_requests_leaves_a_plain_decode_alone_and_check_answer_key_accepts_none() -> None:
    decoder = get_decoder("mfs")("q", SETTINGS)
    assert shape_requests(decoder, "q", None) is decoder
    check_answer_key("phi", None)


# --- a shared backend closes with its last engine -------------------------------------------
class _Closing(ScriptedBackend):
    def __init__(self) -> None:
        super().__init__(lambda request: [])
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_a_shared_backend_closes_when_its_last_engine_closes(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[_Closing] = []
    monkeypatch.setattr(mfs_core.engine.registry, "create_backend", lambda settings: made.append(_Closing()) or made[-1])
    monkeypatch.setattr(mfs_core.engine.registry, "SCHEDULERS", {})
    first = MFSEngine.from_settings(MFSSettings(device="cpu"))
    second = MFSEngine.from_settings(MFSSettings(device="cpu", step_beam_size=3))
    derived = first.with_settings(seed=4)
    assert len(made) == 1 and second.backend is first.backend is derived.backend
    first.close()
    first.close()  # a second close is a no-op: it does not count another engine out
    derived.close()
    assert made[0].closed == 0
    assert MFSEngine.from_settings(MFSSettings(device="cpu")).backend is made[0]  # still shared
    second.close()
    assert made[0].closed == 0  # the engine made just above is still open
    assert len(mfs_core.engine.registry.SCHEDULERS) == 1


def test_the_last_close_closes_the_backend_and_the_next_engine_loads_again(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[_Closing] = []
    monkeypatch.setattr(mfs_core.engine.registry, "create_backend", lambda settings: made.append(_Closing()) or made[-1])
    monkeypatch.setattr(mfs_core.engine.registry, "SCHEDULERS", {})
    with MFSEngine.from_settings(MFSSettings(device="cpu")) as one, MFSEngine.from_settings(MFSSettings(device="cpu")) as two:
        assert one.backend is two.backend
    assert made[0].closed == 1 and mfs_core.engine.registry.SCHEDULERS == {}
    assert MFSEngine.from_settings(MFSSettings(device="cpu")).backend is made[1]
