"""``MFSLLM`` on a scripted backend: fields and settings, batching, stop, streaming, usage,
async concurrency and bad input. No model is loaded."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

import pydantic
import pytest
from langchain_core.caches import InMemoryCache
from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import PromptTemplate

import mfs_core.engine.registry
from langchain_mfs import MFSLLM
from mfs_core.call import ADAPTER_FIELDS
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings
from mfs_core.types import Continuation, GenerationRequest
from tests.scripted import ScriptedBackend, continuation

STEP = "3 + 4 = 7"
FINAL = "The answer is: \\boxed{7}."
SETTINGS = MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=3)
PATH = f"{STEP}\n{FINAL}"
"""What the scripted model's MFS decode returns: every rollout has F = -0.2, so V = 0 at
t = 1 converges and the parent beam ("3 + 4 = 7") is completed by its t = 0 rollout."""


def arithmetic_script(request: GenerationRequest) -> list[Continuation]:
    """Steps are ``3 + 4 = 7``; rollouts close with ``\\boxed{7}``; a question containing
    "short" is answered in its first step (every candidate ends with EOS)."""
    is_step = "\n" in request.stop
    if "short" in request.prompt:
        return [continuation(FINAL, mean_logprob=-0.1, finish_reason="eos")] * request.n
    if is_step:
        return [continuation(STEP, mean_logprob=-0.5, stop_reason="\n")] * request.n
    return [continuation(FINAL, mean_logprob=-0.2, stop_reason="<end_of_reasoning>")] * request.n


class SlowBackend(ScriptedBackend):
    """A scripted backend whose ``generate`` takes ``delay`` seconds, as a model would.

    ``probe``, if set, is read as each call starts and ends: ``probed`` holds the pairs.
    """

    def __init__(self, delay: float) -> None:
        super().__init__(arithmetic_script)
        self.delay = delay
        self.probe: Callable[[], int] | None = None
        self.probed: list[tuple[int, int]] = []

    def generate(self, requests: Sequence[GenerationRequest]) -> list[list[Continuation]]:
        start = self.probe() if self.probe else 0
        time.sleep(self.delay)
        if self.probe:
            self.probed.append((start, self.probe()))
        return super().generate(requests)


@pytest.fixture
def backend() -> ScriptedBackend:
    return ScriptedBackend(arithmetic_script)


@pytest.fixture
def llm(backend: ScriptedBackend) -> MFSLLM:
    return MFSLLM(engine=MFSEngine(backend, SETTINGS))


class TokenRecorder(BaseCallbackHandler):
    def __init__(self) -> None:
        self.tokens: list[str] = []

    def on_llm_new_token(self, token: str, **kwargs: Any) -> None:
        self.tokens.append(token)


class AsyncTokenRecorder(AsyncCallbackHandler):
    def __init__(self) -> None:
        self.tokens: list[str] = []

    async def on_llm_new_token(self, token: str, **kwargs: Any) -> None:
        self.tokens.append(token)


# --- fields and settings ----------------------------------------------------------------------
def test_every_flat_field_has_the_settings_default() -> None:
    for name in ADAPTER_FIELDS:
        assert MFSLLM.model_fields[name].default == MFSSettings.model_fields[name].default, name


def test_fields_not_given_come_from_mfs_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MFS_STEP_BEAM_SIZE", "3")
    monkeypatch.setenv("MFS_TEMPERATURE", "0.5")
    llm = MFSLLM(temperature=0.9)
    assert (llm.step_beam_size, llm.temperature) == (3, 0.9)
    assert llm.settings == MFSSettings(step_beam_size=3, temperature=0.9)


def test_an_injected_engine_gives_the_defaults(backend: ScriptedBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MFS_NUM_ROLLOUTS", "5")  # the engine's settings win over the environment
    engine = MFSEngine(backend, SETTINGS)
    llm = MFSLLM(engine=engine, max_steps=2)
    assert (llm.step_beam_size, llm.num_rollouts, llm.max_steps) == (2, 2, 2)
    assert llm.engine is engine
    assert MFSLLM(engine=engine, max_tokens=30).max_answer_tokens == 30
    with pytest.raises(ValueError, match=r"in model \(engine: 'mfs-demo'; here: 'other'\)"):
        MFSLLM(engine=engine, model="other")
    with pytest.raises(TypeError, match="engine must be an MFSEngine, got ScriptedBackend"):
        MFSLLM(engine=backend)


def test_bad_fields_raise_errors_that_name_them() -> None:
    with pytest.raises(pydantic.ValidationError, match="step_beam_size"):
        MFSLLM(step_beam_size=0)
    with pytest.raises(TypeError, match=r"^MFSLLM got an unknown argument 'step_beam_sise' \(did you mean 'step_beam_size'\?\)$"):
        MFSLLM(step_beam_sise=4)
    with pytest.raises(pydantic.ValidationError, match="unknown decoding method 'beam'"):
        MFSLLM(method="beam")
    with pytest.raises(ValueError, match="give max_tokens or max_answer_tokens, not both"):
        MFSLLM(max_tokens=10, max_answer_tokens=20)


def test_max_tokens_is_langchains_name_for_max_answer_tokens() -> None:
    llm = MFSLLM(max_tokens=40, stop=["Q:"])
    assert llm.max_answer_tokens == 40
    params = llm._get_ls_params(stop=["\n\n"])
    assert params["ls_max_tokens"] == 40
    assert params["ls_stop"] == ["Q:", "\n\n"]
    assert (params["ls_provider"], params["ls_model_name"], params["ls_model_type"]) == ("mfs", "mfs-demo", "llm")


def test_identifying_params_hold_every_setting_so_the_cache_keys_on_them(backend: ScriptedBackend) -> None:
    engine = MFSEngine(backend, SETTINGS)
    cache = InMemoryCache()
    llm = MFSLLM(engine=engine, cache=cache)
    assert set(MFSSettings.model_fields) - {"api_key"} | {"method", "instance_stop"} <= set(llm._identifying_params)
    assert "api_key" not in llm._identifying_params  # a secret never keys the cache
    first = llm.invoke("Tom has 3 apples.")
    calls = backend.num_calls
    assert MFSLLM(engine=engine, cache=cache).invoke("Tom has 3 apples.") == first
    assert backend.num_calls == calls  # a cache hit: no backend call
    MFSLLM(engine=engine, cache=cache, num_rollouts=3).invoke("Tom has 3 apples.")
    assert backend.num_calls > calls  # another setting: another cache key
    # Instance stop sequences key the cache too (LangChain keys the call's under "stop").
    assert MFSLLM(engine=engine, cache=cache, stop=["\n"]).invoke("Tom has 3 apples.") == STEP


# --- batch: one backend call per decoding round -------------------------------------------------
def test_batch_of_8_costs_one_backend_call_per_decoding_round(llm: MFSLLM, backend: ScriptedBackend) -> None:
    prompts = [f"Question {i}: Tom has {i} apples." for i in range(6)] + ["short one", "short two"]
    alone = []
    for prompt in prompts:
        before = backend.num_calls
        llm.invoke(prompt)
        alone.append(backend.num_calls - before)
    # sample, foresight, sample, foresight (converged), fresh completions of the beams that are
    # copies of one path (share_foresight); EOS at once
    assert alone == [5] * 6 + [1, 1]

    before = backend.num_calls
    texts = llm.batch(prompts)
    batch_calls = backend.calls[before:]
    assert len(batch_calls) == max(alone) == 5
    first_round = {prompt for prompt in prompts for request in batch_calls[0] if prompt in request.prompt}
    assert first_round == set(prompts)  # every decode's first request went in the first call
    assert texts == [llm.invoke(prompt) for prompt in prompts]


def test_batch_reaches_generate_as_one_call(llm: MFSLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []
    original = MFSLLM._generate

    def spy(self: MFSLLM, prompts: list[str], *args: Any, **kwargs: Any) -> Any:
        seen.append(list(prompts))
        return original(self, prompts, *args, **kwargs)

    monkeypatch.setattr(MFSLLM, "_generate", spy)
    llm.batch(["a", "b", "c"])
    assert seen == [["a", "b", "c"]]


# --- stop ---------------------------------------------------------------------------------------
def test_stop_is_honoured_per_call_and_per_instance(backend: ScriptedBackend) -> None:
    engine = MFSEngine(backend, SETTINGS)
    full = MFSLLM(engine=engine).invoke("Tom has 3 apples.")
    assert full == PATH
    assert MFSLLM(engine=engine).invoke("Tom has 3 apples.", stop=["= 7"]) == "3 + 4 "
    assert MFSLLM(engine=engine, stop=["\n"]).invoke("Tom has 3 apples.") == STEP
    # Both apply: the instance's "answer" and the call's "+"; the earliest occurrence wins.
    assert MFSLLM(engine=engine, stop=["answer"]).invoke("Tom has 3 apples.", stop=["+"]) == "3 "
    assert MFSLLM(engine=engine).batch(["Tom has 3 apples.", "short"], stop=["\\boxed"]) == [
        f"{STEP}\nThe answer is: ",
        "The answer is: ",
    ]


# --- streaming ----------------------------------------------------------------------------------
def test_stream_yields_the_final_text_and_fires_on_llm_new_token(llm: MFSLLM) -> None:
    recorder = TokenRecorder()
    chunks = list(llm.stream("Tom has 3 apples.", config={"callbacks": [recorder]}))
    assert "".join(chunks) == llm.invoke("Tom has 3 apples.")
    assert len(chunks) == 9  # each word of the two lines
    assert recorder.tokens == chunks


async def test_astream_yields_the_final_text_and_fires_on_llm_new_token(llm: MFSLLM) -> None:
    recorder = AsyncTokenRecorder()
    chunks = [chunk async for chunk in llm.astream("Tom has 3 apples.", stop=["\n"], config={"callbacks": [recorder]})]
    assert chunks == ["3 ", "+ ", "4 ", "= ", "7"]
    assert recorder.tokens == chunks


def test_a_stream_carries_the_generation_info_on_its_last_chunk(llm: MFSLLM) -> None:
    chunks = list(llm._stream("Tom has 3 apples."))
    assert [chunk.generation_info for chunk in chunks[:-1]] == [None] * (len(chunks) - 1)
    info = chunks[-1].generation_info
    assert (info["answer"], info["vote_share"], info["model_name"]) == ("7", 1.0, "mfs-demo")


# --- usage and metadata -------------------------------------------------------------------------
def test_token_usage_and_generation_info(llm: MFSLLM, backend: ScriptedBackend) -> None:
    result = llm.generate(["Tom has 3 apples.", "short"])
    requests = backend.requests
    prompt_tokens = sum(backend.count_tokens(request.prompt) for request in requests)
    completion_tokens = sum(cont.num_tokens for request in requests for cont in arithmetic_script(request))
    assert result.llm_output == {
        "token_usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
        "model_name": "mfs-demo",
    }
    long, short = (generations[0].generation_info for generations in result.generations)
    assert (long["answer"], long["vote_share"], long["stop_reason"], long["num_steps"]) == ("7", 1.0, "converged", 2)
    assert (short["answer"], short["stop_reason"], short["num_steps"]) == ("7", "all_finished", 1)
    assert long["flops"] == 6 * long["output_tokens"] * backend.num_parameters
    assert long["token_usage"]["total_tokens"] + short["token_usage"]["total_tokens"] == prompt_tokens + completion_tokens


def test_get_num_tokens_uses_the_models_tokenizer(llm: MFSLLM, backend: ScriptedBackend) -> None:
    assert llm.get_num_tokens("Tom has 3 apples now") == 5 == backend.count_tokens("Tom has 3 apples now")
    with pytest.raises(NotImplementedError, match="get_num_tokens"):
        llm.get_token_ids("Tom")
    custom = MFSLLM(engine=llm.engine, custom_get_token_ids=lambda text: [1] * len(text))
    assert custom.get_num_tokens("Tom") == 3


# --- per-call settings ----------------------------------------------------------------------------
def test_a_call_may_change_settings(llm: MFSLLM, backend: ScriptedBackend) -> None:
    llm.invoke("Tom has 3 apples.", step_beam_size=3, num_rollouts=1)
    assert backend.calls[0][0].n == 3  # first step: one request of n = M·N
    llm.bind(max_steps=1).invoke("Tom has 3 apples.")
    assert llm.step_beam_size == 2  # the instance is unchanged
    with pytest.raises(TypeError, match=r"unknown keyword arguments \['beam_width'\]"):
        llm.invoke("Tom has 3 apples.", beam_width=3)
    with pytest.raises(pydantic.ValidationError, match="num_rollouts"):
        llm.invoke("Tom has 3 apples.", num_rollouts=0)


def test_the_chain_from_the_docs(llm: MFSLLM) -> None:
    chain = PromptTemplate.from_template("{question}") | llm | StrOutputParser()
    assert chain.invoke({"question": "Tom has 3 apples."}) == PATH


# --- async ------------------------------------------------------------------------------------
async def test_16_concurrent_ainvokes_are_decoded_together_and_the_loop_keeps_ticking() -> None:
    backend = SlowBackend(delay=0.1)
    llm = MFSLLM(engine=MFSEngine(backend, SETTINGS))
    questions = [f"Question {i}: Tom has {i} apples." for i in range(16)]
    sequential_calls = 16 * 4  # each decode alone takes 4 rounds (test_batch_of_8_...)

    ticks = 0
    done = asyncio.Event()

    async def tick() -> None:
        nonlocal ticks
        while not done.is_set():
            await asyncio.sleep(0.005)
            ticks += 1

    backend.probe = lambda: ticks
    ticker = asyncio.create_task(tick())
    texts = await asyncio.gather(*(llm.ainvoke(question) for question in questions))
    done.set()
    await ticker

    assert texts == [PATH] * 16
    assert backend.num_calls < sequential_calls / 4
    assert max(len(call) for call in backend.calls) >= 16  # one call held a request of every decode
    # The event loop kept running while the model worked: the ticker advanced during the
    # backend calls (a decode run on the loop's thread would freeze it through every call).
    ticked_during = [end > start for start, end in backend.probed]
    assert sum(ticked_during) >= len(ticked_during) / 2


async def test_abatch_is_one_agenerate_call(llm: MFSLLM, backend: ScriptedBackend) -> None:
    texts = await llm.abatch(["Tom has 3 apples.", "short"])
    assert texts == [PATH, FINAL]
    assert len(backend.calls) == 5  # the rounds of one decode alone (test above): the two share them


async def test_timeout_raises_and_the_engine_goes_on() -> None:
    engine = MFSEngine(SlowBackend(delay=0.2), SETTINGS)
    llm = MFSLLM(engine=engine, timeout=0.1)
    with pytest.raises(TimeoutError, match="did not finish within timeout=0.1 s"):
        await llm.ainvoke("Tom has 3 apples.")
    with pytest.raises(TimeoutError, match="did not finish within timeout=0.1 s"):
        llm.invoke("Tom has 3 apples.")
    # A timed-out decode is not cancelled inside the engine: a call decoded beside it
    # completes (a cancelled engine future would stop the worker with both in flight).
    timed_out, completed = await asyncio.wait_for(
        asyncio.gather(llm.ainvoke("Tom has 3 apples."), MFSLLM(engine=engine).ainvoke("Tom has 4 apples."),
                       return_exceptions=True),
        timeout=10,
    )
    assert isinstance(timed_out, TimeoutError)
    assert completed == PATH


# --- bad input ----------------------------------------------------------------------------------
def test_empty_prompt_list(llm: MFSLLM) -> None:
    with pytest.raises(ValueError, match=r"prompts must not be empty, got \[\]"):
        llm.generate([])
    assert llm.batch([]) == []  # LangChain answers an empty batch itself


def test_empty_prompt_names_its_index_and_costs_no_backend_call(llm: MFSLLM, backend: ScriptedBackend) -> None:
    with pytest.raises(ValueError, match="prompt 1 of 3: a prompt must not be empty or whitespace only"):
        llm.batch(["Tom has 3 apples.", "  ", "short"])
    assert backend.num_calls == 0
    with pytest.raises(ValueError, match="prompt 0 of 1"):
        llm.invoke("")


async def test_a_bad_request_fails_alone_among_concurrent_calls(llm: MFSLLM) -> None:
    results = await asyncio.gather(
        llm.ainvoke("Tom has 3 apples."), llm.ainvoke(""), llm.ainvoke("short"), return_exceptions=True
    )
    assert results[0] == PATH
    assert isinstance(results[1], ValueError)
    assert results[2] == FINAL


def test_non_text_input_is_rejected(llm: MFSLLM) -> None:
    with pytest.raises(TypeError, match="MFSLLM input must be a string, a PromptValue or a list of messages, got int: 42"):
        llm.invoke(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="got bytes: b'abc'"):
        llm.invoke(b"abc")  # type: ignore[arg-type]


# --- shared model -------------------------------------------------------------------------------
def test_instances_with_the_same_backend_settings_share_one_loaded_model(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded: list[MFSSettings] = []

    def create_backend(settings: MFSSettings) -> ScriptedBackend:
        loaded.append(settings)
        return ScriptedBackend(arithmetic_script)

    monkeypatch.setattr(mfs_core.engine.registry, "create_backend", create_backend)
    monkeypatch.setattr(mfs_core.engine.registry, "SCHEDULERS", {})
    a = MFSLLM(model="shared-test-model", step_beam_size=2, num_rollouts=2)
    b = MFSLLM(model="shared-test-model", step_beam_size=4, max_steps=2)
    assert loaded == []  # nothing loads at construction
    assert a.invoke("Tom has 3 apples.") == b.invoke("Tom has 3 apples.", step_beam_size=2, max_steps=8)
    assert a.engine.backend is b.engine.backend
    assert len(loaded) == 1
    MFSLLM(model="another-test-model").engine  # noqa: B018 - another model loads on first use
    assert [settings.model for settings in loaded] == ["shared-test-model", "another-test-model"]
