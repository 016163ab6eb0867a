"""The server's work limits: per-request maxima, admission by worst-case work, a
request that can never fit refused with 400, and the per-request deadline (504)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient  # noqa: E402

from mfs_core import MFSEngine, MFSSettings  # noqa: E402
from mfs_core.decoders import decoder_spec  # noqa: E402
from mfs_core.serve.app import create_app  # noqa: E402
from mfs_core.serve.config import ServerSettings  # noqa: E402
from mfs_core.serve.limits import Admission, RequestLimits, check_request  # noqa: E402
from mfs_core.serve.schemas import RequestError, ServeCall  # noqa: E402
from tests.scripted import ScriptedBackend, continuation  # noqa: E402

USER = [{"role": "user", "content": "What is 3 + 4?"}]
SMALL = {"step_beam_size": 2, "num_rollouts": 2, "max_steps": 2, "max_step_tokens": 8, "max_answer_tokens": 16,
         "seed": 0}


def test_worst_case_tokens_by_hand() -> None:
    settings = MFSSettings(**SMALL, num_samples=3)
    # MFS: max_steps · M · N · (max_step_tokens + foresight_rollouts · max_answer_tokens) + M · max_answer_tokens
    assert decoder_spec("mfs").worst_case_tokens(settings) == 2 * 2 * 2 * (8 + 1 * 16) + 2 * 16 == 224
    assert decoder_spec("cot").worst_case_tokens(settings) == 16
    assert decoder_spec("sc").worst_case_tokens(settings) == 3 * 16  # k = num_samples samples
    assert decoder_spec("esc").worst_case_tokens(settings) == settings.esc_max_samples * 16
    assert decoder_spec("deepconf").worst_case_tokens(settings) == settings.deepconf_max_traces * 16
    # a variant's overrides count: mfs-min-paths changes nothing the bound reads, mfs-paper neither
    assert decoder_spec("mfs-paper").worst_case_tokens(settings) == 224


@pytest.mark.parametrize("method", ["mfs", "mfs-paper", "phi", "cot", "sc", "esc", "deepconf"])  # each kind of bound
def test_no_decode_generates_more_than_its_worst_case(method: str, demo_engine) -> None:  # noqa: ANN001
    """On the demo model (real token counts and confidences), a search at a tight token budget."""
    settings = demo_engine.settings.model_copy(update={
        "step_beam_size": 2, "num_rollouts": 2, "max_steps": 3, "max_step_tokens": 12, "max_answer_tokens": 48,
        "esc_max_samples": 6, "deepconf_max_traces": 6, "deepconf_warmup": 2, "seed": 0})
    question = "Grace has 7 bags with 9 cards in each bag. Sadly, 6 cards break. How many cards are there now?"
    (result,) = demo_engine.decode([question], settings=settings, method=method)
    assert 0 < result.output_tokens <= decoder_spec(method).worst_case_tokens(settings), method


def _call(**settings: int) -> ServeCall:
    return ServeCall(endpoint="chat", settings=MFSSettings(**{**SMALL, **settings}), messages=USER)


def test_a_request_over_a_limit_is_refused_naming_it_and_the_servers_own_setting_passes() -> None:
    limits = RequestLimits.from_config(ServerSettings(limit_max_steps=4), MFSSettings(**{**SMALL, "max_steps": 6}))
    assert limits.maxima == {"step_beam_size": 4, "num_rollouts": 4, "num_samples": 16, "max_steps": 6,
                             "max_answer_tokens": 1024}
    check_request(_call(max_steps=6, step_beam_size=4), limits)  # the server's own max_steps, M at the limit
    with pytest.raises(RequestError) as caught:
        check_request(_call(step_beam_size=5), limits)
    assert (caught.value.status, caught.value.param) == (400, "step_beam_size")
    assert caught.value.message == ("step_beam_size=5 is more than this server allows; allowed: 1 <= step_beam_size "
                                    "<= 4 (the operator's --limit-step-beam-size)")
    with pytest.raises(RequestError, match=r"^max_tokens=2000 is more than this server allows; allowed: 1 <= "
                       r"max_tokens <= 1024 \(the operator's --limit-max-tokens\)$"):
        check_request(_call(max_answer_tokens=2000), limits)
    with pytest.raises(RequestError, match=r"^num_samples=17 is more than this server allows; allowed: 1 <= "
                       r"num_samples <= 16 \(the operator's --limit-num-samples\)$"):
        check_request(_call(num_samples=17), limits)


def test_admission_counts_work_not_requests() -> None:
    admission = Admission(queue_size=8, work_budget=1000)
    first = admission.admit(1, 600)
    with pytest.raises(RequestError) as busy:
        admission.admit(1, 500)  # 600 + 500 > 1000, though only 1 of 8 decodes is taken
    assert busy.value.status == 429 and busy.value.kind == "rate_limit_error"
    assert busy.value.headers["Retry-After"] == "1"  # nothing finished yet, the running one is seconds old
    admission.admit(1, 400)  # fits exactly
    assert (admission.decodes, admission.work) == (2, 1000)
    admission.release(1, 600)
    admission.finished(first)
    assert (admission.decodes, admission.work) == (1, 400)


def test_a_request_that_can_never_fit_is_a_400_not_a_429() -> None:
    admission = Admission(queue_size=4, work_budget=1000)
    for decodes, work, shown in ((1, 1001, "up to 1,001 output tokens, more than the server's work budget of 1,000"),
                                 (5, 10, "5 decodes, more than queue_size=4")):
        with pytest.raises(RequestError) as caught:
            admission.admit(decodes, work)
        assert caught.value.status == 400 and caught.value.message.startswith(
            f"this request can never be admitted: it needs {shown}; ")


def test_retry_after_follows_the_decodes_seen() -> None:
    admission = Admission(queue_size=1, work_budget=10)
    admission._started.append(time.monotonic() - 29.6)  # a decode running for about 30 s and not done
    assert admission.retry_after() == 60  # twice its age
    admission.observe(89.2)
    assert admission.retry_after() == 90  # the mean decode, once one finished
    admission.observe(10_000.0)
    assert admission.retry_after() == 600  # capped


class _Slow(ScriptedBackend):
    def generate(self, requests):  # noqa: ANN001, ANN201
        time.sleep(0.4)
        return super().generate(requests)


@pytest.fixture
def client() -> Iterator[TestClient]:
    backend = _Slow(lambda r: [continuation("The answer is: \\boxed{7}.", finish_reason="eos")] * r.n)
    engine = MFSEngine(backend, MFSSettings(**SMALL))
    config = ServerSettings(request_timeout=0.2, queue_size=4)
    with TestClient(create_app(engine, config), raise_server_exceptions=False) as test:
        yield test


def test_the_server_refuses_over_its_limits_and_shows_its_work(client: TestClient) -> None:
    big = client.post("/v1/chat/completions", json={"messages": USER, "step_beam_size": 1024, "num_rollouts": 1024})
    assert big.status_code == 400 and big.json()["error"]["param"] == "step_beam_size"
    health = client.get("/health").json()
    assert health["work_budget"] == 4 * 224 and health["work_in_flight"] == 0  # queue_size × one default decode
    never = client.post("/v1/chat/completions", json={"messages": USER, "n": 5})
    assert never.status_code == 400 and "can never be admitted: it needs 5 decodes" in never.json()["error"]["message"]


def test_past_request_timeout_the_client_gets_a_504_and_the_work_is_given_back(client: TestClient) -> None:
    reply = client.post("/v1/chat/completions", json={"messages": USER})
    assert reply.status_code == 504
    assert reply.json()["error"] == {"message": "the request's decodes did not finish within request_timeout=0.2 s; "
                                     "they were stopped", "type": "timeout_error", "param": None, "code": 504}
    streamed = client.post("/v1/chat/completions", json={"messages": USER, "stream": True})
    events = [line[len("data: "):] for line in streamed.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]" and json.loads(events[-2])["error"]["code"] == 504
    deadline = time.monotonic() + 10.0
    while client.get("/health").json()["work_in_flight"] and time.monotonic() < deadline:
        time.sleep(0.05)
    health = client.get("/health").json()
    assert (health["decodes_in_flight"], health["work_in_flight"], health["work_budget"]) == (0, 0, 4 * 224)


def test_the_work_numbers_in_docs_serve_md_are_the_codes() -> None:
    from pathlib import Path

    text = " ".join((Path(__file__).resolve().parents[3] / "docs" / "serve.md").read_text(encoding="utf-8").split())
    demo = MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=3)  # the page's demo command
    one = decoder_spec("mfs").worst_case_tokens(demo)
    config = ServerSettings()
    largest = config.max_n * decoder_spec("mfs").worst_case_tokens(MFSSettings(
        step_beam_size=config.limit_step_beam_size, num_rollouts=config.limit_num_rollouts,
        max_steps=config.limit_max_steps, max_answer_tokens=config.limit_max_tokens))
    assert (one, config.queue_size * one, largest, round(largest / one)) == (7936, 507_904, 1_146_880, 145)
    for shown in ("one decode counts 7,936 tokens", "the default budget is 64 of them, 507,904",
                  "counts 1,146,880, about 145 default decodes"):
        assert shown in text
