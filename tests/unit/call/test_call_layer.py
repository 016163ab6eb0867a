"""The call layer (:mod:`mfs_core.call`): one set of call keywords, one way from a call to its answer,
for LangChain, LlamaIndex and the server alike. A scripted model, no weights."""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole

from langchain_mfs import ChatMFS, MFSLLM as LangChainLLM
from llamaindex_mfs import MFSLLM as LlamaIndexLLM
from mfs_core.call import (
    Caller, CallKeywords, ChatInput, EngineSource, TextInput, chat_message, memo_settings,
)
from mfs_core.engine import MFSEngine
from mfs_core.events import StopEvent
from mfs_core.settings import MFSSettings
from tests.scripted import ScriptedBackend, continuation, synthetic_model

SETTINGS = MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=2)
ANSWER = "3 + 4 = 7\nThe answer is: \\boxed{7}."


def _answering_engine() -> tuple[ScriptedBackend, MFSEngine]:
    backend = ScriptedBackend(lambda r: [continuation(ANSWER, mean_logprob=-0.1, finish_reason="eos")] * r.n)
    return backend, MFSEngine(backend, SETTINGS)


def test_the_keywords_are_read_once_with_max_tokens_renamed_and_stops_joined() -> None:
    keywords = CallKeywords.parse({"seed": 3, "max_tokens": 40, "method": "sc", "stop": ["\n", "x"],
                                   "response_format": {"type": "json_mode"}}, owner="X", stop=["x", "y"])
    assert keywords.method == "sc" and keywords.stop == ("\n", "x", "y")
    assert dict(keywords.settings) == {"seed": 3, "max_answer_tokens": 40}
    assert keywords.response_format is not None and keywords.response_format.kind == "json_mode"
    assert keywords.settings_on(SETTINGS).max_answer_tokens == 40 and keywords.settings_on(SETTINGS).seed == 3
    assert CallKeywords().settings_on(SETTINGS) is SETTINGS  # nothing changed: no settings built
    with pytest.raises(TypeError, match=r"^X got unknown keyword arguments \['api_key', 'beam'\]; a call takes method"):
        CallKeywords.parse({"beam": 2, "api_key": "k"}, owner="X")
    with pytest.raises(ValueError, match="mfs-nope"):
        CallKeywords.parse({"method": "mfs-nope"}, owner="X")
    with pytest.raises(TypeError, match=r"stop must be a list of strings, got the string '\\n'"):
        CallKeywords.parse({"stop": "\n"}, owner="X")


def test_settings_are_rebuilt_only_when_a_field_value_changes() -> None:
    values = {"seed": SETTINGS.seed, "stop_epsilon": SETTINGS.stop_epsilon, "api_key": None}
    memo = memo_settings(None, values, SETTINGS, none_unset=False)
    assert memo[1] == SETTINGS and memo_settings(memo, dict(values), SETTINGS, none_unset=False) is memo
    changed = memo_settings(memo, {**values, "seed": 9}, SETTINGS, none_unset=False)
    assert changed is not memo and changed[1].seed == 9 and changed[1].step_beam_size == 2
    unset = memo_settings(None, {"seed": None, "num_rollouts": 5}, SETTINGS.changed(seed=4), none_unset=True)
    assert (unset[1].num_rollouts, unset[1].step_beam_size, unset[1].seed) == (5, 2, 4)  # None: the base's value
    kept = memo_settings(None, {"api_key": None}, SETTINGS.changed(api_key="sk-x"), none_unset=False)
    assert kept[1].api_key is None  # LangChain's fields hold the setting itself, None included


