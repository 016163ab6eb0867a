"""Early-stopping self-consistency (``esc``) on a scripted backend: windows, stops, vote, seeds, trace."""

from __future__ import annotations

import pytest

from mfs_core.decoders import DECODERS, get_decoder
from mfs_core.decoders.common import decode_rng, request_seed
from mfs_core.engine import MFSEngine
from mfs_core.events import StepEvent, StopEvent
from mfs_core.settings import MFSSettings
from mfs_core.streaming import ReasoningText
from mfs_core.trace import format_trace
from tests.scripted import ScriptedBackend, continuation, drive

END = "<end_of_reasoning>"
PROMPT = "Q: what is 3 + 4?\nA:"


def window(*answers: str | None, tokens: int = 5, logprob: float = -0.5) -> list:
    """One window's samples: ``tokens`` tokens each, the answer boxed (or none)."""
    return [continuation(f"so \\boxed{{{a}}}" if a is not None else "I am not sure", mean_logprob=logprob,
                         num_tokens=tokens, stop_reason=END) for a in answers]


def run(windows: list[list], **settings: object):
    backend = ScriptedBackend(windows)
    config = MFSSettings.from_values({"esc_window": 4, "esc_max_samples": 16, **settings})
    return drive(get_decoder("esc")(PROMPT, config), backend), backend, config


def test_esc_is_registered() -> None:
    assert DECODERS["esc"] is get_decoder("esc")


def test_it_stops_after_the_first_unanimous_window() -> None:
    result, backend, _ = run([window("7", "7", "8", "7"), window("7", "7", "7", "7"), window("9", "9", "9", "9")])
    assert [r.n for r in backend.requests] == [4, 4]  # the third window is never asked for
    assert backend.remaining == 1
    assert result.stop_reason == "unanimous_window"
    assert result.answer == "7" and result.vote_share == pytest.approx(7 / 8)
    assert len(result.completions) == 8 and result.output_tokens == 8 * 5
    assert [s.converged for s in result.steps] == [False, True]
    assert result.method == "esc"
    assert result.search_settings["esc_window"] == 4


def test_it_runs_to_the_maximum_and_the_last_window_takes_what_is_left() -> None:
    result, backend, _ = run([window("1", "2", "1", "1"), window("2", "2", "3", "2", logprob=-0.2), window("1", "4")],
                             esc_max_samples=10)
    assert [r.n for r in backend.requests] == [4, 4, 2]
    assert result.stop_reason == "max_samples"
    # 1 ×4 and 2 ×4: the tie goes to the answer with the highest mean log-prob (-0.2 against -0.5)
    assert result.answer == "2" and result.vote_share == pytest.approx(4 / 10)
    assert result.text == "so \\boxed{2}"
    assert result.output_tokens == 10 * 5


def test_the_vote_is_over_every_sample_not_the_unanimous_window() -> None:
    # 8 ×6 before the unanimous window of 7 ×4: the authors' script would answer 7, the paper's vote 8.
    result, backend, _ = run([window("8", "8", "8", "7"), window("8", "8", "8", "9"), window("7", "7", "7", "7")])
    assert len(backend.requests) == 3 and result.stop_reason == "unanimous_window"
    assert result.answer == "8" and result.vote_share == pytest.approx(6 / 12)
    assert result.completion_answers.count("7") == 5


def test_no_answer_is_one_value_for_unanimity_and_none_in_the_vote() -> None:
    # A window with no answer anywhere is unanimous (as the script's -1000 placeholder) and stops.
    result, backend, _ = run([window("7", None, "7", "7"), window(None, None, None, None)])
    assert len(backend.requests) == 2 and result.stop_reason == "unanimous_window"
    assert result.answer == "7" and result.vote_share == pytest.approx(3 / 8)  # no-answer samples vote for nothing
    assert "(no answer) ×1" in result.steps[0].note and "not unanimous" in result.steps[0].note


def test_each_window_has_its_own_seed_from_the_decode_generator() -> None:
    _, backend, config = run([window("1", "2", "1", "1"), window("2", "2", "3", "2"), window("5", "5", "5", "5")])
    rng = decode_rng(config, PROMPT)
    assert [r.seed for r in backend.requests] == [request_seed(rng) for _ in range(3)]
    assert len({r.seed for r in backend.requests}) == 3
    request = backend.requests[0]
    assert (request.temperature, request.top_p, request.max_tokens, request.stop, request.top_logprobs) == (
        config.temperature, config.top_p, config.max_answer_tokens, (END,), 0)
    # the first window draws the seed self-consistency draws: the same first samples on any backend
    sc = ScriptedBackend([window(*"1211")])
    drive(get_decoder("sc")(PROMPT, config.model_copy(update={"num_samples": 4})), sc)
    assert sc.requests[0].seed == backend.requests[0].seed


def test_the_trace_notes_each_window_and_the_engine_streams_it() -> None:
    backend = ScriptedBackend([window("7", "7", "8", "7"), window("7", "7", "7", "7")])
    engine = MFSEngine(backend, MFSSettings.from_values({"esc_window": 4, "prompt_format": "raw"}))
    events = []
    result = engine.decode([PROMPT], method="esc", on_event=events.append)[0]
    assert [type(e) for e in events] == [StepEvent, StepEvent, StopEvent]
    assert events[0].step.note == "window 1: 4 sampled, answers 7 ×3, 8 ×1; not unanimous: sample 4 more"
    assert events[1].step.note == "window 2: 4 sampled, answers 7 ×4; unanimous: stop"
    assert events[1].output_tokens == 40
    reasoning = ReasoningText()
    text = "".join(reasoning.delta(e) for e in events)
    assert text.startswith("[step 0: window 1: 4 sampled, answers 7 ×3, 8 ×1; not unanimous: sample 4 more; 20 tokens]\n")
    assert "[stop: unanimous_window after 2 steps; answer 7 (7 of 8 paths, 88%); 40 tokens;" in text
    trace = format_trace(result, engine.settings)
    assert "step 1: window 2: 4 sampled, answers 7 ×4; unanimous: stop" in trace
    assert '   *  ×4 "so \\boxed{7}"' in trace and "answer 7, logp/tok = -0.500, 5 tokens" in trace
