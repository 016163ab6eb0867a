"""``mfs serve`` against real clients on loopback: the official ``openai`` client, LangChain's
``ChatOpenAI`` and LlamaIndex's ``OpenAILike``, plus the server's refusals, overload and
disconnects.

One server for the module (``tests/serve_process.py``: a child process on 127.0.0.1, started
with a bounded wait, stopped by PID) serves the bundled demo model with a tiny search; the
tests decode the same questions with an in-process engine of the same settings and compare.
pytest-socket lets these tests reach 127.0.0.1 only.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("starlette", reason="the serve extra is not installed")
pytest.importorskip("openai", reason="the openai client is not installed (the test extra)")

from mfs_core import MFSEngine, MFSSettings  # noqa: E402
from tests.serve_process import serve_process, stop_process  # noqa: E402
from tests.tool_model import requires_tool_model  # noqa: E402

pytestmark = [pytest.mark.allow_hosts(["127.0.0.1"]), pytest.mark.slow]

KEY = "sk-test-serve-key"
SEARCH = {"step_beam_size": 2, "num_rollouts": 2, "max_steps": 3, "max_answer_tokens": 96, "max_step_tokens": 24}
QUESTION = "Tom has 3 apples. Then Tom buys 4 more apples. How many apples does Tom have now?"
CONCURRENT = 64
TINY = {"step_beam_size": 1, "num_rollouts": 2, "max_steps": 2}
"""The 64 concurrent requests' search (extra body fields), the smallest that still searches."""
ADD_TOOL = {"type": "function", "function": {
    "name": "add", "description": "Add two integers and return the sum.",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "required": ["a", "b"]}}}
ANSWER_SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}


@pytest.fixture(scope="module")
def server():
    """``mfs serve`` with the tiny search, a key (from MFS_SERVER_API_KEY) and a queue of CONCURRENT decodes.

    Its limits let one request ask for M = N = 8 and 12 steps, and its work budget admits such a
    request (the killed client's), so that the queue's count is what the overload test reaches."""
    env = {"MFS_SERVER_API_KEY": KEY, "MFS_MAX_ANSWER_TOKENS": str(SEARCH["max_answer_tokens"]),
           "MFS_MAX_STEP_TOKENS": str(SEARCH["max_step_tokens"])}
    args = ["--step-beam-size", "2", "--num-rollouts", "2", "--max-steps", "3", "--queue-size", str(CONCURRENT),
            "--max-messages", "8", "--max-body-bytes", "65536", "--limit-step-beam-size", "8",
            "--limit-num-rollouts", "8", "--limit-max-steps", "12", "--work-budget", "100000000"]
    with serve_process(args, env) as running:
        yield running
    assert KEY not in running.log_text()  # the key is never logged


@pytest.fixture(scope="module")
def engine():
    """An in-process engine with the server's settings (the reference decodes)."""
    return MFSEngine.from_settings(MFSSettings(device="cpu", **SEARCH))


@pytest.fixture
def client(server):
    import openai

    return openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=300)


def _chat_reference(engine: MFSEngine, question: str, seed: int, **settings):
    chosen = engine.settings.model_copy(update={"seed": seed, **settings})
    prompt = engine.render_messages([{"role": "user", "content": question}], chosen)
    return engine.decode_prompts([prompt], settings=chosen)[0]


