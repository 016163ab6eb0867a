"""Decode events: what the engine reports per step and at the stop, on whose thread, at what cost."""

from __future__ import annotations

import asyncio
import threading

import pytest

from mfs_core import MFSEngine, MFSSettings
from mfs_core.events import StepEvent, StopEvent, committed_prefix, step_summary, stop_summary
from mfs_core.streaming import ReasoningText
from mfs_core.types import Candidate, DecodeResult, StepTrace
from tests.engine_decodes import QUESTIONS, SETTINGS, comparable
from tests.scripted import ScriptedBackend, synthetic_model


def test_listeners_change_neither_the_backend_calls_nor_the_results():
    quiet = synthetic_model()
    plain = MFSEngine(quiet, SETTINGS).decode(QUESTIONS)
    listened = synthetic_model()
    events = []
    results = MFSEngine(listened, SETTINGS).decode(QUESTIONS, on_event=events.append)
    assert listened.num_calls == quiet.num_calls
    assert [len(batch) for batch in listened.calls] == [len(batch) for batch in quiet.calls]
    assert [comparable(r) for r in results] == [comparable(r) for r in plain]
    # Per decode: one StepEvent per traced step, in order and equal to the trace, then the stop.
    for index, result in enumerate(results):
        mine = [e for e in events if e.index == index]
        assert [type(e) for e in mine] == [StepEvent] * len(result.steps) + [StopEvent]
        assert [e.step for e in mine[:-1]] == result.steps
        assert mine[-1].result is result
        tokens = [e.output_tokens for e in mine[:-1]]
        assert tokens == sorted(tokens) and 0 < tokens[-1] <= result.output_tokens
        assert all(e.stop_epsilon == SETTINGS.stop_epsilon for e in mine[:-1])


def test_beams_of_each_step_are_the_selected_candidates_of_the_one_before():
    events = []
    MFSEngine(synthetic_model(), SETTINGS).decode(QUESTIONS[:3], on_event=events.append)
    for index in range(3):
        steps = [e for e in events if e.index == index and isinstance(e, StepEvent)]
        previous = [""]
        for event in steps:
            sources = [event.step.candidates[k] for k in event.step.beam_sources]
            assert all(c.selected and not c.finished for c in sources)
            expected = [previous[c.beam_index] + c.text + "\n" for c in sources]
            if event.step.converged and not sources:  # parent_beams: the step's candidates are dropped
                expected = previous
            assert list(event.beams) == expected
            assert all(beam.startswith(event.committed) for beam in event.beams)
            previous = list(event.beams) or previous
        committed = [e.committed for e in steps]
        assert all(later.startswith(earlier) for earlier, later in zip(committed, committed[1:]))


def test_decode_delivers_events_on_the_calling_thread_and_adecode_on_the_loop():
    threads = set()
    MFSEngine(synthetic_model(), SETTINGS).decode(QUESTIONS[:2], on_event=lambda e: threads.add(threading.get_ident()))
    assert threads == {threading.get_ident()}

    async def main():
        loop_thread = threading.get_ident()
        seen = []
        results = await MFSEngine(synthetic_model(), SETTINGS).adecode(
            QUESTIONS[:2], on_event=lambda e: seen.append((threading.get_ident(), type(e)))
        )
        return loop_thread, seen, results

    loop_thread, seen, results = asyncio.run(main())
    assert {thread for thread, _ in seen} == {loop_thread}
    assert [kind for _, kind in seen].count(StopEvent) == 2
    assert sum(kind is StepEvent for _, kind in seen) == sum(len(r.steps) for r in results)


def test_stream_prompts_async_yields_steps_then_the_stop():
    engine = MFSEngine(synthetic_model(), SETTINGS)

    async def main():
        return [event async for event in engine.stream_prompts([engine.render(QUESTIONS[0])]).aevents()]

    events = asyncio.run(main())
    assert isinstance(events[-1], StopEvent) and all(isinstance(e, StepEvent) for e in events[:-1])
    assert [e.step.step for e in events[:-1]] == list(range(len(events) - 1))
    plain = MFSEngine(synthetic_model(), SETTINGS).decode([QUESTIONS[0]])[0]
    assert comparable(events[-1].result) == comparable(plain)


