"""One call path: LangChain, LlamaIndex and ``mfs serve`` prepare a call with
:func:`~mfs_core.call.prepare_call` / :func:`~mfs_core.call.prepare_prompts` and finish
it with :meth:`~mfs_core.call.PreparedCall.finish`, so the same call sends the model the same
prompt and gives back the same call, whichever way it came in. A scripted model, no weights.
"""

from __future__ import annotations

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from pydantic import SecretStr

from langchain_mfs import ChatMFS, MFSLLM as LangChainLLM
from llamaindex_mfs import MFSLLM as LlamaIndexLLM
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings
from mfs_core.call import prepare_call, prepare_prompts
from mfs_core.tools.plan import ResponseFormat
from tests.scripted import ScriptedBackend, continuation, hermes_template
from tests.tool_scripts import calculator_script

SETTINGS = MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=2)
QUESTION = "What is 3 plus 4?"


def test_langchain_llamaindex_and_the_server_send_one_prompt_and_get_one_call() -> None:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from mfs_core.serve.app import create_app
    from mfs_core.serve.config import ServerSettings

    backend = ScriptedBackend(calculator_script, chat_template=hermes_template)
    engine = MFSEngine(backend, SETTINGS)
    spec = {"type": "function", "function": {"name": "add", "description": "Add two integers.", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}}
    first_prompts = []

    def first_prompt_of(run):  # the prompt of the decode's first request
        start = len(backend.calls)
        answer = run()
        first_prompts.append(backend.calls[start][0].prompt)
        return answer

    # the same OpenAI tool to each (the frameworks' own tool conversions describe a function differently)
    langchain = first_prompt_of(lambda: ChatMFS(engine=engine).bind_tools([spec]).invoke(QUESTION))
    llamaindex = first_prompt_of(lambda: LlamaIndexLLM(engine=engine).chat(
        [ChatMessage(role=MessageRole.USER, content=QUESTION)], tools=[spec]))
    with TestClient(create_app(engine, ServerSettings(api_key=SecretStr("k")))) as client:
        served = first_prompt_of(lambda: client.post("/v1/chat/completions", headers={"Authorization": "Bearer k"}, json={
            "messages": [{"role": "user", "content": QUESTION}], "tools": [spec]}).json())
    expected = prepare_call(engine, SETTINGS, [{"role": "user", "content": QUESTION}], tools=[spec]).prompt
    assert first_prompts == [expected] * 3 and '"name": "add"' in expected
    assert [(c["name"], c["args"]) for c in langchain.tool_calls] == [("add", {"a": 3, "b": 4})]
    [block] = [b for b in llamaindex.message.blocks if type(b).__name__ == "ToolCallBlock"]
    assert (block.tool_name, block.tool_kwargs) == ("add", {"a": 3, "b": 4})
    [served_call] = served["choices"][0]["message"]["tool_calls"]
    assert served_call["function"] == {"name": "add", "arguments": '{"a": 3, "b": 4}'}
    assert langchain.content == llamaindex.message.content == served["choices"][0]["message"]["content"]


def test_prepare_prompts_renders_each_prompt_and_finishes_with_the_stop_sequences() -> None:
    backend = ScriptedBackend(lambda r: [continuation("4 + 3 = 7\nThe answer is: \\boxed{7}.", finish_reason="eos")] * r.n)
    engine = MFSEngine(backend, SETTINGS)
    calls = prepare_prompts(engine, SETTINGS, ["2 + 5 = ?", "4 + 3 = ?"])
    assert [call.prompt for call in calls] == [engine.render("2 + 5 = ?", SETTINGS), engine.render("4 + 3 = ?", SETTINGS)]
    assert [call.answer_key for call in calls] == [None, None]  # the extracted answer is voted on
    text, parsed = calls[0].finish("4 + 3 = 7\nThe answer is: \\boxed{7}.", ["\nThe answer"])
    assert (text, parsed.tool_calls) == ("4 + 3 = 7", [])
    with pytest.raises(ValueError, match=r"^prompts must not be empty, got \[\]$"):
        prepare_prompts(engine, SETTINGS, [])
    with pytest.raises(TypeError, match="^prompt 1 of 2: "):
        prepare_prompts(engine, SETTINGS, ["2 + 5 = ?", 7])  # type: ignore[list-item]
    # a JSON response format votes over objects; the completion prompt itself is unchanged
    [json_call] = prepare_prompts(engine, SETTINGS, ["Give {a}"], response_format=ResponseFormat("json_mode"))
    assert json_call.prompt == engine.render("Give {a}", SETTINGS) and json_call.answer_key is not None


def test_the_langchain_llm_finishes_its_completions_through_the_prepared_call() -> None:
    backend = ScriptedBackend(lambda r: [continuation("4 + 3 = 7\nThe answer is: \\boxed{7}.", finish_reason="eos")] * r.n)
    llm = LangChainLLM(engine=MFSEngine(backend, SETTINGS))
    assert llm.invoke("4 + 3 = ?", stop=["\nThe answer"]) == "4 + 3 = 7"
    assert backend.calls[0][0].prompt.startswith(prepare_prompts(llm.engine, llm.settings, ["4 + 3 = ?"])[0].prompt)


def test_response_format_coerce_takes_the_adapters_dict_and_names_a_bad_value() -> None:
    assert ResponseFormat.coerce(None) is None
    assert ResponseFormat.coerce({"type": "json_schema", "schema": {"type": "object"}}) == ResponseFormat(
        "json_schema", {"type": "object"})
    given = ResponseFormat("json_mode")
    assert ResponseFormat.coerce(given) is given
    with pytest.raises(ValueError, match=r"response_format must be .* got \{'type': 'xml'\}"):
        ResponseFormat.coerce({"type": "xml"})


def test_a_chat_call_without_tools_votes_on_the_answer() -> None:
    backend = ScriptedBackend(calculator_script, chat_template=hermes_template)
    engine = MFSEngine(backend, SETTINGS)
    call = prepare_call(engine, SETTINGS, [{"role": "user", "content": QUESTION}])
    assert call.answer_key is None and call.plan.prompt_tools() is None
    assert call.prompt == engine.render_messages([{"role": "user", "content": QUESTION}], SETTINGS)