def _metric(url: str, name: str) -> float:
    import httpx

    text = httpx.get(url + "/metrics", timeout=10).text
    match = re.search(rf"^{re.escape(name)} ([0-9.e+-]+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (Linux /proc; 0.0 elsewhere)."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- the openai client -------------------------------------------------------------------------
def test_openai_chat_answers_as_engine_decode_with_the_same_seed(client, engine) -> None:
    response = client.chat.completions.create(model="mfs-demo", messages=[{"role": "user", "content": QUESTION}],
                                              seed=5)
    reference = _chat_reference(engine, QUESTION, 5)
    choice = response.choices[0]
    print(f"\nopenai chat: {choice.message.content!r} usage={response.usage}")
    assert choice.message.content == reference.text and choice.finish_reason == "stop"
    assert response.usage.completion_tokens == reference.output_tokens
    assert 0 < response.usage.completion_tokens_details.reasoning_tokens < reference.output_tokens
    assert response.usage.prompt_tokens == engine.backend.count_tokens(
        engine.render_messages([{"role": "user", "content": QUESTION}]))
    assert choice.model_extra["mfs"]["answer"] == reference.answer == "7"
    assert "trace" not in choice.model_extra["mfs"]  # only on request
    # The search as reasoning, not streamed: a line per step, then the stop line (vLLM's reasoning fields)
    reasoning = choice.message.model_extra["reasoning"]
    assert choice.message.model_extra["reasoning_content"] == reasoning
    assert reasoning.startswith("[step 0:") and reasoning.count("[step ") == len(reference.steps)
    last = reasoning.rstrip("\n").rsplit("\n", 1)[-1]
    assert last.startswith(f"[stop: {reference.stop_reason} after ") and "; answer 7 (" in last and last.endswith(" s]")


def test_the_trace_and_per_request_settings_travel_in_extra_fields(client, engine) -> None:
    response = client.chat.completions.create(
        model="mfs-demo", messages=[{"role": "user", "content": QUESTION}], seed=2,
        extra_body={"return_trace": True, "step_beam_size": 1, "num_rollouts": 3})
    reference = _chat_reference(engine, QUESTION, 2, step_beam_size=1, num_rollouts=3)
    mfs = response.choices[0].model_extra["mfs"]
    assert response.choices[0].message.content == reference.text
    assert mfs["result"]["search_settings"]["step_beam_size"] == 1
    assert len(mfs["result"]["steps"][0]["candidates"]) == 3 and len(mfs["trace"]) == len(reference.steps)


def test_completions_endpoint_answers_as_engine_decode_and_n_seeds_each_choice(client, engine) -> None:
    response = client.completions.create(model="mfs-demo", prompt=QUESTION, seed=7, n=2)
    first = engine.decode([QUESTION], settings=engine.settings.model_copy(update={"seed": 7}))[0]
    second = engine.decode([QUESTION], settings=engine.settings.model_copy(update={"seed": 8}))[0]
    assert [c.text for c in response.choices] == [first.text, second.text]
    assert response.usage.completion_tokens == first.output_tokens + second.output_tokens


def test_openai_stream_sends_reasoning_while_searching_then_content_then_usage(client, engine) -> None:
    stream = client.chat.completions.create(model="mfs-demo", messages=[{"role": "user", "content": QUESTION}],
                                            seed=5, stream=True, stream_options={"include_usage": True})
    reasoning, content, kinds, usage = [], [], [], None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            extra = choice.delta.model_extra or {}
            if extra.get("reasoning"):
                assert extra["reasoning_content"] == extra["reasoning"]
                reasoning.append(extra["reasoning"])
                kinds.append("reasoning")
            if choice.delta.content:
                content.append(choice.delta.content)
                kinds.append("content")
    reference = _chat_reference(engine, QUESTION, 5)
    print("\nopenai stream, reasoning chunks:\n" + "".join(reasoning) + "content: " + repr("".join(content)))
    assert len(reasoning) == len(reference.steps) + 1  # one per step, then the stop line
    assert reasoning[0].startswith("[step 0:") and reasoning[-1].startswith("[stop:")
    assert kinds.index("content") > max(i for i, kind in enumerate(kinds) if kind == "reasoning")
    assert "".join(content) == reference.text
    assert usage is not None and usage.completion_tokens == reference.output_tokens
    # The same seed without streaming: the reply's reasoning is the streamed reasoning, joined (but the stop
    # line's wall seconds)
    reply = client.chat.completions.create(model="mfs-demo", messages=[{"role": "user", "content": QUESTION}], seed=5)

    def timeless(text: str) -> str:
        return re.sub(r"; [0-9.]+ s\]\n$", "]\n", text)

    assert timeless(reply.choices[0].message.model_extra["reasoning"]) == timeless("".join(reasoning))


@requires_tool_model
def test_openai_tool_call_is_voted_and_returned_as_tool_calls(client) -> None:
    response = client.chat.completions.create(
        model="mfs-demo", seed=1, tools=[ADD_TOOL], tool_choice="required",
        messages=[{"role": "user", "content": "Tom has 12 apples. He buys 30 more apples. How many apples now?"}])
    choice = response.choices[0]
    print(f"\nopenai tool call: {choice.message.tool_calls} votes={choice.model_extra['mfs']['votes']}")
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.function.name == "add" and set(json.loads(call.function.arguments)) == {"a", "b"}
    assert choice.model_extra["mfs"]["answer"].startswith("call [")


def test_openai_response_format_json_schema_returns_a_valid_object(client) -> None:
    response = client.chat.completions.create(
        model="mfs-demo", seed=1, messages=[{"role": "user", "content": QUESTION}],
        response_format={"type": "json_schema", "json_schema": {"name": "answer", "schema": ANSWER_SCHEMA}})
    content = response.choices[0].message.content
    print(f"\nopenai json_schema: {content!r}")
    obj = json.loads(content)
    assert set(obj) == {"answer"} and isinstance(obj["answer"], int)


# --- refusals ----------------------------------------------------------------------------------
def test_refusals_are_one_line_openai_errors(server, client) -> None:
    import httpx
    import openai

    url = server.url + "/v1/chat/completions"
    auth = {"Authorization": f"Bearer {KEY}"}
    user = [{"role": "user", "content": QUESTION}]

    def post(body, headers=auth, **kwargs):
        return httpx.post(url, content=body if isinstance(body, (bytes, str)) else json.dumps(body),
                          headers=headers, timeout=30, **kwargs)

    cases = [
        (post({"messages": user}, headers={}), 401, "missing or wrong API key"),
        (post({"messages": user}, headers={"Authorization": "Bearer wrong"}), 401, "missing or wrong API key"),
        (post(b'{"messages": [', ), 400, "the request body is not valid JSON"),
        (post({"messages": user, "step_beam": 2}), 400, "unknown field 'step_beam' (did you mean 'step_beam_size'?)"),
        (post({"messages": user, "step_beam_size": 0}), 400, "step_beam_size=0: Input should be greater than or equal to 1; allowed: 1 <= step_beam_size <= 1024"),
        (post({"messages": user, "temperature": 0}), 400, "allowed: 0.0 < temperature <= 10.0"),
        (post({"messages": user, "n": 9}), 400, "n=9 is more than this server allows; allowed: 1 <= n <= 8"),
        (post({"messages": user, "device": "cuda"}), 400, "cannot set ['device']"),
        (post({"messages": user, "method": "beam"}), 400, "beam"),
        (post({"messages": user, "logprobs": True}), 400, "logprobs=True is not supported"),
        (post({"messages": user * 9}), 400, "messages holds 9 messages; this server allows at most 8"),
        (post({"messages": user, "model": "gpt-4o"}), 404, "model 'gpt-4o' is not served here"),
        (post({"messages": [{"role": "user", "content": "x" * 70000}]}), 413, "larger than this server's limit of 65536 bytes"),
        (post({"messages": user, "max_tokens": 10, "max_completion_tokens": 20}), 400, "give one of max_tokens"),
        # JSON types are strict: no strings for numbers or booleans, no numbers for booleans
        (post({"messages": user, "n": "2"}), 400, "n='2': Input should be a valid integer"),
        (post({"messages": user, "seed": True}), 400, "seed=True: Input should be a valid integer"),
        (post({"messages": user, "stream": "yes"}), 400, "stream='yes': Input should be a valid boolean"),
        (post({"messages": user, "step_beam_size": "4"}), 400, "step_beam_size='4' has the wrong JSON type (str)"),
        (post({"messages": user, "share_foresight": 1}), 400, "share_foresight=1 has the wrong JSON type (int)"),
        (post(b'{"messages": ' + b"[" * 1200 + b"]" * 1200 + b"}"), 400, "nests JSON deeper than 32 levels"),
        (post({"messages": user, "x": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}), 400,
         "nests JSON deeper than 32 levels"),
        (httpx.get(server.url + "/v1/embeddings", headers=auth), 404, "no route '/v1/embeddings' here"),
        (httpx.get(url, headers=auth), 405, "GET /v1/chat/completions: Method Not Allowed"),
    ]
    for response, status, needle in cases:
        error = response.json()["error"]
        assert response.status_code == status and needle in error["message"], (status, error)
        assert "\n" not in error["message"]
    for scheme in ("bearer", "BEARER"):  # authentication schemes are case-insensitive
        assert httpx.get(server.url + "/v1/models", headers={"Authorization": f"{scheme} {KEY}"}).status_code == 200
    with pytest.raises(openai.BadRequestError, match="step_beam_size=0"):
        client.chat.completions.create(model="mfs-demo", messages=user, extra_body={"step_beam_size": 0})
    assert httpx.get(server.url + "/v1/models", timeout=10).status_code == 401
    assert httpx.get(server.url + "/v1/models", headers=auth, timeout=10).json()["data"][0]["id"] == "mfs-demo"
    assert httpx.get(server.url + "/health", timeout=10).json()["status"] == "ok"  # no key needed


# --- many clients, overload, disconnects -------------------------------------------------------
def test_64_concurrent_requests_equal_engine_decode_and_the_overflow_gets_429(server, engine) -> None:
    import httpx
    import openai

    questions = [f"Tom has {3 + i % 7} apples. Then Tom buys {2 + i % 5} more apples. How many apples does Tom have now?"
                 for i in range(CONCURRENT)]

    async def run():
        client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=1800)
        tasks = [asyncio.create_task(client.completions.create(model="mfs-demo", prompt=q, seed=i, extra_body=TINY))
                 for i, q in enumerate(questions)]
        async with httpx.AsyncClient(timeout=30) as http:
            deadline = time.monotonic() + 300
            while (await http.get(server.url + "/health")).json()["decodes_in_flight"] < CONCURRENT:
                assert time.monotonic() < deadline, "the 64 requests were not all admitted within 300 s"
                await asyncio.sleep(0.05)
            # The queue is full: more requests are refused at once, and bad ones fail alone.
            overflow = [await http.post(server.url + "/v1/completions", json={"prompt": QUESTION},
                                        headers={"Authorization": f"Bearer {KEY}"}) for _ in range(8)]
            bad = await http.post(server.url + "/v1/completions", content=b"{", headers={"Authorization": f"Bearer {KEY}"})
        responses = await asyncio.gather(*tasks)
        await client.close()
        return responses, overflow, bad

    rejected_before = _metric(server.url, 'mfs_rejected_total{reason="queue_full"}')
    cpu_before = _cpu_seconds(server.process.pid)
    start = time.perf_counter()
    responses, overflow, bad = asyncio.run(run())
    seconds = time.perf_counter() - start
    cpu = _cpu_seconds(server.process.pid) - cpu_before
    assert [r.status_code for r in overflow] == [429] * 8 and bad.status_code == 400
    assert all(int(r.headers["Retry-After"]) >= 1 for r in overflow)
    assert "(queue_size 64, work budget 100,000,000)" in overflow[0].json()["error"]["message"]
    futures = [engine.submit_prompts([engine.render(q)], settings=engine.settings.model_copy(update={"seed": i, **TINY}))[0]
               for i, q in enumerate(questions)]
    references = [future.result(timeout=1800) for future in futures]
    print(f"\n{CONCURRENT} concurrent requests served in {seconds:.1f} s ({cpu:.1f} s of the server's CPU); 8 more refused with 429 "
          f"(Retry-After {overflow[0].headers['Retry-After']} s)")
    assert [r.choices[0].text for r in responses] == [ref.text for ref in references]
    assert _metric(server.url, 'mfs_rejected_total{reason="queue_full"}') == rejected_before + 8


