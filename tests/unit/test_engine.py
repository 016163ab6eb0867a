"""The engine: lockstep batching, isolation of failures, errors that name the value."""

from __future__ import annotations

import asyncio
import zlib

import pytest
from pydantic import ValidationError

from mfs_core import MFSEngine, MFSSettings
from mfs_core.backends.base import ContextWindowError
from tests.scripted import ScriptedBackend, continuation

END = "<end_of_reasoning>"


def _unit(*parts: object) -> float:
    """A deterministic number in [0, 1) from the parts (a stand-in for a model's randomness)."""
    return zlib.crc32(repr(parts).encode()) / 2**32


def synthetic_model(**kwargs) -> ScriptedBackend:
    """A scripted 'model' whose outputs depend only on the request (prompt, seed, sample).

    Step requests answer a short step (or the final answer once the path has 3 lines);
    rollouts answer a number derived from the prompt. Different questions take different
    numbers of steps, so decodes end at different rounds.
    """

    def script(request):
        conts = []
        for i in range(request.n):
            u = _unit(request.prompt, request.seed, i)
            lp = -0.05 - u
            if request.stop == (END,):
                answer = int(_unit(request.prompt) * 3)
                conts.append(continuation(f"The answer is: \\boxed{{{answer}}}.", logprobs=[lp] * 3, stop_reason=END))
            elif request.prompt.count("\n") >= 2 + int(_unit(request.prompt.split("\n")[0]) * 4):
                conts.append(continuation("The answer is: \\boxed{9}.", logprobs=[lp] * 2, stop_reason=END))
            else:
                conts.append(continuation(f"x{int(u * 5)}", logprobs=[lp] * 2, stop_reason="\n"))
        return conts

    return ScriptedBackend(script, **kwargs)


QUESTIONS = [f"question {i}: how many?" for i in range(8)]
SETTINGS = MFSSettings(prompt_format="raw", step_beam_size=2, num_rollouts=3, max_steps=6, prune_lambda=0.0)


def _comparable(result):
    data = result.to_dict()
    data.pop("wall_seconds")
    return data


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
    assert [_comparable(r) for r in together] == [_comparable(r) for r in alone_results]


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
