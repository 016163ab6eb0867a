"""The server's answers in process (Starlette's TestClient, a scripted engine): the key's scheme, OpenAI-shaped
404/405/500 errors, the JSON depth limit, and the search's reasoning on a reply that is not streamed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("starlette")

from pydantic import SecretStr  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from mfs_core import MFSEngine, MFSSettings  # noqa: E402
from mfs_core.serve.app import create_app  # noqa: E402
from mfs_core.serve.config import ServerSettings  # noqa: E402
from tests.scripted import ScriptedBackend, continuation  # noqa: E402

AUTH = {"Authorization": "Bearer k"}
USER = [{"role": "user", "content": "What is 3 + 4?"}]


@pytest.fixture
def client() -> Iterator[TestClient]:
    backend = ScriptedBackend(lambda r: [continuation("The answer is: \\boxed{7}.", finish_reason="eos")] * r.n)
    engine = MFSEngine(backend, MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=2))
    with TestClient(create_app(engine, ServerSettings(api_key=SecretStr("k"))), raise_server_exceptions=False) as test:
        yield test


def test_the_bearer_scheme_is_case_insensitive_and_the_key_is_still_checked(client: TestClient) -> None:
    statuses = {h: client.get("/v1/models", headers={"Authorization": h}).status_code
                for h in ("Bearer k", "bearer k", "BEARER  k", "Bearer wrong", "Basic k", "Bearerk", "")}
    assert statuses == {"Bearer k": 200, "bearer k": 200, "BEARER  k": 200, "Bearer wrong": 401, "Basic k": 401,
                        "Bearerk": 401, "": 401}


def test_unknown_routes_wrong_methods_and_failures_answer_in_openais_error_shape(client: TestClient, monkeypatch) -> None:
    missing = client.post("/v1/embeddings", json={}, headers=AUTH)
    assert missing.status_code == 404 and missing.headers["content-type"] == "application/json"
    assert missing.json()["error"]["type"] == "not_found_error" and "'/v1/embeddings'" in missing.json()["error"]["message"]
    wrong = client.get("/v1/chat/completions", headers=AUTH)
    assert wrong.status_code == 405 and wrong.json()["error"]["message"] == "GET /v1/chat/completions: Method Not Allowed"
    server = client.app.state.mfs

    def broken(call):
        raise RuntimeError("/home/build/src/json_schema_converter.cc:42 internal")

    monkeypatch.setattr(server, "_prepare", broken)
    failed = client.post("/v1/chat/completions", json={"messages": USER}, headers=AUTH)
    assert failed.status_code == 500
    assert failed.json() == {"error": {"message": "the server failed: RuntimeError", "type": "server_error",
                                       "param": None, "code": 500}}  # no message text, no source path


def test_a_body_nested_past_the_limit_is_a_400_not_a_crash(client: TestClient) -> None:
    deep = b'{"messages": ' + b"[" * 1200 + b"]" * 1200 + b"}"
    response = client.post("/v1/chat/completions", content=deep, headers={**AUTH, "content-type": "application/json"})
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "the request body nests JSON deeper than 32 levels"


def test_a_reply_that_is_not_streamed_carries_the_searchs_reasoning(client: TestClient) -> None:
    chat = client.post("/v1/chat/completions", json={"messages": USER}, headers=AUTH).json()
    message = chat["choices"][0]["message"]
    assert message["content"] == "The answer is: \\boxed{7}."
    assert message["reasoning"] == message["reasoning_content"]
    lines = message["reasoning"].splitlines()
    assert lines[0] == "[step 0: 4 sampled, 4 finished, 0 pruned, 0 rolled out, 0 beams; 16 tokens]"
    assert lines[1].startswith("[stop: all_finished after 1 step; answer 7 (2 of 2 paths, 100%); 16 tokens; ")
    completion = client.post("/v1/completions", json={"prompt": "What is 3 + 4?", "n": 2}, headers=AUTH).json()
    assert [c["reasoning"].splitlines()[0] for c in completion["choices"]] == [lines[0], lines[0]]


def test_the_access_log_drops_query_strings() -> None:
    import logging

    from mfs_core.serve import QueryStringFilter

    record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
                               ("127.0.0.1:5000", "GET", "/v1/models?api_key=sk-secret&x=1", "1.1", 200), None)
    assert QueryStringFilter().filter(record)
    assert record.getMessage() == '127.0.0.1:5000 - "GET /v1/models?<query dropped> HTTP/1.1" 200'
    plain = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
                              ("127.0.0.1:5000", "GET", "/health", "1.1", 200), None)
    assert QueryStringFilter().filter(plain) and plain.getMessage() == '127.0.0.1:5000 - "GET /health HTTP/1.1" 200'


def test_each_request_is_one_party_of_the_lockstep_fair_share(monkeypatch) -> None:
    """``mfs serve`` switches the lockstep scheduler's fair share on (``--fair-share-tokens``) and submits a
    request's ``n`` decodes as one party (``share_group``), two requests as two."""
    backend = ScriptedBackend(lambda r: [continuation("The answer is: \\boxed{7}.", finish_reason="eos")] * r.n)
    engine = MFSEngine(backend, MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=2))
    submitted = []
    original = engine.scheduler.submit

    def submit(decoders, listeners=None, timeout=None):
        futures = original(decoders, listeners, timeout)
        submitted.append(len(futures))
        return futures

    monkeypatch.setattr(engine.scheduler, "submit", submit)
    groups = []
    original_enqueue = engine.scheduler._enqueue
    monkeypatch.setattr(engine.scheduler, "_enqueue", lambda jobs: (groups.extend(j.group for j in jobs),
                                                                    original_enqueue(jobs)))
    config = ServerSettings(api_key=SecretStr("k"), fair_share_tokens=1500)
    with TestClient(create_app(engine, config), raise_server_exceptions=False) as client:
        assert engine.scheduler.fair_share_tokens == 1500
        for _ in range(2):
            reply = client.post("/v1/chat/completions", json={"messages": USER, "n": 3}, headers=AUTH)
            assert reply.status_code == 200 and len(reply.json()["choices"]) == 3
    assert submitted == [1] * 6  # each choice its own submission ...
    assert len(set(groups[:3])) == 1 and len(set(groups[3:])) == 1 and groups[0] != groups[3]  # ... one party per request
