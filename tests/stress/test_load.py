"""Load: 64 concurrent callers on one engine over the demo model.

Threads calling the engine and LangChain ``MFSLLM.invoke``, asyncio tasks calling LangChain
``ChatMFS.ainvoke`` and LlamaIndex ``MFSLLM.acomplete``, all at once: every call is
answered, each answer equals the same question decoded alone with the same seed, and the
lockstep engine makes at most 1/8 of the backend calls that the 64 decodes make one at a
time.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest

from mfs_core import MFSEngine, MFSSettings

pytestmark = pytest.mark.slow

WAIT = 600.0  # seconds; a loaded 2-core machine is slow, a hang is not
LOAD = {"step_beam_size": 2, "num_rollouts": 2, "max_steps": 3, "max_answer_tokens": 48, "max_step_tokens": 24, "seed": 7}
HELDOUT = Path(__file__).resolve().parents[2] / "mfs_core" / "demo" / "heldout.json"


@pytest.fixture(scope="module")
def load_engine(demo_backend):
    return MFSEngine(demo_backend, MFSSettings(device="cpu", **LOAD))


@pytest.fixture(scope="module")
def questions():
    return [item["input"] for item in json.loads(HELDOUT.read_text())[:64]]


def test_64_mixed_concurrent_callers_get_their_serial_answers(load_engine, questions):
    from langchain_mfs import ChatMFS
    from langchain_mfs import MFSLLM as LangChainMFSLLM
    from llamaindex_mfs import MFSLLM as LlamaIndexMFSLLM

    serial_calls_before = load_engine.stats.generate_calls
    serial = [load_engine.decode([q], timeout=WAIT)[0].text for q in questions]
    serial_calls = load_engine.stats.generate_calls - serial_calls_before

    lc_llm = LangChainMFSLLM(engine=load_engine)
    lc_chat = ChatMFS(engine=load_engine)
    li_llm = LlamaIndexMFSLLM(engine=load_engine)
    answers: dict[int, str] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(33)  # 16 engine threads + 16 LangChain threads + the asyncio side

    def engine_caller(i):
        start.wait(timeout=WAIT)
        answers[i] = load_engine.decode([questions[i]], timeout=WAIT)[0].text

    def langchain_caller(i):
        start.wait(timeout=WAIT)
        answers[i] = lc_llm.invoke(questions[i])

    def guarded(target, i):
        try:
            target(i)
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(engine_caller, i)) for i in range(16)]
    threads += [threading.Thread(target=guarded, args=(langchain_caller, i)) for i in range(16, 32)]

    async def async_side():
        async def chat(i):
            answers[i] = (await lc_chat.ainvoke(questions[i])).text

        async def complete(i):
            answers[i] = (await li_llm.acomplete(questions[i])).text

        await asyncio.get_running_loop().run_in_executor(None, start.wait, WAIT)
        tasks = [chat(i) for i in range(32, 48)] + [complete(i) for i in range(48, 64)]
        results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), WAIT)
        errors.extend(r for r in results if isinstance(r, BaseException))

    calls_before = load_engine.stats.generate_calls
    for thread in threads:
        thread.start()
    asyncio.run(async_side())
    for thread in threads:
        thread.join(timeout=WAIT)
    concurrent_calls = load_engine.stats.generate_calls - calls_before

    assert not errors, errors[:3]
    assert sorted(answers) == list(range(64))
    mismatched = [i for i in range(64) if answers[i] != serial[i]]
    assert not mismatched, [(i, answers[i], serial[i]) for i in mismatched[:3]]
    assert concurrent_calls <= serial_calls / 8, (concurrent_calls, serial_calls)
