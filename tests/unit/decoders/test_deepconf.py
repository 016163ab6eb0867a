"""DeepConf online (``deepconf``) on a scripted backend, every number worked out by hand.

The scripted continuations carry per-token confidences (what a backend reports for a request
with ``top_logprobs``); a token count is the number of confidences.
"""

from __future__ import annotations

import pytest

from mfs_core.decoders import DECODERS, get_decoder
from mfs_core.decoders.common import decode_rng, request_seed
from mfs_core.engine import MFSEngine
from mfs_core.events import StepEvent, StopEvent
from mfs_core.settings import MFSSettings
from mfs_core.trace import format_trace
from tests.scripted import ScriptedBackend, continuation, drive

END = "<end_of_reasoning>"
PROMPT = "Q: what is 3 + 4?\nA:"
SETTINGS = {"deepconf_window": 2, "deepconf_warmup": 4, "deepconf_keep": 0.5, "deepconf_batch": 2,
            "deepconf_chunk_tokens": 2, "deepconf_max_traces": 8, "deepconf_consensus": 0.95, "deepconf_top_logprobs": 3}


def answer(value: str, confidences: list[float], logprob: float = -0.5):
    """A chunk that ends the trace at the end marker."""
    return continuation(f"\\boxed{{{value}}}", confidences=confidences, mean_logprob=logprob, stop_reason=END)


def more(text: str, confidences: list[float]):
    """A chunk cut by its token budget (the trace goes on)."""
    return continuation(text, confidences=confidences, mean_logprob=-1.0, finish_reason="length")


# Warm-up (w = 2): scores 2 (groups 2, 2), 3 (groups 4, 3, 3), 1 (one group), 4 (one token: one short group).
WARMUP = [answer("7", [3, 1, 3]), answer("7", [4, 4, 2, 4]), answer("5", [1, 1]), answer("9", [4])]
# The threshold keeps the top half: the 50th percentile of 1, 2, 3, 4 is s = 2.5; warm-ups 1 (7, 3.0) and 3 (9, 4.0) vote.


def run(queue: list[list], **settings: object):
    backend = ScriptedBackend(queue)
    config = MFSSettings.from_values({**SETTINGS, **settings})
    return drive(get_decoder("deepconf")(PROMPT, config), backend), backend, config


def full_run():
    return run([
        WARMUP,
        # round 1, chunk 1: traces A and B each write 2 tokens with confidences 3, 3 (group 3 >= 2.5)
        [more("step one ", [3, 3])], [more("so ", [3, 3])],
        # chunk 2: A's groups end at 3 and 4 with means 2.5 and 1.5 < 2.5: stopped; B answers 7, score 3
        [more("step two ", [2, 1])], [answer("7", [3])],
        # round 2: C answers 7 at once, score 5; D's first group (0.5 + 4) / 2 = 2.25 < 2.5: stopped
        [answer("7", [5, 5], logprob=-0.1)], [more("hmm ", [0.5, 4])],
    ])


def test_deepconf_is_registered() -> None:
    assert DECODERS["deepconf"] is get_decoder("deepconf")


def test_warm_up_threshold_early_stops_weighted_vote_and_budget() -> None:
    result, backend, _ = full_run()
    assert backend.remaining == 0
    # warm-up: one request for 4 traces to the end; then chunks of <= 2 tokens, one request per live trace
    assert [(r.n, r.max_tokens, r.top_logprobs) for r in backend.requests] == (
        [(4, 512, 3)] + [(1, 2, 3)] * 6)
    assert [r.prompt[len(PROMPT):] for r in backend.requests[1:]] == ["", "", "step one ", "so ", "", ""]
    assert [len(call) for call in backend.calls] == [1, 2, 2, 2]  # A stopped after chunk 2: no third chunk
    assert result.search_settings["threshold"] == pytest.approx(2.5)
    # kept: warm-ups (7, 3.0) and (9, 4.0), B (7, 3.0), C (7, 5.0); 7 holds 11 of 15
    assert result.completion_answers == ["7", "9", "7", "7"]
    assert result.completion_weights == pytest.approx([3.0, 4.0, 3.0, 5.0])
    assert result.answer == "7" and result.vote_share == pytest.approx(11 / 15)
    assert result.stop_reason == "max_traces"  # 8 traces sampled, β = 0.733 < 0.95
    # every token counts, the stopped traces' included: warm-up 3 + 4 + 2 + 1, A 4, B 3, C 2, D 2
    assert result.output_tokens == 10 + 4 + 3 + 2 + 2
    assert result.method == "deepconf" and len(result.steps) == 3


