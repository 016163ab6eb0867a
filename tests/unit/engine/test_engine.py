"""The engine: lockstep batching, isolation of failures, errors that name the value."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from mfs_core import MFSEngine
from mfs_core.errors import ContextWindowError
from tests.engine_decodes import QUESTIONS, SETTINGS, comparable
from tests.scripted import ScriptedBackend, synthetic_model


def test_eight_decoders_in_lockstep_cost_as_many_calls_as_the_longest_alone():
    alone_results, alone_calls = [], []
    for question in QUESTIONS:
        backend = synthetic_model()
        alone_results.append(MFSEngine(backend, SETTINGS).decode([question])[0])
        alone_calls.append(backend.num_calls)
    assert len(set(alone_calls)) > 1, "the scenario should have decodes of different lengths"
    backend = synthetic_model()
    together = MFSEngine(backend, SETTINGS).decode(QUESTIONS)
    assert backend.num_calls == max(alone_calls)
    assert [comparable(r) for r in together] == [comparable(r) for r in alone_results]


def test_async_callers_are_batched_together():
    backend = synthetic_model()
    engine = MFSEngine(backend, SETTINGS)

    async def main():
        return await asyncio.gather(*(engine.adecode([q]) for q in QUESTIONS))

    results = asyncio.run(main())
    assert len(results) == 8 and all(r[0].answer is not None for r in results)
    # Eight separate callers, far fewer calls than eight sequential decodes would make.
    sequential = 0
    for question in QUESTIONS:
        solo = synthetic_model()
        MFSEngine(solo, SETTINGS).decode([question])
        sequential += solo.num_calls
    assert backend.num_calls < sequential / 2


def test_flops_are_six_n_p():
    backend = synthetic_model(num_parameters=12345)
    result = MFSEngine(backend, SETTINGS).decode(["q"])[0]
    assert result.flops == 6 * result.output_tokens * 12345
    assert result.output_tokens > 0


@pytest.mark.parametrize("bad", ["", "   ", "\n\t"])
def test_empty_or_blank_questions_are_rejected_and_the_engine_goes_on(bad):
    engine = MFSEngine(synthetic_model(), SETTINGS)
    with pytest.raises(ValueError, match="must not be empty or whitespace only, got " + repr(bad).replace("\\", "\\\\")):
        engine.decode([bad])
    with pytest.raises(ValueError, match=r"questions must not be empty, got \[\]"):
        engine.decode([])
    assert engine.decode(["fine question"])[0].answer is not None


def test_non_string_question_is_rejected():
    engine = MFSEngine(synthetic_model(), SETTINGS)
    with pytest.raises(TypeError, match="must be a string, got int"):
        engine.decode([42])
    with pytest.raises(TypeError, match="single string"):
        engine.decode("not a list")


@pytest.mark.parametrize(
    ("field", "value"), [("step_beam_size", 0), ("num_rollouts", 0), ("prune_lambda", -1.0), ("temperature", 0.0)]
)
def test_bad_settings_name_the_value_and_the_engine_goes_on(field, value):
    engine = MFSEngine(synthetic_model(), SETTINGS)
    with pytest.raises(ValidationError) as info:
        engine.with_settings(**{field: value})
    assert field in str(info.value) and str(value) in str(info.value)
    assert engine.decode(["after a bad setting"])[0].answer is not None


def test_a_failing_decode_fails_alone():
    # The scripted model rejects one prompt the way a backend rejects an over-long prompt.
    inner = synthetic_model()

    def generate(requests):
        if any("too long" in r.prompt for r in requests):
            inner.calls.append(list(requests))
            raise ContextWindowError("prompt 0 has 9999 tokens, which does not fit the context window of 4096 tokens")
        return ScriptedBackend.generate(inner, requests)

    inner.generate = generate
    engine = MFSEngine(inner, SETTINGS)
    futures = engine.submit_prompts(["ok one", "too long prompt", "ok two"])
    with pytest.raises(ContextWindowError, match="9999 tokens"):
        futures[1].result(timeout=30)
    assert futures[0].result(timeout=30).answer is not None
    assert futures[2].result(timeout=30).answer is not None
    assert engine.decode(["next request"])[0].answer is not None


def test_unknown_method_is_rejected():
    engine = MFSEngine(synthetic_model(), SETTINGS)
    with pytest.raises(ValueError, match="unknown decoding method 'beam'"):
        engine.decode(["q"], method="beam")


def test_a_cancelled_caller_does_not_take_down_the_worker():
    import threading

    gate = threading.Event()
    inner = synthetic_model()

    def generate(requests):
        gate.wait(timeout=30)
        return ScriptedBackend.generate(inner, requests)

    inner.generate = generate
    engine = MFSEngine(inner, SETTINGS)

    async def cancel_one():
        task = asyncio.ensure_future(engine.adecode(["cancelled question"]))
        await asyncio.sleep(0.05)
        task.cancel()
        gate.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_one())
    assert engine.decode(["next question"])[0].answer is not None
