"""The answer trigger: a completed path that states no answer is asked for one (Kojima et al., 2022)."""

from __future__ import annotations

import json

import pytest

from mfs_core import MFSEngine, MFSSettings
from mfs_core.answers import OptionAnswer, extract_answer
from mfs_core.grammar import choice_grammar
from tests.scripted import ScriptedBackend, continuation

END = "<end_of_reasoning>"
TRIGGER = "\nThe answer is:"


def _script(request):
    if request.prompt.endswith(TRIGGER):  # the trigger's request: what follows it
        return [continuation(" \\boxed{7}.", logprobs=[-0.5] * 3, stop_reason="\n")]
    if request.stop == ("\n", END):  # a step
        return [continuation(f"step {k}", logprobs=[-0.1 * (k + 1)] * 2, stop_reason="\n") for k in range(request.n)]
    # a completion or rollout that loops to the cap without an answer, except after "step 0"
    if request.prompt.endswith("step 0\n"):
        return [continuation("The answer is: \\boxed{3}.", logprobs=[-0.2] * 4, stop_reason=END)] * request.n
    return [continuation("3 + 4 = 7 and 3 + 4 = 7", logprobs=[-0.3] * 4, finish_reason="length")] * request.n


def test_cot_reads_the_answer_after_the_trigger():
    backend = ScriptedBackend(_script)
    settings = MFSSettings(prompt_format="raw", answer_trigger=TRIGGER, answer_trigger_tokens=8)
    result = MFSEngine(backend, settings).decode(["Q:"], method="cot")[0]
    assert result.text == "3 + 4 = 7 and 3 + 4 = 7\nThe answer is: \\boxed{7}."
    assert (result.answer, result.completion_triggered) == ("7", [True])
    (request,) = backend.calls[1]
    assert request.prompt == "Q:3 + 4 = 7 and 3 + 4 = 7" + TRIGGER
    assert (request.greedy, request.max_tokens, request.stop) == (True, 8, ("\n", END))
    assert result.output_tokens == 4 + 3  # the trigger's tokens are counted


def test_off_by_default_and_no_request_when_every_path_answers():
    backend = ScriptedBackend(_script)
    result = MFSEngine(backend, MFSSettings(prompt_format="raw")).decode(["Q:"], method="cot")[0]
    assert (result.answer, result.completion_triggered, backend.num_calls) == (None, [], 1)  # no answer stated, none asked for
    answered = ScriptedBackend(lambda r: [continuation("The answer is: \\boxed{5}.", stop_reason=END)] * r.n)
    settings = MFSSettings(prompt_format="raw", answer_trigger=TRIGGER)
    result = MFSEngine(answered, settings).decode(["Q:"], method="sc")[0]
    assert result.completion_triggered == [False] * settings.num_samples and answered.num_calls == 1


def test_mfs_searches_the_same_with_the_trigger_and_only_asks_the_silent_paths():
    base = dict(prompt_format="raw", step_beam_size=2, num_rollouts=2, max_steps=1, width_pruning=False, seed=3)
    off = MFSEngine(ScriptedBackend(_script), MFSSettings(**base)).decode(["Q:"])[0]
    backend = ScriptedBackend(_script)
    on = MFSEngine(backend, MFSSettings(**base, answer_trigger=TRIGGER)).decode(["Q:"])[0]
    assert [c.text for c in on.steps[0].candidates] == [c.text for c in off.steps[0].candidates]
    assert [c.selected for c in on.steps[0].candidates] == [c.selected for c in off.steps[0].candidates]
    for before, after, asked in zip(off.completions, on.completions, on.completion_triggered):
        assert after == (before + TRIGGER + " \\boxed{7}." if asked else before)
        assert asked == ("boxed" not in before)
    assert any(on.completion_triggered) and all(a is not None for a in on.completion_answers)
    assert [r.prompt.endswith(TRIGGER) for r in backend.calls[-1]] == [True] * sum(on.completion_triggered)


# --- a multiple-choice question: the answer key reads option labels, the trigger keeps to them ---

QUESTION = "Which is warmer?\n(A) ice\n(B) hot tea\n(C) snow"


def _mc_script(request):
    if request.prompt.endswith(TRIGGER):  # the trigger's request: the model names an option
        return [continuation(" B", logprobs=[-0.4], stop_reason=END)]
    # says a temperature: a number the plain extraction reads, but no option
    return [continuation("Tea is hot.\nThe answer is: 80 degrees", logprobs=[-0.3] * 5, stop_reason=END)] * request.n