def test_the_trace_records_threshold_stops_and_consensus() -> None:
    result, _, config = full_run()
    warm, first, second = result.steps
    assert [(c.confidence, c.selected, c.pruned, c.answer) for c in warm.candidates] == [
        (2.0, False, False, "7"), (3.0, True, False, "7"), (1.0, False, False, "5"), (4.0, True, False, "9")]
    assert warm.note == ("warm-up: 4 traces scored 2.000, 3.000, 1.000, 4.000; threshold s = 2.500 keeps 2; their "
                         "votes 9 ×1 (4.000), 7 ×1 (3.000); leader 9 holds β = 0.571 of the weight < τ = 0.95: "
                         "sample 2 more")
    assert first.note.startswith("round 1: 2 traces in chunks of 2 tokens; 1 stopped under s = 2.500 (at 4 tokens), "
                                 "1 kept;")
    assert first.note.endswith("leader 7 holds β = 0.600 of the weight < τ = 0.95: sample 2 more")
    stopped, kept = first.candidates
    assert (stopped.pruned, stopped.finished, stopped.step_tokens, stopped.confidence) == (True, False, 4, 1.5)
    assert (kept.selected, kept.text, kept.step_tokens, kept.confidence) == (True, "so \\boxed{7}", 3, 3.0)
    assert second.note.endswith("leader 7 holds β = 0.733 of the weight < τ = 0.95; deepconf_max_traces = 8 "
                                "reached: stop")
    trace = format_trace(result, config)
    assert '"step one step two "                           no answer, logp/tok = -1.000, 4 tokens, conf = 1.500, stopped' in trace
    assert '"\\boxed{5}"                                    answer 5, logp/tok = -0.500, 2 tokens, conf = 1.000, discarded' in trace
    assert "answer 7, logp/tok = -0.833, 3 tokens, conf = 3.000" in trace  # B: (2 · -1.0 + 1 · -0.5) / 3 tokens


def test_consensus_stops_after_the_warm_up() -> None:
    unanimous = [answer("7", [3, 3]), answer("7", [2, 2]), answer("7", [4, 4]), answer("8", [1, 1])]
    result, backend, _ = run([unanimous])
    # s = 50th percentile of 3, 2, 4, 1 = 2.5: the 7s scored 3 and 4 vote, β = 1
    assert len(backend.requests) == 1
    assert result.stop_reason == "consensus" and result.answer == "7" and result.vote_share == 1.0
    assert result.completion_weights == pytest.approx([3.0, 4.0])
    assert result.steps[0].converged


def test_consensus_stops_after_a_round() -> None:
    result, backend, _ = run([WARMUP, [answer("7", [9, 9])], [answer("7", [8, 8])]], deepconf_consensus=0.75)
    # kept 7: 3 + 9 + 8 = 20, 9: 4; β = 20/24 = 0.833 >= 0.75 after round 1
    assert [len(call) for call in backend.calls] == [1, 2]
    assert result.stop_reason == "consensus" and result.answer == "7"
    assert result.vote_share == pytest.approx(20 / 24)


def test_a_finished_trace_shorter_than_a_group_is_discarded_below_the_threshold() -> None:
    # deepconf/wrapper.py:250-252: never stopped online, but its score (one group, 1.0) is under s = 2.5
    result, _, _ = run([WARMUP, [answer("5", [1])], [answer("7", [9, 9])]], deepconf_max_traces=6)
    first = result.steps[1]
    assert [(c.answer, c.selected, c.pruned, c.finished) for c in first.candidates] == [
        ("5", False, False, True), ("7", True, False, True)]
    assert "5" not in result.completion_answers
    assert result.stop_reason == "max_traces"


def test_seeds_come_from_the_decode_generator_in_request_order() -> None:
    _, backend, config = full_run()
    rng = decode_rng(config, PROMPT)
    assert [r.seed for r in backend.requests] == [request_seed(rng) for _ in range(7)]


def test_an_end_marker_split_across_chunks_ends_the_trace() -> None:
    result, backend, _ = run([WARMUP, [more("\\boxed{7} <end_of", [3, 3])], [answer("7", [9, 9])],
                              [more("_reasoning> more", [3, 3])]], deepconf_max_traces=6)
    assert [len(call) for call in backend.calls] == [1, 2, 1]
    assert result.steps[1].candidates[0].text == "\\boxed{7} "
    assert result.output_tokens == 10 + 4 + 2


def test_a_backend_without_token_confidences_gets_a_one_line_error() -> None:
    plain = [continuation("\\boxed{7}", num_tokens=3, stop_reason=END)] * 4
    with pytest.raises(ValueError, match=r"^method 'deepconf' needs the top-3 log-probs of every sampled token "
                                         r"\(GenerationRequest.top_logprobs\); the backend reported 0 token "
                                         r"confidences for 3 tokens"):
        run([plain])


def test_the_engine_streams_one_step_per_round() -> None:
    backend = ScriptedBackend([[answer("7", [3, 3]), answer("7", [2, 2]), answer("7", [4, 4]), answer("8", [1, 1])]])
    engine = MFSEngine(backend, MFSSettings.from_values({**SETTINGS, "prompt_format": "raw"}))
    events = []
    engine.decode([PROMPT], method="deepconf", on_event=events.append)
    assert [type(e) for e in events] == [StepEvent, StopEvent]
    assert events[0].to_dict()["note"].startswith("warm-up: 4 traces scored 3.000, 2.000, 4.000, 1.000;")
