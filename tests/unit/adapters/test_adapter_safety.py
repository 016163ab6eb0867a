"""What the adapters must never do: leak ``api_key``, answer from the cache for other
settings, drop an unknown argument, or drift from :class:`MFSSettings`' fields.

Every test runs on a scripted backend (no model is loaded); the fake key below must appear
in none of the places a key usually leaks to (repr, callbacks, cache keys, saved files,
serialised components).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

import pytest
from langchain_core.caches import InMemoryCache
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.globals import set_llm_cache
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.llm import LLMCompletionStartEvent
from pydantic import SecretStr

from langchain_mfs import ChatMFS
from langchain_mfs import MFSLLM as LangChainMFSLLM
from llamaindex_mfs import MFSLLM as LlamaIndexMFSLLM
from mfs_core.call import ADAPTER_FIELDS
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings
from mfs_core.types import Continuation, GenerationRequest
from tests.scripted import ScriptedBackend, continuation

KEY = "sk-FAKE-do-not-leak-4f2a"
SETTINGS = MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=3)
STEP = "3 + 4 = 7"
FINAL = "The answer is: \\boxed{7}."


def script(request: GenerationRequest) -> list[Continuation]:
    """One step ``3 + 4 = 7``, then rollouts that close with ``\\boxed{7}``."""
    if "\n" in request.stop:
        return [continuation(STEP, mean_logprob=-0.5, stop_reason="\n")] * request.n
    return [continuation(FINAL, mean_logprob=-0.2, stop_reason="<end_of_reasoning>")] * request.n


@pytest.fixture
def backend() -> ScriptedBackend:
    return ScriptedBackend(script)


@pytest.fixture
def engine(backend: ScriptedBackend) -> MFSEngine:
    return MFSEngine(backend, SETTINGS)


class Recorder(BaseCallbackHandler):
    """Keeps what ``on_llm_start`` / ``on_chat_model_start`` receive (what tracers record)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_llm_start(self, serialized: dict[str, Any], prompts: list[str], **kwargs: Any) -> None:
        self.seen.append(repr((serialized, kwargs.get("invocation_params"), kwargs.get("metadata"))))

    def on_chat_model_start(self, serialized: dict[str, Any], messages: Any, **kwargs: Any) -> None:
        self.seen.append(repr((serialized, kwargs.get("invocation_params"), kwargs.get("metadata"))))


# --- api_key: LangChain --------------------------------------------------------------------------
@pytest.mark.parametrize("cls", [LangChainMFSLLM, ChatMFS])
def test_langchain_api_key_is_a_secret_everywhere(cls: type, backend: ScriptedBackend, tmp_path: Path) -> None:
    engine = MFSEngine(backend, SETTINGS.from_values({**SETTINGS.model_dump(), "api_key": KEY}))  # the key reaches the model
    cache = InMemoryCache()
    recorder = Recorder()
    llm = cls(engine=engine, api_key=KEY, cache=cache, callbacks=[recorder])
    assert isinstance(llm.api_key, SecretStr) and llm.api_key.get_secret_value() == KEY
    assert llm.settings.api_key.get_secret_value() == KEY  # still reaches the backend
    assert llm.lc_secrets == {"api_key": "MFS_API_KEY"}
    assert KEY not in repr(llm) and KEY not in str(llm)
    llm.invoke("Tom has 3 apples.")
    assert recorder.seen and all(KEY not in seen for seen in recorder.seen)  # serialized, invocation_params
    assert cache._cache and KEY not in repr(list(cache._cache))  # the cache keys
    assert KEY not in repr(llm._identifying_params)
    if cls is LangChainMFSLLM:
        path = tmp_path / "llm.yaml"
        llm.save(path)
        saved = path.read_text()
        assert "step_beam_size: 2" in saved and KEY not in saved


def test_langchain_api_key_comes_from_the_environment_as_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MFS_API_KEY", KEY)
    llm = LangChainMFSLLM()
    assert llm.api_key.get_secret_value() == KEY and KEY not in repr(llm)


def test_langchain_api_key_is_not_a_per_call_setting(engine: MFSEngine) -> None:
    with pytest.raises(TypeError, match=r"unknown keyword arguments \['api_key'\]"):
        LangChainMFSLLM(engine=engine).invoke("Tom has 3 apples.", api_key=KEY)


# --- api_key: LlamaIndex -------------------------------------------------------------------------
def test_llamaindex_api_key_is_a_secret_everywhere(backend: ScriptedBackend) -> None:
    engine = MFSEngine(backend, SETTINGS.from_values({**SETTINGS.model_dump(), "api_key": KEY}))
    llm = LlamaIndexMFSLLM(engine=engine, api_key=KEY)
    assert llm.settings.api_key.get_secret_value() == KEY
    assert KEY not in repr(llm) and KEY not in str(llm)
    assert "api_key" not in llm.to_dict() and KEY not in llm.to_json()

    class Starts(BaseEventHandler):
        seen: list = []

        @classmethod
        def class_name(cls) -> str:
            return "Starts"

        def handle(self, event: Any, **kwargs: Any) -> None:
            if isinstance(event, LLMCompletionStartEvent):
                self.seen.append(repr(event.model_dict))

    handler = Starts()
    dispatcher = get_dispatcher()
    dispatcher.add_event_handler(handler)
    try:
        llm.complete("Tom has 3 apples.")
    finally:
        dispatcher.event_handlers.remove(handler)
    assert handler.seen and all(KEY not in seen for seen in handler.seen)


