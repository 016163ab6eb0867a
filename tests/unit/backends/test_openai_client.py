"""The OpenAI-compatible backend without a server: payloads, response mapping, settings.

Response bodies below copy the JSON shape of vLLM 0.33.0's ``CompletionResponse``
(``vllm/entrypoints/openai/completion/protocol.py``). Socket tests are in
``tests/integration/test_openai_backend.py``.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from mfs_core.backends import Backend
from mfs_core.errors import BackendOutputError, ContextWindowError, MissingLogprobsError, ServerRequestError
from mfs_core.backends.openai import OpenAIBackend
from mfs_core.backends.openai_wire import _retry_after, parse_completion  # _retry_after: the wire format's private helper
from mfs_core.backends.replica_routing import assign_replicas
from mfs_core.settings import MFSSettings
from mfs_core.types import GenerationRequest


def choice(index: int, text: str, token_logprobs: list[float | None] | None, *, tokens: list[str] | None = None,
           finish_reason: str = "stop", **extra: Any) -> dict[str, Any]:
    tokens = tokens if tokens is not None else [f"t{i}" for i in range(len(token_logprobs or []))]
    logprobs = None
    if token_logprobs is not None:
        offsets = [sum(len(t) for t in tokens[:i]) for i in range(len(tokens))]
        logprobs = {"text_offset": offsets, "token_logprobs": token_logprobs, "tokens": tokens,
                    "top_logprobs": [{t: lp} for t, lp in zip(tokens, token_logprobs)]}
    return {"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish_reason, **extra}


def response(*choices: dict[str, Any], prompt_tokens: int | None = 17) -> dict[str, Any]:
    body: dict[str, Any] = {"id": "cmpl-1", "object": "text_completion", "created": 0, "model": "m", "choices": list(choices)}
    if prompt_tokens is not None:
        body["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": 0, "total_tokens": prompt_tokens}
    return body


def test_logprobs_are_summed_per_choice_and_choices_ordered_by_index() -> None:
    request = GenerationRequest(prompt="p", n=2, stop=("\n",))
    body = response(
        choice(1, "b", [-0.5, -0.25], stop_reason=None, token_ids=[7, 2]),
        choice(0, "a", [-1.0, -2.0, -0.125], stop_reason="\n", token_ids=[5, 6, 9]),
    )
    first, second = parse_completion(body, request)
    assert (first.text, first.token_ids, first.logprob_sum, first.finish_reason, first.stop_reason) == (
        "a", (5, 6, 9), -3.125, "stop", "\n")
    assert (second.text, second.token_ids, second.logprob_sum, second.finish_reason, second.stop_reason) == (
        "b", (7, 2), -0.75, "eos", None)
    assert first.prompt_tokens == second.prompt_tokens == 17  # usage covers the one prompt of the request


def test_int_stop_reason_and_length() -> None:
    request = GenerationRequest(prompt="p", n=2)
    body = response(choice(0, "x", [-1.0], stop_reason=128008), choice(1, "yy", [-1.0, -1.0], finish_reason="length", stop_reason=None))
    eos, length = parse_completion(body, request)
    assert (eos.finish_reason, eos.stop_reason) == ("eos", None)
    assert (length.finish_reason, length.num_tokens) == ("length", 2)


def test_stop_reason_is_inferred_without_vllm_fields() -> None:
    request = GenerationRequest(prompt="p", n=2, stop=("\n", "<end_of_reasoning>"))
    stopped = choice(0, "3 + 4 = 7", [-0.1] * 4, tokens=["3", " + 4", " = 7", "\n"])
    ended = choice(1, "7", [-0.1, -0.2], tokens=["7", "</s>"])
    stop, eos = parse_completion(response(stopped, ended), request)
    assert (stop.finish_reason, stop.stop_reason, stop.token_ids) == ("stop", "\n", (-1, -1, -1, -1))
    assert (eos.finish_reason, eos.stop_reason, eos.num_tokens) == ("eos", None, 2)


def test_token_ids_from_token_id_strings() -> None:
    body = response(choice(0, "ab", [-1.0, -1.0], tokens=["token_id:12", "token_id:3"], stop_reason=None))
    assert parse_completion(body, GenerationRequest(prompt="p"))[0].token_ids == (12, 3)


def test_prompt_tokens_fallback_without_usage() -> None:
    body = response(choice(0, "a", [-1.0], stop_reason=None), prompt_tokens=None)
    assert parse_completion(body, GenerationRequest(prompt="p"), prompt_tokens=9)[0].prompt_tokens == 9


@pytest.mark.parametrize("logprobs", [None, [-1.0, None]])
def test_missing_logprobs_is_a_clear_error(logprobs: list[float | None] | None) -> None:
    body = response(choice(0, "a", logprobs, tokens=["a", "b"], stop_reason=None))
    with pytest.raises(MissingLogprobsError, match="without per-token log-probs.*cannot run without them"):
        parse_completion(body, GenerationRequest(prompt="p"), url="http://h/v1/completions")


@pytest.mark.parametrize(("body", "pattern"), [
    ({"object": "error"}, "without a 'choices' list"),
    (response(*(choice(i, "a", [-1.0], stop_reason=None) for i in range(3))), "returned 3 choices for n=2"),
])
def test_unusable_bodies(body: dict[str, Any], pattern: str) -> None:
    with pytest.raises(BackendOutputError, match=pattern):
        parse_completion(body, GenerationRequest(prompt="p", n=2))


def test_unknown_finish_reason() -> None:
    body = response(choice(0, "a", [-1.0], finish_reason="abort", stop_reason=None))
    with pytest.raises(BackendOutputError, match="finish_reason='abort'"):
        parse_completion(body, GenerationRequest(prompt="p"))


def test_token_ids_must_match_logprobs() -> None:
    body = response(choice(0, "a", [-1.0, -1.0], token_ids=[1], stop_reason=None))
    with pytest.raises(BackendOutputError, match="1 token ids but 2 token log-probs"):
        parse_completion(body, GenerationRequest(prompt="p"))


def test_replicas_share_the_work_deterministically() -> None:
    requests = [GenerationRequest(prompt="p", n=n, max_tokens=m) for n, m in [(8, 64), (1, 256), (1, 256), (2, 64), (1, 64)]]
    assert assign_replicas(requests, 1) == [0, 0, 0, 0, 0]
    # loads: [512, 0] -> r1; [512, 256] -> r1; [512, 512] -> r0; [640, 512] -> r1; [640, 640] -> r0
    assert assign_replicas(requests, 2) == [0, 1, 1, 0, 1]
    assert assign_replicas(requests, 3) == [0, 1, 2, 1, 2]


def test_retry_after_header() -> None:
    assert _retry_after("2") == 2.0
    assert _retry_after("0.25") == 0.25
    assert _retry_after("100000") == 300.0
    assert _retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past: retry now
    assert _retry_after("soon") is None
    assert _retry_after(None) is None


class StubTokenizer:
    bos_token = "<s>"
    model_max_length = 64
    chat_template = "stub"

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        ids = [1] if add_special_tokens else []
        if text.startswith(self.bos_token):
            ids.append(1)
            text = text[len(self.bos_token):]
        return ids + [ord(c) for c in text]


def make_backend(**kwargs: Any) -> OpenAIBackend:
    kwargs = {"tokenizer": StubTokenizer(), "context_window": 64, "num_parameters": 10, **kwargs}
    return OpenAIBackend(["http://replica-a:8000", "http://replica-b:8000/v1/"], "served-model", **kwargs)


def test_payload_has_every_sampling_field() -> None:
    backend = make_backend(extra_body={"top_k": 0})
    assert isinstance(backend, Backend)
    assert backend.base_urls == ["http://replica-a:8000/v1", "http://replica-b:8000/v1"]
    requests = [GenerationRequest(prompt="<s>chat", n=4, max_tokens=16, stop=("\n", "<end>"), temperature=0.7, top_p=0.95, seed=3),
                GenerationRequest(prompt="raw", n=1, max_tokens=500, seed=None)]
    (_, _, chat, replica0, tokens0), (_, _, raw, replica1, tokens1) = backend._prepare(requests)
    assert chat == {"model": "served-model", "prompt": "<s>chat", "add_special_tokens": False, "n": 4, "max_tokens": 16,
                    "temperature": 0.7, "top_p": 0.95, "stop": ["\n", "<end>"], "seed": 3, "logprobs": 1,
                    "return_token_ids": True, "top_k": 0}
    assert "add_special_tokens" not in raw  # the server adds the BOS, as the other backends do
    assert (raw["max_tokens"], raw["seed"], raw["logprobs"], raw["stop"]) == (64 - 4, None, 1, [])
    assert (tokens0, tokens1) == (5, 4)
    assert (replica0, replica1) == (0, 1)


def test_greedy_request_is_sent_once_with_temperature_zero() -> None:
    request = GenerationRequest(prompt="p", n=3, temperature=0.7, greedy=True)
    body = make_backend()._prepare([request])[0][2]
    assert (body["temperature"], body["n"], body["logprobs"]) == (0.0, 1, 1)
    results = parse_completion(response(choice(0, "a", [-1.0, -0.5], stop_reason=None, token_ids=[4, 2])), request)
    assert [(c.text, c.token_ids, c.logprob_sum) for c in results] == [("a", (4, 2), -1.5)] * 3


def test_plain_openai_payload_without_vllm_extensions() -> None:
    backend = make_backend(vllm_extensions=False)
    body = backend._prepare([GenerationRequest(prompt="<s>chat")])[0][2]
    assert set(body) == {"model", "prompt", "n", "max_tokens", "temperature", "top_p", "stop", "seed", "logprobs"}


def test_prompt_over_the_window_raises_before_sending() -> None:
    with pytest.raises(ContextWindowError, match="prompt 0 has 65 tokens.*context window of 64"):
        make_backend()._prepare([GenerationRequest(prompt="x" * 64)])


def test_without_a_tokenizer() -> None:
    backend = make_backend(tokenizer=None)
    assert backend.apply_chat_template([{"role": "user", "content": "hi"}]) is None
    with pytest.raises(RuntimeError, match="no local tokenizer"):
        backend.count_tokens("hi")
    body = backend._prepare([GenerationRequest(prompt="<s>chat", max_tokens=1000)])[0][2]
    assert body["max_tokens"] == 1000 and "add_special_tokens" not in body


@pytest.mark.parametrize("bad", [[], "http://one:8000/v1"])
def test_base_urls_must_be_a_list(bad: Any) -> None:
    with pytest.raises(ValueError, match="base_urls must be a non-empty list"):
        OpenAIBackend(bad, "m")


def test_from_settings_needs_base_urls() -> None:
    with pytest.raises(ValueError, match="backend='openai' needs the server URLs.*--base-url"):
        OpenAIBackend.from_settings(MFSSettings(backend="openai"))


def test_missing_httpx_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "httpx", None)
    with pytest.raises(ImportError, match=r'pip install "mfs-decoding\[openai\]"'):
        OpenAIBackend(["http://h:1/v1"], "m")


def test_base_urls_setting_accepts_json_and_commas(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MFS_BASE_URLS", '["http://a:8000/v1", "http://b:8000/v1/"]')
    assert MFSSettings().base_urls == ["http://a:8000/v1", "http://b:8000/v1"]
    monkeypatch.setenv("MFS_BASE_URLS", "http://a:8000/v1, http://b:8000/v1")
    assert MFSSettings().base_urls == ["http://a:8000/v1", "http://b:8000/v1"]
    assert MFSSettings(base_urls="http://c:1/v1").base_urls == ["http://c:1/v1"]


@pytest.mark.parametrize(("value", "pattern"), [
    (["localhost:8000"], "must be http:// or https:// URLs, got 'localhost:8000'"),
    (["http://a/v1", "http://a/v1/"], "must not repeat a URL"),
    ("[not json", "not a valid JSON list"),
])
def test_bad_base_urls(value: Any, pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern):
        MFSSettings(base_urls=value)


@pytest.mark.parametrize(("field", "value"), [("request_timeout", 0), ("max_retries", -1), ("gpu_memory_utilization", 1.5),
                                              ("tensor_parallel_size", 0), ("max_model_len", 0), ("num_parameters", 0)])
def test_backend_fields_are_range_checked(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=field):
        MFSSettings(**{field: value})


def test_servers_and_client_options_change_the_backend_key() -> None:
    base = MFSSettings(backend="openai", base_urls=["http://a:1/v1"])
    for change in ({"base_urls": ["http://b:1/v1"]}, {"api_key": "k"}, {"request_timeout": 5.0}, {"max_retries": 0},
                   {"tokenizer": "/tok"}, {"num_parameters": 8}):
        assert MFSSettings(**{**base.model_dump(), **change}).backend_key() != base.backend_key(), change
    assert "secret" not in repr(MFSSettings(api_key="secret").backend_key())


class StubResponse:
    """What ``OpenAIBackend`` reads of an ``httpx.Response``."""

    def __init__(self, status_code: int, content: bytes, headers: dict[str, str] | None = None) -> None:
        self.status_code = status_code
        self.content = content
        self.headers = {k.lower(): v for k, v in (headers or {}).items()}


def test_response_status_mapping() -> None:
    import json

    from mfs_core.backends.openai_wire import _Fault

    backend = make_backend()
    request = GenerationRequest(prompt="p")
    url = "http://replica-a:8000/v1/completions"
    sender = backend.sender  # the backend's HTTP part
    outcome = sender._outcome(url, request, None, StubResponse(429, b'{"error": {"message": "slow down"}}', {"Retry-After": "3"}))
    assert outcome == _Fault("HTTP 429: slow down", 3.0)
    assert sender._outcome(url, request, None, StubResponse(502, b"bad gateway")) == _Fault("HTTP 502: bad gateway", None)
    assert sender._delay(0, _Fault("x")) == 0.5 and sender._delay(3, _Fault("x")) == 4.0
    assert sender._delay(10, _Fault("x")) == 30.0 and sender._delay(0, _Fault("x", 3.0)) == 3.0
    malformed = sender._outcome(url, request, None, StubResponse(200, b'{"choices": ['))
    assert isinstance(malformed, _Fault) and malformed.message.startswith("malformed JSON")
    too_long = b'{"object": "error", "message": "This model\'s maximum context length is 64 tokens.", "code": 400}'
    with pytest.raises(ContextWindowError, match="maximum context length is 64"):
        sender._outcome(url, request, None, StubResponse(400, too_long))
    with pytest.raises(ServerRequestError, match="HTTP 401: bad key"):
        sender._outcome(url, request, None, StubResponse(401, b'{"error": {"message": "bad key"}}'))
    ok = json.dumps(response(choice(0, "a", [-1.0], stop_reason=None), prompt_tokens=5)).encode()
    assert sender._outcome(url, request, 5, StubResponse(200, ok))[0].prompt_tokens == 5


def test_a_tokenizer_that_counts_differently_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    import json

    backend = make_backend()
    body = json.dumps(response(choice(0, "a", [-1.0], stop_reason=None), prompt_tokens=9)).encode()
    with caplog.at_level("WARNING", logger="mfs_core.backends.openai"):
        result = backend.sender._outcome("http://h/v1/completions", GenerationRequest(prompt="p"), 5,
                                         StubResponse(200, body))
        backend.sender._outcome("http://h/v1/completions", GenerationRequest(prompt="p"), 5, StubResponse(200, body))
    assert result[0].prompt_tokens == 9  # the server's count wins
    assert [r.message for r in caplog.records].count(
        "http://h/v1/completions counted 9 prompt tokens where the local tokenizer counts 5: is the tokenizer the "
        "served model's?") == 1


def test_chat_shaped_logprobs_of_llama_server_are_read_with_token_ids() -> None:
    # llama.cpp's llama-server: /v1/completions answers logprobs.content[] with id, token, logprob
    body = {"choices": [{"index": 0, "text": "7", "finish_reason": "stop", "logprobs": {"content": [
        {"id": 22, "token": "7", "bytes": [55], "logprob": -0.25, "top_logprobs": []},
        {"id": 198, "token": "\n", "bytes": [10], "logprob": -0.5, "top_logprobs": []}]}}],
        "usage": {"prompt_tokens": 9}}
    (cont,) = parse_completion(body, GenerationRequest(prompt="3 + 4 = ", stop=("\n",)))
    assert (cont.text, cont.token_ids, cont.logprob_sum, cont.finish_reason, cont.stop_reason, cont.prompt_tokens) == (
        "7", (22, 198), -0.75, "stop", "\n", 9)
    post_sampling = {"choices": [{"index": 0, "text": "7", "finish_reason": "length",
                                  "logprobs": {"content": [{"id": 22, "token": "7", "prob": 0.8}]}}]}
    with pytest.raises(MissingLogprobsError, match="Ollama's /v1/completions does not"):
        parse_completion(post_sampling, GenerationRequest(prompt="p"))


def test_one_choice_for_n_is_a_single_sample_error_and_seeds_fan_out_distinctly() -> None:
    from mfs_core.backends.openai_wire import sample_seed
    from mfs_core.errors import SingleSampleError

    with pytest.raises(SingleSampleError, match="returned 1 choice for n=4"):
        parse_completion(response(choice(0, "a", [-1.0])), GenerationRequest(prompt="p", n=4))
    seeds = [sample_seed(s, k) for s in (100, 101) for k in range(4)]
    assert seeds[0] == 100 and seeds[4] == 101 and len(set(seeds)) == 8  # neighbours' samples never share a seed
    assert sample_seed(100, 2) == sample_seed(100, 2) and sample_seed(None, 3) is None
    backend = OpenAIBackend(["http://127.0.0.1:9/v1"], "m", context_window=4096, server_n="no")
    flat, groups = backend._expand([GenerationRequest(prompt="a", n=3, seed=5), GenerationRequest(prompt="b", n=2, greedy=True)])
    assert [(r.n, r.seed) for r in flat] == [(1, 5), (1, sample_seed(5, 1)), (1, sample_seed(5, 2)), (2, None)]
    assert groups == [[0, 1, 2], [3]] and backend.fans_out is True and backend.fanned_out_posts == 3
    with pytest.raises(ValueError, match="server_n must be 'auto', 'yes' or 'no', got 'maybe'"):
        OpenAIBackend(["http://127.0.0.1:9/v1"], "m", server_n="maybe")  # type: ignore[arg-type]


TAG = '{"type":"structural_tag","format":{"type":"grammar","grammar":"root ::= \\"{}\\""}}'


def test_a_grammar_request_carries_structured_outputs_and_others_are_unchanged() -> None:
    from mfs_core.types import RequestGrammar

    grammar = RequestGrammar(structural_tag="{}", prefix="<tool_call>", remote=TAG, in_action=True)
    plain = GenerationRequest(prompt="<s>chat", n=4, max_tokens=16, seed=3)
    (_, _, constrained, _, _), (_, _, free, _, _) = make_backend()._prepare([
        GenerationRequest(prompt="<s>chat", n=4, max_tokens=16, seed=3, grammar=grammar), plain])
    assert constrained.pop("structured_outputs") == {"structural_tag": TAG}
    assert constrained == free  # the same body as without a grammar, plus the one field
    assert free == make_backend()._prepare([plain])[0][2]


def test_fanned_out_posts_keep_their_request_s_grammar() -> None:
    from mfs_core.types import RequestGrammar

    backend = make_backend(server_n="no")
    grammar = RequestGrammar(structural_tag="{}", remote=TAG)
    flat, groups = backend._expand([GenerationRequest(prompt="a", n=3, seed=5, grammar=grammar),
                                    GenerationRequest(prompt="b", n=2, seed=7)])
    bodies = [job[2] for job in backend._prepare(flat)]
    assert groups == [[0, 1, 2], [3, 4]]
    assert [body.get("structured_outputs") for body in bodies] == [{"structural_tag": TAG}] * 3 + [None] * 2


def test_grammars_that_cannot_be_sent_are_said_once(caplog: pytest.LogCaptureFixture) -> None:
    from mfs_core.types import RequestGrammar

    open_value = RequestGrammar(structural_tag=TAG, prefix='{"value": 1', remote=None)  # inside a JSON value
    inside = GenerationRequest(prompt="a", grammar=open_value)
    sendable = GenerationRequest(prompt="a", grammar=RequestGrammar(structural_tag=TAG, remote=TAG))
    with caplog.at_level("WARNING", logger="mfs_core.backends.openai"):
        vllm_server, other_server = make_backend(), make_backend(vllm_extensions=False)
        bodies = [job[2] for backend in (vllm_server, vllm_server, other_server, other_server)
                  for job in backend._prepare([inside, sendable])]
    assert [("structured_outputs" in body) for body in bodies] == [False, True, False, True, False, False, False, False]
    messages = [r.getMessage() for r in caplog.records]
    assert sum("without the action grammar" in m for m in messages) == 1
    assert sum("with vllm_extensions=False" in m for m in messages) == 1


def test_a_top_logprobs_request_asks_k_keyed_by_token_id_and_reads_token_confidences() -> None:
    request = GenerationRequest(prompt="p", n=1, stop=("\n",), top_logprobs=3)
    body = make_backend()._prepare([request])[0][2]
    assert (body["logprobs"], body["return_tokens_as_token_ids"]) == (3, True)
    assert "return_tokens_as_token_ids" not in make_backend()._prepare([GenerationRequest(prompt="p")])[0][2]
    assert make_backend(vllm_extensions=False)._prepare([request])[0][2]["logprobs"] == 3
    # vLLM's shape: the sampled token first, then the top 3. Position 0: the sampled token is the
    # top one (3 entries); position 1: it is not among the top 3 (4 entries, the sampled one lowest).
    top = [{"token_id:5": -0.5, "token_id:8": -1.0, "token_id:9": -1.5},
           {"token_id:6": -4.0, "token_id:1": -0.25, "token_id:2": -1.0, "token_id:3": -2.75}]
    answer = {"index": 0, "text": "ab", "finish_reason": "stop", "stop_reason": "\n", "token_ids": [5, 6],
              "logprobs": {"tokens": ["token_id:5", "token_id:6"], "token_logprobs": [-0.5, -4.0], "top_logprobs": top}}
    (cont,) = parse_completion(response(answer), request)
    # -(-0.5 - 1.0 - 1.5) / 3 = 1.0 and -(-0.25 - 1.0 - 2.75) / 3 = 4/3 (the sampled -4.0 is not in the top 3)
    assert cont.token_confidences == pytest.approx((1.0, 4 / 3))
    assert (cont.token_ids, cont.logprob_sum) == ((5, 6), -4.5)
    assert parse_completion(response(answer), GenerationRequest(prompt="p"))[0].token_confidences == ()


def test_chat_shaped_top_logprobs_and_missing_ones() -> None:
    request = GenerationRequest(prompt="p", top_logprobs=2)
    chat = {"choices": [{"index": 0, "text": "7", "finish_reason": "length", "logprobs": {"content": [
        {"id": 22, "token": "7", "logprob": -0.25, "top_logprobs": [{"token": "7", "logprob": -0.25},
                                                                     {"token": "8", "logprob": -1.75}]}]}}]}
    assert parse_completion(chat, request)[0].token_confidences == pytest.approx((1.0,))
    bare = response(choice(0, "a", [-1.0, -0.5], stop_reason=None, token_ids=[4, 2]))
    bare["choices"][0]["logprobs"]["top_logprobs"] = None  # a server that ignores logprobs=k
    with pytest.raises(MissingLogprobsError, match=r"returned no top log-probs for every token .* asked logprobs=2"):
        parse_completion(bare, request)


def test_one_watcher_cancels_only_the_posts_whose_cancel_event_is_set() -> None:
    """The call's cancel watcher (the cut-off of an abandoned decode): within a few polls it cancels the in-flight
    POST whose request's event is set, leaves the other POST and a request without an event alone."""
    import asyncio
    import threading

    from mfs_core.backends import openai_sender

    abandoned, kept = threading.Event(), threading.Event()
    requests = [GenerationRequest(prompt="a", n=1, max_tokens=4, cancel=abandoned),
                GenerationRequest(prompt="b", n=1, max_tokens=4, cancel=kept),
                GenerationRequest(prompt="c", n=1, max_tokens=4)]

    async def scenario() -> list[bool]:
        posts = {i: asyncio.ensure_future(asyncio.sleep(60)) for i in range(3)}
        watcher = asyncio.ensure_future(openai_sender._cut_off_cancelled(dict(posts), requests))
        abandoned.set()
        await asyncio.sleep(5 * openai_sender.CANCEL_POLL_S)
        states = [posts[i].cancelled() for i in range(3)]
        watcher.cancel()
        for post in posts.values():
            post.cancel()
        await asyncio.gather(watcher, *posts.values(), return_exceptions=True)
        return states

    assert asyncio.run(scenario()) == [True, False, False]