def test_run_stream_and_arun_give_the_same_reply_cut_at_the_joined_stops() -> None:
    backend, engine = _answering_engine()
    caller = Caller(EngineSource(engine), SETTINGS, stop=("\nThe",))
    chat = ChatInput([chat_message("user", "What is 3 plus 4?")])
    [ran] = caller.run(chat, CallKeywords())
    [awaited] = asyncio.run(caller.arun(chat, CallKeywords()))
    streamed = caller.stream(chat, CallKeywords(stop=("+",)))
    [stop] = [event for event in streamed.events() if isinstance(event, StopEvent)]
    assert ran.text == awaited.text == "3 + 4 = 7" and streamed.finish(stop).text == "3 "
    assert ran.result.answer == "7" and ran.finish_reason == "stop" and ran.model_name == backend.model_name
    assert ran.usage["total_tokens"] == ran.result.prompt_tokens + ran.result.output_tokens > 0
    assert ran.chunks() == ["3 ", "+ ", "4 ", "= ", "7"]


def test_a_text_call_refuses_tools_and_raw_chat_refuses_rendered_tools() -> None:
    _, engine = _answering_engine()
    caller = Caller(EngineSource(engine), SETTINGS)
    tool = {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {}}}}
    with pytest.raises(TypeError, match="^tools and tool_choice need a chat call"):
        caller.open(TextInput(["3 + 4 = ?"]), CallKeywords(tools=[tool]))
    raw = Caller(EngineSource(engine), SETTINGS.changed(prompt_format="raw"))
    as_text = ChatInput([chat_message("user", "3 + 4 = ?")], as_text=lambda: "user: 3 + 4 = ?")
    [prepared] = raw.open(as_text, CallKeywords()).prepared
    assert prepared.prompt == "user: 3 + 4 = ?"  # the raw format: the joined text, not the template


def test_n_choices_decode_with_seed_plus_c_in_prompt_major_order_and_relabelled_events() -> None:
    backend = synthetic_model()
    engine = MFSEngine(backend, SETTINGS)
    call = Caller(EngineSource(engine), SETTINGS).open(TextInput(["2 + 5 = ?", "4 + 3 = ?"]), CallKeywords())
    events: list[int] = []
    futures = call.submit(lambda event: events.append(event.index) if isinstance(event, StopEvent) else None, n=2)
    results = [future.result() for future in futures]
    prompts = [prepared.prompt for prepared in call.prepared]
    expected = [engine.decode_prompts([prompt], settings=SETTINGS.changed(seed=SETTINGS.seed + c))[0].text
                for prompt in prompts for c in range(2)]
    assert [result.text for result in results] == expected
    assert sorted(events) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="^n must be at least 1, got 0$"):
        call.submit(n=0)


def test_an_injected_engine_is_used_refused_for_another_model_and_never_closed() -> None:
    _, engine = _answering_engine()
    source = EngineSource(engine, owner="Tester")
    assert source.get(SETTINGS.changed(seed=5)) is engine
    with pytest.raises(ValueError, match=r"^Tester\(engine=...\): .* in model \(engine: 'mfs-demo'; here: '/m/o'\)"):
        source.get(SETTINGS.changed(model="/m/o"))
    source.close()
    assert not engine.closed
    with pytest.raises(TypeError, match="^engine must be an MFSEngine, got str$"):
        EngineSource("engine")  # type: ignore[arg-type]


def test_llamaindex_takes_method_per_call_and_cuts_chat_at_stop_as_langchain_does() -> None:
    _, engine = _answering_engine()
    llm = LlamaIndexLLM(engine=engine)
    assert llm.complete("What is 3 plus 4?").additional_kwargs["method"] == "mfs"
    assert llm.complete("What is 3 plus 4?", method="sc").additional_kwargs["method"] == "sc"
    message = [ChatMessage(role=MessageRole.USER, content="What is 3 plus 4?")]
    llamaindex = llm.chat(message, stop=["\nThe"], seed=2)
    langchain = ChatMFS(engine=engine).invoke("What is 3 plus 4?", stop=["\nThe"], seed=2)
    assert llamaindex.message.content == langchain.content == "3 + 4 = 7"
    assert LangChainLLM(engine=engine).invoke("What is 3 plus 4?", method="sc", stop=["+"]) == "3 "
    with pytest.raises(TypeError, match=r"^MFSLLM got unknown keyword arguments \['beam'\]"):
        llm.complete("What is 3 plus 4?", beam=2)
