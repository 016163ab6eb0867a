"""``POST /v1/responses`` in process, on the demo model: the search as a reasoning item
and as stream events, the answer and tool calls as output items, with the official ``openai`` client and
LangChain's ``ChatOpenAI(use_responses_api=True)``; what it refuses."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

pytest.importorskip("starlette")
openai = pytest.importorskip("openai")

from starlette.testclient import TestClient  # noqa: E402

from mfs_core import MFSEngine, MFSSettings  # noqa: E402
from mfs_core.serve.app import create_app  # noqa: E402
from mfs_core.serve.config import ServerSettings  # noqa: E402

QUESTION = "Tom has 3 apples. Then Tom buys 4 more apples. How many apples does Tom have now?"
MULTIPLY = {"type": "function", "name": "multiply", "description": "Multiply two integers.",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                           "required": ["a", "b"]}}


def _steady(text: str) -> str:
    """The search's text without the stop line's wall seconds (they differ run to run)."""
    return re.sub(r"; [0-9.]+ s\]", "; ... s]", text)


@pytest.fixture(scope="module")
def http(demo_backend) -> Iterator[TestClient]:  # noqa: ANN001 - the shared demo backend, loaded once
    engine = MFSEngine.from_settings(MFSSettings(device="cpu", step_beam_size=2, num_rollouts=2, max_steps=3))
    with TestClient(create_app(engine, ServerSettings()), raise_server_exceptions=False) as test:
        yield test


@pytest.fixture(scope="module")
def client(http: TestClient):
    return openai.OpenAI(base_url="http://testserver/v1", api_key="unused", http_client=http, max_retries=0)


def test_a_response_is_the_search_as_a_reasoning_item_then_the_answer(client, http: TestClient) -> None:
    response = client.responses.create(model="mfs-demo", input=QUESTION, extra_body={"seed": 1})
    assert [item.type for item in response.output] == ["reasoning", "message"] and response.status == "completed"
    reasoning = response.output[0]
    assert reasoning.summary[0].text == reasoning.content[0].text
    chat = http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": QUESTION}],
                                                   "seed": 1}).json()
    message = chat["choices"][0]["message"]
    assert _steady(reasoning.summary[0].text) == _steady(message["reasoning"])  # the chat reply's reasoning
    assert reasoning.summary[0].text.startswith("[step 0: ") and "[stop: all_finished" in reasoning.summary[0].text
    assert response.output_text == message["content"] and response.output_text.endswith("\\boxed{7}.")
    usage, chat_usage = response.usage, chat["usage"]
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (
        chat_usage["prompt_tokens"], chat_usage["completion_tokens"], chat_usage["total_tokens"])
    assert usage.output_tokens_details.reasoning_tokens == chat_usage["completion_tokens_details"]["reasoning_tokens"]
    assert response.model_extra["mfs"]["answer"] == "7"


def test_a_streamed_response_sends_the_search_while_it_runs(client) -> None:
    with client.responses.stream(model="mfs-demo", input=QUESTION, extra_body={"seed": 1}) as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [event.type for event in events]
    assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.reasoning_summary_part.added"]
    assert kinds[-1] == "response.completed"
    assert [event.sequence_number for event in events] == list(range(len(events)))
    summary = "".join(e.delta for e in events if e.type == "response.reasoning_summary_text.delta")
    content = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    assert summary == content == final.output[0].summary[0].text
    assert kinds.index("response.reasoning_summary_text.delta") < kinds.index("response.output_text.delta")
    assert sum(kind == "response.reasoning_summary_text.delta" for kind in kinds) == summary.count("[") >= 2  # per step
    answer = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert answer == final.output_text and answer.endswith("\\boxed{7}.")


def test_tools_become_function_call_items_and_a_follow_up_turn_is_accepted(client) -> None:
    response = client.responses.create(model="mfs-demo", input="What is 23 times 17? Use the multiply tool.",
                                       tools=[MULTIPLY], tool_choice="required", extra_body={"seed": 1})
    assert [item.type for item in response.output] == ["reasoning", "function_call"]
    call = response.output[1]
    assert (call.name, call.arguments) == ("multiply", '{"a": 23, "b": 17}') and call.call_id
    follow_up = client.responses.create(model="mfs-demo", tools=[MULTIPLY], extra_body={"seed": 1}, input=[
        {"role": "user", "content": "What is 23 times 17? Use the multiply tool."},
        {"type": "function_call", "call_id": call.call_id, "name": "multiply", "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "391"}])
    assert follow_up.status == "completed" and follow_up.output[0].type == "reasoning"


def test_langchain_chat_openai_with_the_responses_api_shows_the_search(http: TestClient) -> None:
    chat_openai = pytest.importorskip("langchain_openai").ChatOpenAI
    chat = chat_openai(base_url="http://testserver/v1", api_key="unused", model="mfs-demo", use_responses_api=True,
                       http_client=http, max_retries=0, extra_body={"seed": 5})
    message = chat.invoke(QUESTION)
    blocks = message.content_blocks
    assert [block["type"] for block in blocks] == ["reasoning", "text"]
    assert blocks[0]["reasoning"].startswith("[step 0: ") and blocks[1]["text"].endswith("\\boxed{7}.")
    streamed = None
    for chunk in chat.stream(QUESTION):
        streamed = chunk if streamed is None else streamed + chunk
    kinds = [block["type"] for block in streamed.content_blocks]
    assert kinds[0] == "reasoning" and _steady(streamed.content_blocks[0]["reasoning"]) == _steady(blocks[0]["reasoning"])


@pytest.mark.parametrize(("body", "piece"), [
    ({"input": QUESTION, "previous_response_id": "resp_1"}, "previous_response_id is not supported"),
    ({"input": QUESTION, "n": 2}, "one response per request"),
    ({"input": QUESTION, "background": True}, "background is not supported"),
    ({}, "needs input"),
    ({"input": []}, "non-empty list"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "'input_image' content part"),
    ({"input": [{"type": "web_search_call"}]}, "'web_search_call' item"),
    ({"input": QUESTION, "tools": [{"type": "web_search"}]}, "function tools only"),
    ({"input": QUESTION, "text": {"format": {"type": "xml"}}}, "text.format must be"),
    ({"input": QUESTION, "max_output_tokens": 0}, "max_tokens"),
    ({"input": QUESTION, "step_beam_size": "2"}, "step_beam_size"),
    ({"input": QUESTION, "stream": "yes"}, "stream"),
    ({"input": QUESTION, "bogus": 1}, "/v1/responses"),
])
def test_what_it_refuses_is_a_one_line_400(http: TestClient, body: dict, piece: str) -> None:
    response = http.post("/v1/responses", json=body)
    assert response.status_code == 400, response.text
    message = response.json()["error"]["message"]
    assert piece in message and "\n" not in message