KILLED_CLIENT = """
import sys, httpx
body = {"messages": [{"role": "user", "content": sys.argv[2]}], "stream": True, "seed": 1, "temperature": 2.0,
        "max_tokens": 400, "step_beam_size": 8, "num_rollouts": 8, "max_steps": 12, "early_stopping": False}
with httpx.stream("POST", sys.argv[1] + "/v1/chat/completions", json=body, timeout=120,
                  headers={"Authorization": "Bearer " + sys.argv[3]}) as response:
    lines = response.iter_lines()  # kept referenced: a dropped iterator closes the stream when collected
    for line in lines:
        if line.startswith("data: "):  # the role chunk: the decode has started (its first step takes ~1.5 s)
            print("streaming", flush=True)
            break
    import time; time.sleep(600)
"""


def test_a_client_killed_mid_stream_frees_its_decode(server) -> None:
    import httpx

    abandoned = _metric(server.url, 'mfs_decodes_total{outcome="abandoned"}')
    client = subprocess.Popen([sys.executable, "-c", KILLED_CLIENT, server.url, QUESTION, KEY],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert client.stdout.readline().strip() == "streaming"  # the stream is open, the search running
        assert httpx.get(server.url + "/health", timeout=10).json()["decodes_in_flight"] == 1
        os.kill(client.pid, signal.SIGKILL)
        client.wait(timeout=30)
        start = time.monotonic()
        while httpx.get(server.url + "/health", timeout=10).json()["decodes_in_flight"]:
            assert time.monotonic() - start < 60, "the killed client's decode was not freed within 60 s"
            time.sleep(0.1)
        print(f"\nkilled client's decode freed {time.monotonic() - start:.2f} s after the kill")
    finally:
        stop_process(client)
        client.stdout.close()
    assert _metric(server.url, 'mfs_decodes_total{outcome="abandoned"}') == abandoned + 1  # dropped, not finished


# --- LangChain and LlamaIndex clients ------------------------------------------------------------
def test_langchain_chat_openai_invokes_streams_calls_tools_and_returns_json(server, engine) -> None:
    pytest.importorskip("langchain_openai", reason="langchain-openai is not installed (the test extra)")
    from langchain_openai import ChatOpenAI
    from pydantic import BaseModel

    chat = ChatOpenAI(base_url=server.url + "/v1", api_key=KEY, model="mfs-demo", seed=5, max_retries=0, timeout=300)
    message = chat.invoke(QUESTION)
    reference = _chat_reference(engine, QUESTION, 5)
    assert message.content == reference.text and message.usage_metadata["output_tokens"] == reference.output_tokens
    chunks = list(chat.stream(QUESTION))
    streamed = "".join(chunk.content for chunk in chunks if isinstance(chunk.content, str))
    print(f"\nChatOpenAI: {message.content!r}; stream of {len(chunks)} chunks: {streamed!r}")
    assert streamed == reference.text

    class Answer(BaseModel):
        answer: int

    structured = chat.with_structured_output(Answer, method="json_schema").invoke(QUESTION)
    print(f"ChatOpenAI json_schema: {structured!r}")
    assert isinstance(structured, Answer)
    if pytest.importorskip("tests.tool_model").demo_model_renders_tools():
        called = chat.bind_tools([ADD_TOOL], tool_choice="required").invoke("Tom has 12 apples. He buys 30 more. How many?")
        print(f"ChatOpenAI tool call: {called.tool_calls}")
        assert called.tool_calls and called.tool_calls[0]["name"] == "add"


def test_llamaindex_openai_like_chats_and_streams(server, engine) -> None:
    pytest.importorskip("llama_index.llms.openai_like", reason="llama-index-llms-openai-like is not installed")
    from llama_index.core.llms import ChatMessage
    from llama_index.llms.openai_like import OpenAILike

    llm = OpenAILike(model="mfs-demo", api_base=server.url + "/v1", api_key=KEY, is_chat_model=True,
                     context_window=2048, temperature=0.7, max_retries=0, timeout=300, additional_kwargs={"seed": 5})
    reference = _chat_reference(engine, QUESTION, 5)
    response = llm.chat([ChatMessage(role="user", content=QUESTION)])
    print(f"\nOpenAILike chat: {response.message.content!r}")
    assert response.message.content == reference.text
    from llama_index.core.base.llms.types import ThinkingBlock

    # Not streamed too: message.reasoning_content becomes a ThinkingBlock
    chat_thinking = [b.content for b in response.message.blocks if isinstance(b, ThinkingBlock)]
    assert chat_thinking and chat_thinking[0].startswith("[step 0:") and "[stop: " in chat_thinking[0]

    responses = list(llm.stream_chat([ChatMessage(role="user", content=QUESTION)]))
    streamed = "".join(r.delta or "" for r in responses)
    assert streamed == reference.text
    # LlamaIndex reads delta.reasoning_content into a ThinkingBlock: the search's reasoning as it streamed
    thinking = [b.content for b in responses[-1].message.blocks if isinstance(b, ThinkingBlock)]
    print(f"OpenAILike stream, ThinkingBlock:\n{thinking[0]}")
    assert thinking and thinking[0].startswith("[step 0:") and "[stop: " in thinking[0]


# --- shutdown ------------------------------------------------------------------------------------
def test_sigterm_lets_an_open_stream_finish_then_closes_the_backend() -> None:
    import httpx

    with serve_process(["--step-beam-size", "2", "--num-rollouts", "2", "--max-steps", "3", "--shutdown-timeout", "600"]) as running:
        body = {"messages": [{"role": "user", "content": QUESTION}], "stream": True, "seed": 3}
        lines = []
        with httpx.stream("POST", running.url + "/v1/chat/completions", json=body, timeout=120) as response:
            for line in response.iter_lines():
                if not line:  # the blank line after each event
                    continue
                lines.append(line)
                if len(lines) == 1:
                    os.kill(running.process.pid, signal.SIGTERM)  # while the search runs
        assert lines[-1] == "data: [DONE]" and any('"finish_reason":"stop"' in line for line in lines)
        # uvicorn re-raises the signal it handled once shut down, so the exit status is -SIGTERM
        assert running.process.wait(timeout=60) in (0, -signal.SIGTERM)
        log = running.log_text()
        assert "timeout graceful shutdown exceeded" not in log
        assert log.index("shut down; backend closed") < log.index("Finished server process")


LONG = {"step_beam_size": 8, "num_rollouts": 8, "max_steps": 12, "early_stopping": False, "temperature": 2.0,
        "max_tokens": 400}
"""A search that runs far longer than the shutdown timeout below on the demo model (about 2 s alone: hot
sampling and 400-token rollouts; without them the demo model's search ends in 0.6 s)."""


def test_sigterm_drains_refuses_new_requests_and_ends_every_open_one_with_an_error() -> None:
    """SIGTERM with two long decodes in flight (about 2 s each alone) and ``--shutdown-timeout 1``
    (at 0 the abandoned decodes now stop within a token step, the drain ends at once and the listener closes
    before the test's own new request; an open request that finishes within the timeout is the test above): new requests get 503 while the listener is still open, each open request ends with an OpenAI error
    (non-streamed: a 503 body; streamed: an error event and ``[DONE]``), and the process exits within a few
    seconds."""
    import threading

    import httpx

    args = ["--step-beam-size", "2", "--num-rollouts", "2", "--max-steps", "3", "--shutdown-timeout", "1",
            "--limit-step-beam-size", "8", "--limit-num-rollouts", "8", "--limit-max-steps", "12",
            "--work-budget", "100000000"]
    with serve_process(args) as running:
        url = running.url + "/v1/chat/completions"
        user = [{"role": "user", "content": QUESTION}]
        outcome: dict[str, object] = {}

        def plain() -> None:
            outcome["plain"] = httpx.post(url, json={"messages": user, "seed": 1, **LONG}, timeout=120)

        def streamed() -> None:
            with httpx.stream("POST", url, json={"messages": user, "seed": 2, "stream": True, **LONG},
                              timeout=120) as response:
                outcome["stream"] = [line for line in response.iter_lines() if line]

        threads = [threading.Thread(target=plain), threading.Thread(target=streamed)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 120
        while httpx.get(running.url + "/health", timeout=10).json()["decodes_in_flight"] < 2:
            assert time.monotonic() < deadline, "the two long requests were not admitted within 120 s"
            time.sleep(0.05)
        os.kill(running.process.pid, signal.SIGTERM)
        signalled = time.monotonic()
        refused = httpx.post(url, json={"messages": user}, timeout=10)  # while draining: the listener is open
        health = httpx.get(running.url + "/health", timeout=10)
        for thread in threads:
            thread.join(timeout=60)
        code = running.process.wait(timeout=60)
        exited = time.monotonic() - signalled
        print(f"\nSIGTERM with 2 long decodes in flight, --shutdown-timeout 1: exit after {exited:.1f} s; "
              f"new request {refused.status_code}, non-streamed {outcome['plain'].status_code}, stream's last "
              f"events {outcome['stream'][-2:]}")
    assert refused.status_code == 503 and refused.headers["Retry-After"] == "1"
    assert refused.json()["error"]["type"] == "service_unavailable"
    assert health.status_code == 503 and health.json()["status"] == "shutting_down"
    plain_reply = outcome["plain"]
    assert plain_reply.status_code == 503 and plain_reply.headers["content-type"] == "application/json"
    assert plain_reply.json()["error"]["message"] == ("the server shut down before this request's decodes finished "
                                                      "(shutdown_timeout=1.0 s); retry on another replica")
    events = outcome["stream"]
    last_error = json.loads(events[-2][len("data: "):])["error"]
    assert events[-1] == "data: [DONE]" and last_error["code"] == 503 and "shut down before" in last_error["message"]
    assert code in (0, -signal.SIGTERM) and exited < 10
