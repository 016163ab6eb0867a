"""The HTTP backend over a real socket, against a vLLM-shaped server on the demo model.

The server (``openai_server.CompletionServer``) samples with the transformers backend and
the request's seed, so HTTP and in-process runs with the same seed must give the same
tokens, texts and answers. Faults are scripted on the server; every test bounds its own
wall time so a hang fails instead of blocking the run.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from bounded import within
from openai_server import CompletionServer, Fault, completion_server, make_server, warm_backend  # noqa: F401
from typer.testing import CliRunner

from mfs_core.errors import ContextWindowError, MissingLogprobsError, ServerRequestError
from mfs_core.backends.openai import OpenAIBackend
from mfs_core.backends.transformers import TransformersBackend
from mfs_core.cli import app
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings
from mfs_core.types import GenerationRequest

pytestmark = pytest.mark.enable_socket

QUESTION = "Tom has 3 apples. He buys 4 more apples. How many apples does Tom have now?"


def client(server_or_urls: CompletionServer | list[str], **kwargs: Any) -> OpenAIBackend:
    urls = server_or_urls if isinstance(server_or_urls, list) else [server_or_urls.url]
    settings = MFSSettings(backend="openai", base_urls=urls, **{k: v for k, v in kwargs.items() if k in MFSSettings.model_fields})
    backend = OpenAIBackend.from_settings(settings)
    for key, value in kwargs.items():
        if key not in MFSSettings.model_fields:
            setattr(backend, key, value)
    return backend


def round_of_requests(backend: TransformersBackend) -> list[GenerationRequest]:
    """Step candidates and foresight rollouts as MFS asks for them."""
    prompt = backend.apply_chat_template([{"role": "user", "content": QUESTION}]) + "The reasoning steps are:\n\n"
    steps = [GenerationRequest(prompt=prompt, n=3, max_tokens=24, stop=("\n", "<end_of_reasoning>"), temperature=0.7, seed=s)
             for s in (1, 2)]
    rollouts = [GenerationRequest(prompt=prompt + "3 + 4 = 7\n", n=2, max_tokens=40, stop=("<end_of_reasoning>",),
                                  temperature=0.7, seed=s) for s in (3, 4)]
    return steps + rollouts


def test_generate_matches_the_transformers_backend(completion_server: CompletionServer, demo_backend: TransformersBackend) -> None:
    requests = round_of_requests(demo_backend)
    requests.append(GenerationRequest(prompt=requests[0].prompt, n=2, max_tokens=24, stop=("\n",), greedy=True))
    with client(completion_server) as http:
        remote = within(300, lambda: http.generate(requests))
    local = demo_backend.generate(requests)
    for request, here, there in zip(requests, local, remote):
        assert len(there) == request.n
        for a, b in zip(here, there):
            assert (b.text, b.token_ids, b.finish_reason, b.stop_reason, b.prompt_tokens) == (
                a.text, a.token_ids, a.finish_reason, a.stop_reason, a.prompt_tokens)
            # Per-token log-probs are recomputed by the server in one forward pass: equal to float32 rounding.
            assert b.logprob_sum == pytest.approx(a.logprob_sum, abs=1e-4)
    sent = completion_server.posts
    assert len(sent) == len(requests)
    by_seed = {body["seed"]: body for body in sent}
    step = by_seed[1]
    assert (step["n"], step["max_tokens"], step["temperature"], step["top_p"], step["stop"], step["logprobs"]) == (
        3, 24, 0.7, 1.0, ["\n", "<end_of_reasoning>"], 1)
    assert step["add_special_tokens"] is False  # the chat template wrote the BOS
    assert step["return_token_ids"] is True
    greedy = [body for body in sent if body["temperature"] == 0.0]
    assert len(greedy) == 1 and greedy[0]["n"] == 1  # sent once, repeated n = 2 times on the way back


def test_transformers_samples_do_not_depend_on_the_batch(demo_backend: TransformersBackend) -> None:
    """What makes HTTP (one request per call) equal in-process (one call per round)."""
    requests = [dataclasses.replace(r, max_tokens=16, temperature=1.0) for r in round_of_requests(demo_backend)]
    batched = demo_backend.generate(requests)
    alone = [demo_backend.generate([request])[0] for request in requests]
    # Chunks of 3 rows: a request (n = 3, 3, 2, 2) is never split across chunks.
    small_chunks = TransformersBackend(demo_backend.model, demo_backend.tokenizer, "mfs-demo", batch_size=3)
    chunked = small_chunks.generate(requests)
    for outputs in (alone, chunked):
        assert [[c.token_ids for c in r] for r in outputs] == [[c.token_ids for c in r] for r in batched]


QUESTIONS = [QUESTION, "Sam has 9 pens. He gives away 5 pens. How many pens does Sam have now?"]


@pytest.mark.parametrize("seed", [3, 9])
def test_mfs_through_http_equals_in_process(
    completion_server: CompletionServer, demo_backend: TransformersBackend, seed: int
) -> None:
    """Two questions decoded together: one batched call per round in-process, one POST per request over HTTP."""
    settings = MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=2, max_step_tokens=16, max_answer_tokens=48,
                           seed=seed)
    local = MFSEngine(demo_backend, settings).decode(QUESTIONS)
    http_settings = MFSSettings(**{**settings.model_dump(), "backend": "openai", "base_urls": [completion_server.url]})
    engine = MFSEngine.from_settings(http_settings)
    assert isinstance(engine.backend, OpenAIBackend)
    remote = within(600, lambda: engine.decode(QUESTIONS))
    for here, there in zip(local, remote):
        assert there.answer == here.answer
        assert there.text == here.text
        assert there.completions == here.completions
        assert there.completion_answers == here.completion_answers
        assert there.stop_reason == here.stop_reason
        assert (there.prompt_tokens, there.output_tokens, there.flops) == (here.prompt_tokens, here.output_tokens, here.flops)
        assert there.flops > 0
        assert [[c.text for c in s.candidates] for s in there.steps] == [[c.text for c in s.candidates] for s in here.steps]
        assert [[c.pruned for c in s.candidates] for s in there.steps] == [[c.pruned for c in s.candidates] for s in here.steps]
        assert there.completion_qualities == pytest.approx(here.completion_qualities, abs=1e-5)
    assert engine.stats.requests == len(completion_server.posts)


async def test_async_generate_matches_sync(completion_server: CompletionServer, demo_backend: TransformersBackend) -> None:
    requests = round_of_requests(demo_backend)[:2]
    backend = client(completion_server)
    try:
        remote = await backend.agenerate(requests)
    finally:
        await backend.aclose()
    local = demo_backend.generate(requests)
    assert [[c.token_ids for c in r] for r in remote] == [[c.token_ids for c in r] for r in local]


def test_requests_are_spread_over_replicas(make_server: Callable[..., CompletionServer], demo_backend: TransformersBackend) -> None:
    first, second = make_server(), make_server()
    requests = round_of_requests(demo_backend)
    with client([first.url, second.url]) as http:
        remote = within(300, lambda: http.generate(requests))
    assert len(first.posts) == len(second.posts) == 2
    assert {b["seed"] for b in first.posts} | {b["seed"] for b in second.posts} == {1, 2, 3, 4}
    local = demo_backend.generate(requests)
    assert [[c.token_ids for c in r] for r in remote] == [[c.token_ids for c in r] for r in local]


def test_context_window_comes_from_v1_models(make_server: Callable[..., CompletionServer], demo_backend: TransformersBackend) -> None:
    server = make_server(max_model_len=300)
    with client(server) as http:
        assert within(300, lambda: http.context_window) == 300
        prompt = "x " * 140  # 281 tokens with the BOS
        request = GenerationRequest(prompt=prompt, max_tokens=256)
        within(300, lambda: http.generate([request]))
        assert server.posts[-1]["max_tokens"] == 300 - len(demo_backend.encode_prompt(prompt)) < 256
        with pytest.raises(ContextWindowError, match="does not fit the context window of 300"):
            http.generate([GenerationRequest(prompt="x " * 150)])


def test_plain_openai_server_shape(make_server: Callable[..., CompletionServer], demo_backend: TransformersBackend) -> None:
    server = make_server(vllm_fields=False)
    requests = round_of_requests(demo_backend)
    with client(server) as http:
        remote = within(300, lambda: http.generate(requests))
    local = demo_backend.generate(requests)
    for here, there in zip(local, remote):
        for a, b in zip(here, there):
            assert (b.text, b.num_tokens, b.finish_reason, b.stop_reason) == (a.text, a.num_tokens, a.finish_reason, a.stop_reason)
            assert set(b.token_ids) == {-1}


# --- faults ------------------------------------------------------------------------------------
FAST = {"request_timeout": 60.0, "max_retries": 2, "backoff": 0.01}  # generous: only the timeout tests wait on it
ONE_REQUEST = [GenerationRequest(prompt="Tom has 3 apples.", n=2, max_tokens=8, seed=5)]


def test_500_then_success(completion_server: CompletionServer, demo_backend: TransformersBackend) -> None:
    completion_server.inject(Fault(status=500))
    with client(completion_server, **FAST) as http:
        result = within(300, lambda: http.generate(ONE_REQUEST))
    assert len(completion_server.posts) == 2
    assert [c.token_ids for c in result[0]] == [c.token_ids for c in demo_backend.generate(ONE_REQUEST)[0]]


def test_429_waits_for_retry_after(completion_server: CompletionServer) -> None:
    completion_server.inject(Fault(status=429, retry_after="0.4", message="rate limited"))
    with client(completion_server, **FAST) as http:
        result = within(300, lambda: http.generate(ONE_REQUEST))
    assert len(result[0]) == 2
    (first, _), (second, _) = completion_server.received
    assert second - first >= 0.4  # Retry-After honoured, not the 0.01 s backoff


def test_timeout_is_retried(completion_server: CompletionServer) -> None:
    completion_server.inject(Fault(delay=120.0))  # stop() ends the wait after the test
    start = time.monotonic()
    with client(completion_server, **{**FAST, "request_timeout": 3.0, "max_retries": 3}) as http:
        result = within(300, lambda: http.generate(ONE_REQUEST))
    assert len(result[0]) == 2
    assert time.monotonic() - start < 120.0  # gave up on the slow answer after request_timeout
    assert len(completion_server.posts) >= 2  # 2 unless the machine is too busy to answer within 3 s


def test_timeouts_end_in_a_clear_error(completion_server: CompletionServer) -> None:
    completion_server.inject(*[Fault(delay=60.0)] * 3)
    start = time.monotonic()
    with client(completion_server, **{**FAST, "request_timeout": 0.3}) as http, pytest.raises(
        ServerRequestError, match=r"failed 3 times; last: no answer within 0.3 s"
    ):
        within(300, lambda: http.generate(ONE_REQUEST))
    assert time.monotonic() - start < 30.0  # 3 attempts of 0.3 s: never waited for a delayed answer


def test_malformed_json_is_retried(completion_server: CompletionServer) -> None:
    completion_server.inject(Fault(malformed=True))
    with client(completion_server, **FAST) as http:
        assert len(within(300, lambda: http.generate(ONE_REQUEST))[0]) == 2
    assert len(completion_server.posts) == 2


def test_malformed_json_ends_in_a_clear_error(completion_server: CompletionServer) -> None:
    completion_server.inject(*[Fault(malformed=True)] * 3)
    with client(completion_server, **FAST) as http, pytest.raises(ServerRequestError, match="failed 3 times; last: malformed JSON"):
        within(300, lambda: http.generate(ONE_REQUEST))


def test_server_errors_end_in_a_clear_error(completion_server: CompletionServer) -> None:
    completion_server.inject(*[Fault(status=503, message="overloaded")] * 3)
    with client(completion_server, **FAST) as http, pytest.raises(ServerRequestError, match="failed 3 times; last: HTTP 503: overloaded"):
        within(300, lambda: http.generate(ONE_REQUEST))
    assert len(completion_server.posts) == 3


def test_missing_logprobs_is_not_retried(completion_server: CompletionServer) -> None:
    completion_server.inject(Fault(no_logprobs=True))
    with client(completion_server, **FAST) as http, pytest.raises(MissingLogprobsError, match="cannot run without them"):
        within(300, lambda: http.generate(ONE_REQUEST))
    assert len(completion_server.posts) == 1


def test_dropped_connection_is_retried(completion_server: CompletionServer) -> None:
    completion_server.inject(Fault(drop=True))
    with client(completion_server, **FAST) as http:
        assert len(within(300, lambda: http.generate(ONE_REQUEST))[0]) == 2
    assert len(completion_server.posts) == 2


def test_a_dead_replica_fails_over(make_server: Callable[..., CompletionServer]) -> None:
    live = make_server()  # bound first, so the dead server's port cannot be handed to it
    dead = make_server()
    dead_url = dead.url
    dead.stop()  # nothing listens on its port any more
    requests = [GenerationRequest(prompt="Tom has 3 apples.", n=1, max_tokens=4, seed=s) for s in range(4)]
    with client([dead_url, live.url], **FAST) as http:
        results = within(300, lambda: http.generate(requests))
    assert [len(r) for r in results] == [1, 1, 1, 1]
    assert len(live.posts) == 4


def test_client_errors_are_not_retried(completion_server: CompletionServer) -> None:
    with client(completion_server, **FAST) as http:
        http.model_name = "no-such-model"
        with pytest.raises(ServerRequestError, match="HTTP 404: The model `no-such-model` does not exist"):
            within(300, lambda: http.generate(ONE_REQUEST))
    assert len(completion_server.posts) == 1


def test_server_context_error_is_a_context_window_error(make_server: Callable[..., CompletionServer]) -> None:
    server = make_server(max_model_len=64)
    with client(server, max_model_len=4096, **FAST) as http, pytest.raises(ContextWindowError, match="maximum context length is 64"):
        within(300, lambda: http.generate([GenerationRequest(prompt="Tom has 3 apples.", max_tokens=100)]))


def test_cli_ask_through_the_openai_backend(completion_server: CompletionServer, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"MFS_MAX_STEPS": "1", "MFS_MAX_STEP_TOKENS": "8", "MFS_MAX_ANSWER_TOKENS": "16"}.items():
        monkeypatch.setenv(name, value)
    args = ["ask", QUESTION, "--backend", "openai", "--base-url", completion_server.url, "--step-beam-size", "2",
            "--num-rollouts", "2", "--seed", "1", "--json"]
    result = within(600, lambda: CliRunner().invoke(app, args))
    assert result.exit_code == 0, result.output
    assert '"method": "mfs"' in result.output
    assert completion_server.posts and all(b["model"] == "mfs-demo" for b in completion_server.posts)


def test_top_logprobs_over_http_match_the_transformers_backend(completion_server: CompletionServer,
                                                              warm_backend: TransformersBackend) -> None:
    # Same seed, same tokens; the server's top-k are teacher-forced, the backend's from its sampling pass.
    request = GenerationRequest(prompt=QUESTION, n=2, max_tokens=10, temperature=0.7, seed=9, top_logprobs=4)
    remote = within(120, lambda: client(completion_server).generate([request])[0])
    local = warm_backend.generate([request])[0]
    post = completion_server.posts[-1]
    assert (post["logprobs"], post["return_tokens_as_token_ids"]) == (4, True)
    for http, here in zip(remote, local):
        assert http.token_ids == here.token_ids
        assert len(http.token_confidences) == http.num_tokens > 0
        assert http.token_confidences == pytest.approx(here.token_confidences, abs=1e-4)


LONG_QUESTION = ("There are 5 rows of tickets with 5 in each row. Nina triples the tickets. After that, Nina removes "
                 "30 tickets. Later, 12 more tickets arrive. How many tickets does Nina have now?")


def test_deepconf_and_esc_over_http(completion_server: CompletionServer, warm_backend: TransformersBackend) -> None:
    # Both methods end to end over the socket with the same seeds as in-process: same answers, tokens
    # and steps. On this question (seed 0) DeepConf's warm-up reaches no consensus: a round of chunks runs.
    settings = {"deepconf_warmup": 2, "deepconf_max_traces": 4, "deepconf_chunk_tokens": 16, "esc_window": 2,
                "esc_max_samples": 4, "max_answer_tokens": 160}
    remote = MFSEngine(client(completion_server), MFSSettings(**settings))
    local = MFSEngine(warm_backend, MFSSettings(**settings))
    steps = {}
    for method, question in (("deepconf", LONG_QUESTION), ("esc", QUESTION)):
        (over_http,) = within(600, lambda: remote.decode([question], method=method))
        (here,) = local.decode([question], method=method)
        assert (over_http.answer, over_http.output_tokens, len(over_http.steps), over_http.stop_reason) == (
            here.answer, here.output_tokens, len(here.steps), here.stop_reason), method
        assert over_http.completion_weights == pytest.approx(here.completion_weights, abs=1e-3)
        steps[method] = len(here.steps)
    assert steps["deepconf"] >= 2  # the warm-up and at least one round of chunks


def test_a_cancelled_request_is_cut_off_in_flight(completion_server: CompletionServer, demo_backend: TransformersBackend) -> None:
    """The POST of an abandoned decode's request is cancelled within a poll, the
    connection closed (what makes ``vllm serve`` abort it), while the round's other POSTs run on."""
    completion_server.inject(Fault(delay=60.0))  # the first POST is held until its client leaves
    prompt = demo_backend.apply_chat_template([{"role": "user", "content": QUESTION}])
    cancel = threading.Event()
    held = GenerationRequest(prompt=prompt, n=2, max_tokens=16, temperature=0.7, seed=1, cancel=cancel)
    with client(completion_server) as http:
        call = threading.Thread(target=lambda: outcome.append(http.generate([held])))
        outcome: list[Any] = []
        call.start()
        deadline = time.monotonic() + 60
        while not completion_server.received and time.monotonic() < deadline:
            time.sleep(0.01)
        assert completion_server.received, "the POST never arrived"
        cancelled_at = time.monotonic()
        cancel.set()
        call.join(30)
        returned_after = time.monotonic() - cancelled_at
        assert [(c.finish_reason, c.token_ids) for c in outcome[0][0]] == [("abort", ())] * 2
        assert returned_after < 2.0  # 20 ms polls; 60 s had the POST waited for its answer
        deadline = time.monotonic() + 5
        while not completion_server.disconnects and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(completion_server.disconnects) == 1  # the server saw the client leave
        assert completion_server.disconnects[0] - cancelled_at < 2.0
        # a request already cancelled is not sent; the round's other request is answered as alone
        other = GenerationRequest(prompt=prompt, n=2, max_tokens=16, temperature=0.7, seed=2)
        posts = len(completion_server.posts)
        gone, kept = within(300, lambda: http.generate([held, other]))
        assert len(completion_server.posts) == posts + 1
        assert [c.finish_reason for c in gone] == ["abort", "abort"]
        assert http.cancelled_posts == 2
    assert [c.token_ids for c in kept] == [c.token_ids for c in demo_backend.generate([other])[0]]


