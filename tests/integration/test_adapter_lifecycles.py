"""Adapters let their engines go: a dropped ``ChatMFS`` or ``MFSLLM`` closes the
engines it made, so the shared backend registry empties and the model unloads; ``close()`` and
``with`` do the same at once; an injected engine is never closed by the adapter.

Before: 20 ``ChatMFS`` with distinct ``batch_size`` (a backend setting), each invoked once and
deleted, left 20 transformers backends alive after ``gc.collect()``.
"""

from __future__ import annotations

import gc
import resource

import pytest

from mfs_core.call import adapter_arguments
from mfs_core import MFSEngine, MFSSettings
from mfs_core.engine import registry

pytestmark = pytest.mark.slow

TINY = {"device": "cpu", "step_beam_size": 1, "num_rollouts": 1, "max_steps": 1, "max_step_tokens": 8,
        "max_answer_tokens": 8, "seed": 0}
QUESTION = "Tom has 3 apples. Then Tom buys 4 more apples. How many apples does Tom have now?"


def _live_backends() -> int:
    with registry.LOCK:
        return len(registry.SCHEDULERS)


def _rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() / 2**20


def test_twenty_dropped_chat_models_leave_one_backend_alive() -> None:
    from langchain_mfs import ChatMFS

    warm = ChatMFS(**adapter_arguments({**TINY, "batch_size": 99}))  # torch, transformers and the tokenizer imported and loaded once
    assert warm.invoke(QUESTION).content
    del warm
    gc.collect()
    before, rss_before = _live_backends(), _rss_mib()
    kept = None
    for batch_size in range(100, 120):  # 20 distinct backend settings: 20 backends loaded in turn
        chat = ChatMFS(**adapter_arguments({**TINY, "batch_size": batch_size}))
        assert chat.invoke(QUESTION).content
        kept = chat  # the previous one is dropped here
    gc.collect()
    rss_after = _rss_mib()
    print(f"\nbackends alive: {before} before, {_live_backends()} after; RSS {rss_before:.0f} -> {rss_after:.0f} MiB")
    assert _live_backends() == before + 1  # the last model's only
    assert rss_after - rss_before < 150  # measured 2026-11-26: +16 MiB closed, +171 without
    kept.close()
    assert _live_backends() == before
    assert kept.invoke(QUESTION).content  # a closed model makes a new engine on its next call
    kept.close()
    assert _live_backends() == before


def test_an_llamaindex_llm_closes_its_engines_including_a_calls_other_backend() -> None:
    from llamaindex_mfs import MFSLLM

    gc.collect()
    before = _live_backends()
    with MFSLLM(**adapter_arguments({**TINY, "batch_size": 13})) as llm:  # a backend setting no other test's engine shares
        assert llm.complete(QUESTION).text
        assert llm.complete(QUESTION, batch_size=7).text  # another backend setting: a second engine it owns
        assert _live_backends() == before + 2
    assert _live_backends() == before and llm.engine.closed
    other = MFSLLM(**adapter_arguments({**TINY, "batch_size": 9}))
    assert _live_backends() == before + 1
    del other
    gc.collect()
    assert _live_backends() == before


def test_an_injected_engine_stays_open() -> None:
    from langchain_mfs import ChatMFS
    from llamaindex_mfs import MFSLLM

    engine = MFSEngine.from_settings(MFSSettings(**TINY))
    try:
        chat, llm = ChatMFS(engine=engine), MFSLLM(engine=engine)
        assert chat.invoke(QUESTION).content and llm.complete(QUESTION).text
        chat.close()
        llm.close()
        del chat, llm
        gc.collect()
        assert not engine.closed and engine.decode([QUESTION])[0].text
    finally:
        engine.close()
