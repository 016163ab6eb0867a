"""``scheduling="continuous"``: each decode's requests to vLLM's ``AsyncLLM`` on their own (demo model).

The lockstep engine sends a round of every live decode as one ``LLM.generate`` call; the
continuous engine (:mod:`mfs_core.backends.vllm_async`) sends each decode's requests as
independent ``AsyncLLM.generate`` requests and lets vLLM batch them. vLLM seeds every request
on its own, so seeded decodes must give the same texts, answers and token counts in both
designs, alone and with other decodes running; an abandoned decode's requests must leave
vLLM at once; closing the engine must stop every process vLLM started.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import CancelledError

import psutil
import pytest
from bounded import within
from tests.vllm.conftest import VLLM_SETTINGS

from mfs_core.backends.vllm import VLLMBackend
from mfs_core.backends.vllm_async import AsyncVLLMBackend
from mfs_core.bench.datasets import demo_heldout_path
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings
from mfs_core.types import DecodeResult, GenerationRequest

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.enable_socket]

HELDOUT = [example["input"] for example in json.loads(demo_heldout_path().read_text())]
SEARCH = {"step_beam_size": 2, "num_rollouts": 2, "max_steps": 4}
CONTINUOUS = VLLM_SETTINGS.model_copy(update={"scheduling": "continuous", **SEARCH})


@pytest.fixture(scope="module")
def continuous() -> Iterator[tuple[MFSEngine, set[int]]]:
    """A continuous engine on the demo model (float32) and the PIDs of the processes it started."""
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    engine = MFSEngine.from_settings(CONTINUOUS)
    started = {child.pid for child in psutil.Process().children(recursive=True)} - before
    try:
        yield engine, started
    finally:
        engine.close()


def same(here: list[DecodeResult], there: list[DecodeResult]) -> None:
    for a, b in zip(here, there, strict=True):
        assert (a.text, a.answer, a.vote_share, a.output_tokens, a.prompt_tokens, a.stop_reason, len(a.steps)) == (
            b.text, b.answer, b.vote_share, b.output_tokens, b.prompt_tokens, b.stop_reason, len(b.steps))


def test_the_continuous_engine_holds_async_llm(continuous: tuple[MFSEngine, set[int]]) -> None:
    engine, started = continuous
    from vllm.v1.engine.async_llm import AsyncLLM

    assert isinstance(engine.backend, AsyncVLLMBackend) and isinstance(engine.backend.llm, AsyncLLM)
    assert started, "AsyncLLM runs its engine core in a child process"
    # The synchronous protocol call works from any thread but the loop's.
    outputs = engine.backend.generate([GenerationRequest(prompt=HELDOUT[0], n=2, max_tokens=8, seed=1)])
    assert [len(o) for o in outputs] == [2] and all(c.num_tokens > 0 for c in outputs[0])


def test_a_seeded_decode_alone_equals_lockstep(continuous: tuple[MFSEngine, set[int]], vllm_backend: VLLMBackend) -> None:
    engine, _ = continuous
    question = HELDOUT[3]
    lockstep = MFSEngine(vllm_backend, MFSSettings(**SEARCH, seed=5)).decode([question])
    calls = engine.stats.generate_calls
    alone = within(300, lambda: engine.decode([question], settings=CONTINUOUS.model_copy(update={"seed": 5})))
    same(alone, lockstep)
    assert engine.stats.generate_calls - calls >= len(alone[0].steps)


def test_concurrent_seeded_decodes_equal_lockstep(continuous: tuple[MFSEngine, set[int]], vllm_backend: VLLMBackend) -> None:
    """Four decodes at once: under continuous batching their requests share vLLM batches of other
    shapes than lockstep's rounds; per-request seeds keep every sample."""
    engine, _ = continuous
    questions = HELDOUT[30:34]
    lockstep = MFSEngine(vllm_backend, MFSSettings(**SEARCH, seed=2)).decode(questions)
    together = within(600, lambda: engine.decode(questions, settings=CONTINUOUS.model_copy(update={"seed": 2})))
    same(together, lockstep)


def test_an_abandoned_decode_leaves_vllm_at_once(continuous: tuple[MFSEngine, set[int]]) -> None:
    engine, _ = continuous
    llm = engine.backend.llm
    settings = CONTINUOUS.model_copy(update={"max_steps": 64, "step_beam_size": 4, "num_rollouts": 4})
    future = engine.submit_prompts([engine.render(HELDOUT[40])], settings=settings)[0]
    deadline = time.monotonic() + 120
    while llm.get_num_unfinished_requests() == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert llm.get_num_unfinished_requests() > 0
    future.abandon("test")
    with pytest.raises(CancelledError):
        future.result(timeout=10)
    deadline = time.monotonic() + 10
    while llm.get_num_unfinished_requests() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert llm.get_num_unfinished_requests() == 0


def test_mfs_serve_streams_a_continuous_decode_equal_to_lockstep(vllm_backend: VLLMBackend) -> None:
    """``mfs serve --backend vllm --scheduling continuous`` on loopback (started and stopped by PID):
    a streamed request gets reasoning chunks while the search runs, then the answer that the
    lockstep engine on ``vllm.LLM`` gives with the same seed."""
    import httpx

    from tests.serve_process import serve_process

    question = HELDOUT[7]
    expected = MFSEngine(vllm_backend, MFSSettings(**SEARCH, seed=9)).decode([question])[0]
    flags = ["--backend", "vllm", "--scheduling", "continuous", "--dtype", "float32", "--step-beam-size", "2",
             "--num-rollouts", "2", "--max-steps", "4"]
    body = {"messages": [{"role": "user", "content": question}], "stream": True, "seed": 9}
    reasoning, content = [], []
    with serve_process(flags, {"MFS_KV_CACHE_GIB": "1"}, start_timeout=400) as server:
        with httpx.stream("POST", server.url + "/v1/chat/completions", json=body, timeout=300) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                for choice in json.loads(line[6:]).get("choices", []):
                    reasoning.append(choice["delta"].get("reasoning") or "")
                    content.append(choice["delta"].get("content") or "")
        health = httpx.get(server.url + "/health", timeout=10).json()
    assert sum(1 for piece in reasoning if piece) >= 2
    assert "".join(content) == expected.text
    assert health["decodes_in_flight"] == 0