def test_option_answer_reads_labels_and_option_texts():
    key = OptionAnswer.from_question(QUESTION)
    assert key.answer_choices == ("A", "B", "C")
    assert key("The answer is: (C)") == "C"
    assert key("So the answer is: hot tea.") == "B"  # the option's text gives its label
    assert key("The answer is: 80 degrees") is None and extract_answer("The answer is: 80 degrees") == "80"
    assert OptionAnswer.from_question("Tom has 3 apples.\n1. He buys 4.") is None  # one labelled line: no options
    with pytest.raises(ValueError, match=r"options must have at least two labels, each one of A-J or 1-9, got \['A'\]"):
        OptionAnswer({"A": "ice"})
    with pytest.raises(ValueError, match=r"got \['A', 'K'\]"):
        OptionAnswer({"A": "ice", "K": "tea"})


def test_a_multiple_choice_trigger_asks_paths_without_an_option_and_keeps_to_the_labels():
    backend = ScriptedBackend(_mc_script)
    settings = MFSSettings(prompt_format="raw", answer_trigger=TRIGGER, answer_trigger_tokens=4)
    key = OptionAnswer.from_question(QUESTION)
    result = MFSEngine(backend, settings).decode_prompts(["Q:"], method="cot", answer_key=key)[0]
    assert result.text == "Tea is hot.\nThe answer is: 80 degrees" + TRIGGER + " B"
    assert (result.answer, result.completion_triggered) == ("B", [True])
    (request,) = backend.calls[1]
    grammar = json.loads(request.grammar.structural_tag)
    assert grammar == {"type": "structural_tag", "format": {"type": "or", "elements": [
        {"type": "const_string", "value": " A"}, {"type": "const_string", "value": " B"},
        {"type": "const_string", "value": " C"}]}}
    assert request.grammar.remote == request.grammar.structural_tag and request.grammar.prefix == ""
    # without the key the same path reads "80" and is not asked
    plain = MFSEngine(ScriptedBackend(_mc_script), settings).decode_prompts(["Q:"], method="cot")[0]
    assert (plain.answer, plain.completion_triggered) == ("80", [False])


def test_a_trigger_ending_in_a_space_gets_bare_labels():
    assert choice_grammar(["A", "B"]).structural_tag == (
        '{"type":"structural_tag","format":{"type":"or","elements":[{"type":"const_string","value":"A"},'
        '{"type":"const_string","value":"B"}]}}')
    backend = ScriptedBackend(_mc_script)
    settings = MFSSettings(prompt_format="raw", answer_trigger="\nAnswer: ", answer_trigger_tokens=4)
    MFSEngine(backend, settings).decode_prompts(["Q:"], method="cot", answer_key=OptionAnswer({"A": "x", "B": "y"}))
    elements = json.loads(backend.calls[1][0].grammar.structural_tag)["format"]["elements"]
    assert [e["value"] for e in elements] == ["A", "B"]
    with pytest.raises(ValueError, match=r"choices must be non-empty strings, at least one, got \[\]"):
        choice_grammar([])


def test_phi_and_sc_take_an_option_key_per_prompt_and_phi_refuses_an_action_vote():
    settings = MFSSettings(prompt_format="raw", answer_trigger=TRIGGER, step_beam_size=2, num_rollouts=2, max_steps=1)
    engine = MFSEngine(ScriptedBackend(_mc_script), settings)
    key = OptionAnswer.from_question(QUESTION)
    phi, plain = engine.decode_prompts(["Q:", "Q:"], method="phi", answer_key=[key, None])
    assert phi.answer == "B" and all(phi.completion_triggered) and phi.completion_answers == ["B", "B"]
    assert plain.answer == "80" and not any(plain.completion_triggered)
    [sc] = engine.decode_prompts(["Q:"], method="sc", answer_key=[key])
    assert (sc.answer, sc.vote_share) == ("B", 1.0)
    with pytest.raises(ValueError, match=r"answer_key must be one key or one per prompt \(2\), got 1"):
        engine.submit_prompts(["Q:", "Q:"], method="sc", answer_key=[key])
    with pytest.raises(ValueError, match=r"decoder 'phi' cannot vote over actions \(it chooses its completion without a vote\)"):
        engine.submit_prompts(["Q:"], method="phi", answer_key=extract_answer)
