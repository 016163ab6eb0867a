"""The answer trigger: a completed path that states no answer is asked for one (Kojima et al., 2022)."""

from __future__ import annotations

from mfs_core import MFSEngine, MFSSettings
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
    assert result.completion_triggered == [False] * settings.step_beam_size and answered.num_calls == 1


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