# --- the LangChain LLM cache never answers for other settings --------------------------------------
@pytest.fixture
def global_cache() -> Any:
    cache = InMemoryCache()
    set_llm_cache(cache)
    yield cache
    set_llm_cache(None)


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda llm, q: llm.invoke(q, seed=7), {"seed": 7}),
        (lambda llm, q: llm.invoke(q, temperature=0.3), {"temperature": 0.3}),
        (lambda llm, q: llm.invoke(q, step_beam_size=1, num_rollouts=3), {"n": 3}),
        (lambda llm, q: llm.bind(seed=11, temperature=0.9).invoke(q), {"seed": 11, "temperature": 0.9}),
    ],
    ids=["seed", "temperature", "M-and-N", "bind"],
)
def test_a_cached_answer_is_not_reused_for_other_call_settings(
    global_cache: InMemoryCache, engine: MFSEngine, backend: ScriptedBackend, call: Any, expected: dict[str, Any]
) -> None:
    llm = LangChainMFSLLM(engine=engine)
    question = "Tom has 3 apples."
    llm.invoke(question)
    before = backend.num_calls
    llm.invoke(question)
    assert backend.num_calls == before  # the same settings: a cache hit
    call(llm, question)
    assert backend.num_calls > before  # other settings: decoded, not read from the cache
    first = backend.calls[before][0]
    for name, value in expected.items():
        if name == "seed":
            assert first.seed is not None and first.seed != backend.calls[0][0].seed
        else:
            assert getattr(first, name) == value, name
    after = backend.num_calls
    call(llm, question)
    assert backend.num_calls == after  # and that call's answer is now cached under its own key
    assert len(global_cache._cache) == 2
    assert llm.seed == 0 and llm.temperature == SETTINGS.temperature  # the instance is unchanged


async def test_an_async_cached_answer_is_not_reused_for_other_settings(
    global_cache: InMemoryCache, engine: MFSEngine, backend: ScriptedBackend
) -> None:
    llm = LangChainMFSLLM(engine=engine)
    await llm.ainvoke("Tom has 3 apples.")
    before = backend.num_calls
    await llm.ainvoke("Tom has 3 apples.", temperature=0.3)
    assert backend.num_calls > before and backend.calls[before][0].temperature == 0.3


# --- unknown arguments, max_tokens and timeout: the same in both adapters ---------------------------
@pytest.mark.parametrize("cls", [LangChainMFSLLM, ChatMFS, LlamaIndexMFSLLM])
def test_unknown_arguments_are_refused_in_one_line_naming_the_closest(cls: type, engine: MFSEngine) -> None:
    name = cls.__name__
    with pytest.raises(TypeError, match=rf"^{name} got an unknown argument 'step_beam' \(did you mean 'step_beam_size'\?\)$"):
        cls(engine=engine, step_beam=4)
    with pytest.raises(TypeError, match=r"'num_rolouts' \(did you mean 'num_rollouts'\?\)"):
        cls(engine=engine, num_rolouts=4)


@pytest.mark.parametrize("cls", [LangChainMFSLLM, LlamaIndexMFSLLM])
def test_max_tokens_sets_max_answer_tokens(cls: type, engine: MFSEngine) -> None:
    assert cls(engine=engine, max_tokens=99).settings.max_answer_tokens == 99
    with pytest.raises(ValueError, match="give max_tokens or max_answer_tokens, not both"):
        cls(engine=engine, max_tokens=10, max_answer_tokens=20)


def test_llamaindex_max_tokens_per_call(engine: MFSEngine, backend: ScriptedBackend) -> None:
    LlamaIndexMFSLLM(engine=engine).complete("Tom has 3 apples.", max_tokens=17)
    rollouts = [request for request in backend.requests if "\n" not in request.stop]
    assert rollouts and {request.max_tokens for request in rollouts} == {17}


class SlowBackend(ScriptedBackend):
    def __init__(self, delay: float) -> None:
        super().__init__(script)
        self.delay = delay

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Continuation]]:
        time.sleep(self.delay)
        return super().generate(requests)


async def test_llamaindex_timeout_raises_as_langchain_does() -> None:
    engine = MFSEngine(SlowBackend(delay=0.2), SETTINGS)
    llm = LlamaIndexMFSLLM(engine=engine, timeout=0.1)
    with pytest.raises(TimeoutError, match=r"^1 MFS decode\(s\) did not finish within timeout=0.1 s"):
        llm.complete("Tom has 3 apples.")
    with pytest.raises(TimeoutError, match="did not finish within timeout=0.1 s"):
        await llm.acomplete("Tom has 3 apples.")
    with pytest.raises(TimeoutError, match="did not finish within timeout=0.1 s"):
        LangChainMFSLLM(engine=engine, timeout=0.1).invoke("Tom has 3 apples.")
    done = await asyncio.wait_for(LlamaIndexMFSLLM(engine=engine).acomplete("Tom has 3 apples."), timeout=30)
    assert done.text.endswith(FINAL)


# --- one source of truth for the fields ------------------------------------------------------------
@pytest.mark.parametrize("cls", [LangChainMFSLLM, ChatMFS])
def test_langchain_fields_match_the_settings(cls: type) -> None:
    for name in ADAPTER_FIELDS:
        setting, field = MFSSettings.model_fields[name], cls.model_fields[name]
        assert field.annotation == setting.annotation, name
        assert field.default == setting.default, name


def test_llamaindex_fields_match_the_settings() -> None:
    for name in ADAPTER_FIELDS:
        setting, field = MFSSettings.model_fields[name], LlamaIndexMFSLLM.model_fields[name]
        assert field.annotation == Optional[setting.annotation], name  # noqa: UP045 - the adapter's spelling
        assert field.default is None, name
        assert setting.description in field.description, name