def test_abandoning_a_decode_over_http_closes_its_posts(completion_server: CompletionServer) -> None:
    """The lockstep engine over the HTTP backend: a decode abandoned while its round's POSTs are held
    ends at once (CancelledError), every held POST's connection is closed, and no round follows."""
    completion_server.inject(*[Fault(delay=60.0)] * 64)  # every POST of the first round is held
    settings = MFSSettings(backend="openai", base_urls=[completion_server.url], step_beam_size=2, num_rollouts=2,
                           max_steps=4)
    with MFSEngine.from_settings(settings) as engine:
        future = engine.submit_prompts([engine.render(QUESTION)])[0]
        deadline = time.monotonic() + 60
        while not completion_server.received and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)  # the round's other POSTs arrive
        held = len(completion_server.posts)
        abandoned_at = time.monotonic()
        future.abandon("test")
        with pytest.raises(BaseException) as raised:
            future.result(timeout=30)
        assert type(raised.value).__name__ == "CancelledError"
        assert time.monotonic() - abandoned_at < 2.0
        deadline = time.monotonic() + 5
        while len(completion_server.disconnects) < held and time.monotonic() < deadline:
            time.sleep(0.01)
        assert held >= 1 and len(completion_server.disconnects) == held
        time.sleep(0.3)
        assert len(completion_server.posts) == held  # no round after the abandon