def test_a_raising_listener_fails_no_decode():
    def bad(event):
        raise RuntimeError("listener bug")

    engine = MFSEngine(synthetic_model(), SETTINGS)
    futures = engine.submit_prompts([engine.render(q) for q in QUESTIONS[:2]], on_event=bad)
    results = [f.result(timeout=30) for f in futures]
    plain = MFSEngine(synthetic_model(), SETTINGS).decode(QUESTIONS[:2])
    assert [comparable(r) for r in results] == [comparable(r) for r in plain]


def test_a_failed_decode_ends_its_stream_with_its_exception_after_its_steps():
    model = synthetic_model()

    def crashes_at_the_third_round(request):
        if len(backend.calls) >= 3:
            raise RuntimeError("model crashed")
        return model._script(request)

    backend = ScriptedBackend(crashes_at_the_third_round)
    stream = MFSEngine(backend, SETTINGS).stream_prompts(["a question"])
    events = []
    with pytest.raises(RuntimeError, match="model crashed"):
        for event in stream:
            events.append(event)
    assert [type(e) for e in events] == [StepEvent]  # step 0 (two rounds) finished, then the crash


def test_stream_times_out_naming_the_timeout():
    release = threading.Event()

    def slow(request):
        release.wait(10)
        return synthetic_model()._script(request)

    engine = MFSEngine(ScriptedBackend(slow), SETTINGS)
    stream = engine.stream_prompts(["a question"])
    with pytest.raises(TimeoutError, match=r"timeout=0.05 s"):
        list(stream.events(timeout=0.05))
    release.set()
    assert stream.results()[0].answer is not None


def test_committed_prefix_cuts_at_the_last_shared_step():
    assert committed_prefix(["A.\nB.\nC", "A.\nB.\nD"], "\n") == "A.\nB.\n"
    assert committed_prefix(["A.\nBx.\n", "A.\nBy.\n"], "\n") == "A.\n"
    assert committed_prefix(["Ax.\n", "Ay.\n"], "\n") == ""
    assert committed_prefix(["A.\n"], "\n") == "A.\n"
    assert committed_prefix([], "\n") == ""
    assert committed_prefix(["a||b||", "a||c||"], "||") == "a||"


def _event(step: int, committed: str, *, max_v: float | None, beams: int, tokens: int) -> StepEvent:
    candidates = [
        Candidate(beam_index=0, text="x", step_logprob=-0.5, step_tokens=2, pruned=True),
        Candidate(beam_index=0, text="y", step_logprob=-0.1, step_tokens=2, foresight_quality=-0.2,
                  step_value=max_v, selected=True),
        Candidate(beam_index=0, text="z", step_logprob=-0.1, step_tokens=2, finished=True, selected=True),
    ]
    trace = StepTrace(step=step, candidates=candidates, max_step_value=max_v, stop_epsilon=0.01)
    return StepEvent(index=0, step=trace, beams=("b",) * beams, committed=committed, prompt_tokens=10,
                     output_tokens=tokens, elapsed_seconds=0.1)


def test_step_and_stop_summaries_state_the_numbers():
    event = _event(1, "", max_v=0.084, beams=4, tokens=412)
    assert step_summary(event) == (
        "step 1: 3 sampled, 1 finished, 1 pruned, 1 rolled out, 4 beams; max V +0.084 > ε_stop 0.01; 412 tokens"
    )
    assert "max V +0.005 <= ε_stop 0.01" in step_summary(_event(2, "", max_v=0.005, beams=1, tokens=1))
    result = DecodeResult(text="t", answer="7", vote_share=0.75, stop_reason="converged", prompt_tokens=5,
                          output_tokens=812, flops=0.0, steps=[StepTrace(step=0)] * 3, completions=["a"] * 4,
                          completion_answers=["7", "7", "7", "3"])
    stop = StopEvent(index=0, result=result, elapsed_seconds=0.41)
    assert stop_summary(stop) == "stop: converged after 3 steps; answer 7 (3 of 4 paths, 75%); 812 tokens; 0.41 s"


def test_reasoning_text_shows_each_committed_step_once():
    reasoning = ReasoningText()
    first = reasoning.delta(_event(0, "", max_v=0.5, beams=2, tokens=10))
    second = reasoning.delta(_event(1, "A.\n", max_v=0.5, beams=2, tokens=20))
    third = reasoning.delta(_event(2, "A.\nB.\n", max_v=0.5, beams=2, tokens=30))
    assert first.startswith("[step 0: ") and first.endswith("]\n")
    assert second.endswith("]\nA.\n") and third.endswith("]\nB.\n")
    assert reasoning.text == first + second + third
    assert reasoning.text.count("A.\n") == 1
