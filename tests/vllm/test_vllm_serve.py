"""The HTTP backend against real ``vllm serve`` replicas of the demo model on loopback.

The servers (``conftest.vllm_servers``) are vLLM's own OpenAI-compatible API server, started
with the in-process engine's arguments (:mod:`mfs_core.vllm_server`). vLLM seeds a
generator per request, so a seeded request gives the same samples in-process and over HTTP,
on either replica: decodes through the servers must equal in-process vLLM's, also when one
replica is killed in the middle of them.
"""

from __future__ import annotations

import concurrent.futures
import json
import re
import time
import urllib.request

import pytest
from bounded import within

from mfs_core.backends.openai import OpenAIBackend
from mfs_core.backends.vllm import VLLMBackend
from mfs_core.vllm_server import VLLMServer
from mfs_core.bench.datasets import demo_heldout_path
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings
from mfs_core.types import DecodeResult

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.enable_socket]

HELDOUT = [example["input"] for example in json.loads(demo_heldout_path().read_text())]
SEARCH = {"step_beam_size": 2, "num_rollouts": 2, "max_steps": 4, "seed": 3}


def served_requests(server: VLLMServer) -> float:
    """Requests the replica has finished (its Prometheus counter ``vllm:request_success_total``)."""
    with urllib.request.urlopen(server.url.removesuffix("/v1") + "/metrics", timeout=10) as answer:  # noqa: S310
        text = answer.read().decode()
    return sum(float(value) for value in re.findall(r"^vllm:request_success_total\{[^}]*\} (\S+)$", text, re.MULTILINE))


def http_engine(servers: list[VLLMServer], **search: object) -> MFSEngine:
    settings = MFSSettings(backend="openai", base_urls=[s.url for s in servers], max_retries=3, **search)
    return MFSEngine(OpenAIBackend.from_settings(settings), settings)


def same_decodes(here: list[DecodeResult], there: list[DecodeResult]) -> None:
    for a, b in zip(here, there, strict=True):
        assert (a.text, a.answer, a.vote_share, a.output_tokens, a.prompt_tokens, a.stop_reason) == (
            b.text, b.answer, b.vote_share, b.output_tokens, b.prompt_tokens, b.stop_reason)
        assert a.completion_answers == b.completion_answers


def test_mfs_through_vllm_serve_equals_in_process_vllm(vllm_servers: list[VLLMServer], vllm_backend: VLLMBackend) -> None:
    questions = HELDOUT[10:13]
    engine = http_engine(vllm_servers[:1], **SEARCH)
    remote = within(600, lambda: engine.decode(questions))
    local = MFSEngine(vllm_backend, MFSSettings(**SEARCH)).decode(questions)
    same_decodes(remote, local)
    assert all(r.output_tokens > 0 and r.answer is not None for r in remote)


def test_two_replicas_share_a_decode_and_one_killed_midway_loses_nothing(
    vllm_servers: list[VLLMServer], vllm_backend: VLLMBackend
) -> None:
    questions = HELDOUT[20:26]
    local = MFSEngine(vllm_backend, MFSSettings(**SEARCH)).decode(questions)
    first, second = vllm_servers
    served = [served_requests(first), served_requests(second)]
    engine = http_engine(vllm_servers, **SEARCH)
    # Round 1 over both replicas, whole.
    spread = within(600, lambda: engine.decode(questions[:2]))
    same_decodes(spread, local[:2])
    gained = [served_requests(first) - served[0], served_requests(second) - served[1]]
    assert min(gained) > 0, f"both replicas serve requests of one decode: {gained}"
    # Round 2: the second replica is killed once the decode has made its first round.
    pool = concurrent.futures.ThreadPoolExecutor(1)
    calls = engine.stats.generate_calls
    running = pool.submit(engine.decode, questions)
    deadline = time.monotonic() + 300
    while engine.stats.generate_calls < calls + 2 and time.monotonic() < deadline and not running.done():
        time.sleep(0.05)
    assert not running.done(), "the decode ended before the replica could be killed"
    second.kill()
    assert second.process is not None and second.process.poll() is not None
    try:
        survived = running.result(timeout=600)
    finally:
        pool.shutdown(wait=False)
    same_decodes(survived, local)
    assert all(r.answer is not None for r in survived)
