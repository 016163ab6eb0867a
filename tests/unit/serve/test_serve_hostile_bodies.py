"""Hostile and careless request bodies: each gets a 400 (or 413) with a one-line message in
OpenAI's error shape, never a 500, and a well-formed decode running beside them is unaffected."""

from __future__ import annotations

import json
import threading
import time

import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient  # noqa: E402

from mfs_core import MFSEngine, MFSSettings  # noqa: E402
from mfs_core.serve.app import create_app  # noqa: E402
from mfs_core.serve.config import ServerSettings  # noqa: E402
from tests.scripted import ScriptedBackend, continuation  # noqa: E402

USER = [{"role": "user", "content": "What is 3 + 4?"}]


def _chat(**fields: object) -> bytes:
    return json.dumps({"messages": USER, **fields}).encode()


def _tool(**function: object) -> list[dict]:
    return [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}, **function}}]


# (name, raw body, expected status, a piece the message must hold)
BODIES: list[tuple[str, bytes, int, str]] = [
    # not JSON, or JSON Python reads but JSON forbids
    ("truncated", b'{"messages": [', 400, "not valid JSON"),
    ("empty", b"", 400, "not valid JSON"),
    ("garbage", b"nul", 400, "not valid JSON"),
    ("not utf-8", b'{"messages": "\xff\xfe"}', 400, "not valid JSON"),
    ("trailing comma", b'{"messages": [],}', 400, "not valid JSON"),
    ("NaN", _chat()[:-1] + b', "temperature": NaN}', 400, "NaN"),
    ("Infinity", _chat()[:-1] + b', "temperature": Infinity}', 400, "Infinity"),
    ("float overflow", _chat()[:-1] + b', "temperature": 1e400}', 400, "out of range"),
    ("5000-digit integer", _chat()[:-1] + b', "seed": ' + b"9" * 5000 + b"}", 400, "not valid JSON"),
    ("duplicate key", b'{"messages": [], "n": 1, "n": 2}', 400, "twice"),
    ("duplicate nested key", b'{"messages": [{"role": "user", "role": "system", "content": "x"}]}', 400, "twice"),
    ("deep nesting", b'{"messages": ' + b"[" * 1200 + b"]" * 1200 + b"}", 400, "deeper than 32"),
    ("deep objects", b'{"metadata": ' + b'{"a": ' * 40 + b"1" + b"}" * 40 + b"}", 400, "deeper than 32"),
    # wrong shapes at the top
    ("a list", b"[]", 400, ""),
    ("a string", b'"hello"', 400, ""),
    ("a number", b"1", 400, ""),
    ("null", b"null", 400, ""),
    ("no messages", b"{}", 400, "messages"),
    ("empty messages", _chat()[:0] + b'{"messages": []}', 400, "messages"),
    ("messages null", b'{"messages": null}', 400, "messages"),
    ("messages a string", b'{"messages": "hi"}', 400, "messages"),
    ("a message a number", b'{"messages": [1]}', 400, "messages"),
    ("a message without role", b'{"messages": [{"content": "x"}]}', 400, "role"),
    ("an unknown role", b'{"messages": [{"role": "wizard", "content": "x"}]}', 400, "role"),
    ("content a number", b'{"messages": [{"role": "user", "content": 5}]}', 400, "content"),
    ("an image part", json.dumps({"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "http://x"}}]}]}).encode(), 400, "text only"),
    # wrong JSON types for OpenAI's fields (strict: no coercion)
    ("n a string", _chat(n="2"), 400, "n"),
    ("n a float", _chat(n=2.5), 400, "n"),
    ("n a boolean", _chat(n=True), 400, "n"),
    ("n zero", _chat(n=0), 400, "n"),
    ("n negative", _chat(n=-1), 400, "n"),
    ("n huge", _chat(n=10**12), 400, "n"),
    ("seed a boolean", _chat(seed=True), 400, "seed"),
    ("seed a string", _chat(seed="1"), 400, "seed"),
    ("seed past 64 bits", _chat(seed=2**64), 400, "seed"),
    ("temperature a string", _chat(temperature="hot"), 400, "temperature"),
    ("temperature negative", _chat(temperature=-1), 400, "temperature"),
    ("top_p over 1", _chat(top_p=2), 400, "top_p"),
    ("max_tokens zero", _chat(max_tokens=0), 400, "max_tokens"),
    ("max_tokens a string", _chat(max_tokens="10"), 400, "max_tokens"),
    ("max_tokens huge", _chat(max_tokens=10**30), 400, "max_tokens"),
    ("two token limits", _chat(max_tokens=10, max_completion_tokens=20), 400, "give one of"),
    ("stream a string", _chat(stream="yes"), 400, "stream"),
    ("stream a number", _chat(stream=1), 400, "stream"),
    ("stop a number", _chat(stop=5), 400, "stop"),
    ("stop numbers", _chat(stop=[1, 2]), 400, "stop"),
    ("stream_options a list", _chat(stream=True, stream_options=[]), 400, "stream_options"),
    ("another model", _chat(model="gpt-4"), 404, "not served here"),
    # the search's fields
    ("step_beam_size zero", _chat(step_beam_size=0), 400, "step_beam_size"),
    ("step_beam_size a string", _chat(step_beam_size="4"), 400, "step_beam_size"),
    ("step_beam_size over the limit", _chat(step_beam_size=1024), 400, "--limit-step-beam-size"),
    ("num_rollouts over the limit", _chat(num_rollouts=5000), 400, "num_rollouts"),
    ("max_steps over the limit", _chat(max_steps=200), 400, "--limit-max-steps"),
    ("foresight_rollouts zero", _chat(foresight_rollouts=0), 400, "foresight_rollouts"),
    ("an unknown method", _chat(method="beam-search"), 400, "unknown decoding method"),
    ("method a number", _chat(method=5), 400, "method"),
    ("return_trace a string", _chat(return_trace="yes"), 400, "return_trace"),
    ("a misspelled field", _chat(step_beam=4), 400, "step_beam_size"),
    ("a backend field", _chat(backend="vllm"), 400, "fixed when mfs serve starts"),
    ("a device field", _chat(device="cuda"), 400, "fixed when mfs serve starts"),
    ("logprobs asked for", _chat(logprobs=True), 400, "not supported"),
    ("best_of asked for", _chat(best_of=3), 400, "not supported"),
    # tools and structured output
    ("tools a string", _chat(tools="add"), 400, "tools"),
    ("a tool without a function", _chat(tools=[{"type": "function"}]), 400, "tool 0 must be"),
    ("a tool name a number", _chat(tools=_tool(name=5)), 400, "tool 0 needs a non-empty function name"),
    ("tool_choice unknown", _chat(tools=_tool(), tool_choice="maybe"), 400, "tool_choice"),
    ("tool_choice a missing tool", _chat(tools=_tool(), tool_choice={"type": "function", "function": {"name": "mul"}}),
     400, "mul"),
    ("response_format unknown", _chat(response_format={"type": "xml"}), 400, "response_format"),
    ("a schema xgrammar refuses", _chat(response_format={"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "string", "pattern": "(("}}}), 400, "parenthesis"),
]


@pytest.fixture(scope="module")
def client():
    class Slow(ScriptedBackend):
        def generate(self, requests):  # noqa: ANN001, ANN201 - a round takes a while, so the good decode is in flight
            time.sleep(0.05)
            return super().generate(requests)

    backend = Slow(lambda r: [continuation("The answer is: \\boxed{7}.", finish_reason="eos")] * r.n)
    engine = MFSEngine(backend, MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=2))
    with TestClient(create_app(engine, ServerSettings(max_body_bytes=65536)), raise_server_exceptions=False) as test:
        yield test


def test_the_table_is_long_enough() -> None:
    assert len(BODIES) >= 60 and len({name for name, *_ in BODIES}) == len(BODIES)  # docs/serve.md: "over 60"


def test_every_hostile_body_gets_a_one_line_openai_error_and_a_good_decode_beside_them_is_unaffected(client) -> None:
    good: dict[str, object] = {}
    beside = threading.Thread(target=lambda: good.update(reply=client.post(
        "/v1/chat/completions", json={"messages": USER, "seed": 3, "max_steps": 2})))
    beside.start()
    seen = {}
    for name, raw, status, piece in BODIES:
        response = client.post("/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
        seen[name] = response.status_code
        assert response.status_code == status, (name, response.status_code, response.text[:300])
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"} and error["code"] == status, name
        message = error["message"]
        assert "\n" not in message and len(message) < 600, (name, message)
        assert piece in message or piece == (error["param"] or ""), (name, message)
        assert ".cc:" not in message and "/project/" not in message and "Traceback" not in message, (name, message)
    huge = client.post("/v1/chat/completions", content=b'{"messages": "' + b"x" * 70_000 + b'"}')
    assert huge.status_code == 413 and "max_body_bytes" in huge.json()["error"]["message"]
    beside.join(timeout=60)
    reply = good["reply"]
    assert reply.status_code == 200 and "\\boxed{7}" in reply.json()["choices"][0]["message"]["content"]
    assert list(seen.values()).count(500) == 0
    metrics = client.get("/metrics").text
    assert 'mfs_requests_total{endpoint="chat",status="500"}' not in metrics
