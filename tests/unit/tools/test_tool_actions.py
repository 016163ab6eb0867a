"""The vote over actions (mfs_core.tools.actions) and its use by the decoders, on a scripted backend."""

from __future__ import annotations

import pytest

from mfs_core.decoders.mfs import decode_mfs
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings
from mfs_core.tools import ActionVote, ToolChoice, ToolRequest, canonical_json, extract_json, normalise_tool_choice
from mfs_core.types import GenerationRequest
from tests.scripted import ScriptedBackend, continuation, drive

ADD = {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {}}}}
MUL = {"type": "function", "function": {"name": "mul", "parameters": {"type": "object", "properties": {}}}}
TOOLS = ToolRequest((ADD, MUL))


def call(name: str, arguments: str) -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>'


def test_canonical_json_sorts_keys_and_normalises_numbers() -> None:
    assert canonical_json({"b": 4.0, "a": 3}) == canonical_json({"a": 3, "b": 4}) == '{"a":3,"b":4}'
    assert canonical_json({"x": [1.5, 2.0, True, None, "é"]}) == '{"x":[1.5,2,true,null,"é"]}'


def test_extract_json_takes_the_last_object() -> None:
    assert extract_json('First {"a": 1}, then ```json\n{"a": 2, "b": {"c": 3}}\n```') == {"a": 2, "b": {"c": 3}}
    assert extract_json("no object { here") is None


def test_action_keys() -> None:
    vote = ActionVote("hermes", TOOLS)
    assert vote(call("add", '{"b": 4, "a": 3.0}')) == 'call [{"arguments":{"a":3,"b":4},"name":"add"}]'
    assert vote("So " + call("add", '{"a": 3, "b": 4}') + call("mul", '{"a": 7, "b": 2}')) == (
        'call [{"arguments":{"a":3,"b":4},"name":"add"},{"arguments":{"a":7,"b":2},"name":"mul"}]'
    )
    assert vote("3 + 4 = 7\nThe answer is: \\boxed{7}.") == "7"
    assert vote(call("add", '{"a": 3')) is None  # malformed: no vote
    assert vote(call("sub", '{"a": 3}')) is None  # not a bound tool: no vote
    required = ActionVote("hermes", ToolRequest((ADD, MUL), ToolChoice("required")))
    assert required("The answer is 7.") is None
    named = ActionVote("hermes", ToolRequest((ADD, MUL), ToolChoice("named", "mul")))
    assert named(call("add", "{}")) is None and named(call("mul", "{}")) == 'call [{"arguments":{},"name":"mul"}]'
    assert ActionVote("hermes", None, json_answers=True)('Here: {"x": 2.0}') == 'json {"x":2}'
    # tool_choice="none": nothing is parsed, the answer votes
    none = ActionVote("hermes", ToolRequest((ADD,), ToolChoice("none")))
    assert none(call("add", "{}") + "\nThe answer is 7.") == "7"


def test_parse_moves_calls_the_choice_forbids_to_invalid_calls() -> None:
    named = ActionVote("hermes", ToolRequest((ADD, MUL), ToolChoice("named", "mul")))
    parsed = named.parse(call("add", '{"a": 1}'))
    assert parsed.tool_calls == []
    assert parsed.invalid_tool_calls[0].name == "add"
    assert parsed.invalid_tool_calls[0].error == "tool 'add' is not among the allowed tools ['mul']"


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        (None, ToolChoice("auto")), ("auto", ToolChoice("auto")), ("none", ToolChoice("none")), (False, ToolChoice("none")),
        ("any", ToolChoice("required")), ("required", ToolChoice("required")), (True, ToolChoice("required")),
        ("mul", ToolChoice("named", "mul")), ({"type": "function", "function": {"name": "add"}}, ToolChoice("named", "add")),
        ({"type": "tool", "name": "add"}, ToolChoice("named", "add")),
    ],
)
def test_tool_choice_values(choice: object, expected: ToolChoice) -> None:
    assert normalise_tool_choice(choice, ["add", "mul"]) == expected


def test_an_unknown_tool_choice_names_the_tools() -> None:
    with pytest.raises(ValueError, match=r"tool_choice 'sub' is not allowed; .* bound tools' names \['add', 'mul'\]"):
        normalise_tool_choice("sub", ["add", "mul"])


# --- the decoders vote over actions --------------------------------------------------------
# Three candidate steps (M = 3, N = 1, one step); each survivor's foresight rollout ends in an
# action. Step log-probs are equal, so width pruning keeps all three and all three are beams.
ROLLOUTS = {
    "Add them.": (call("add", '{"a": 3, "b": 4}'), -0.30),
    "Use the adder.": (call("add", '{"b": 4.0, "a": 3}'), -0.20),
    "Just count.": ("3 + 4 = 7\nThe answer is: \\boxed{7}.", -0.10),
}


def three_paths(request: GenerationRequest):
    if request.stop == ("\n", "<end_of_reasoning>"):  # a step request: the three candidates
        return [continuation(step, mean_logprob=-0.5) for step in ROLLOUTS][: request.n]
    step = request.prompt.rsplit("\n\n", 1)[-1].strip()
    text, logprob = ROLLOUTS[step]
    return [continuation(text, mean_logprob=logprob, num_tokens=10)] * request.n


SETTINGS = MFSSettings(step_beam_size=3, num_rollouts=1, max_steps=1, min_steps=0)


def test_mfs_votes_over_actions_with_an_action_key() -> None:
    result = drive(decode_mfs("Q\n\n", SETTINGS, answer_key=ActionVote("hermes", TOOLS)), ScriptedBackend(three_paths))
    add = 'call [{"arguments":{"a":3,"b":4},"name":"add"}]'
    assert sorted(result.completion_answers) == sorted([add, add, "7"])
    # add wins 2 of 3; of its two paths the one with the higher F (-0.20) is returned
    assert result.answer == add
    assert result.vote_share == pytest.approx(2 / 3)
    assert result.text == "Use the adder.\n" + call("add", '{"b": 4.0, "a": 3}')


def test_without_an_action_key_the_same_paths_vote_on_answers() -> None:
    result = drive(decode_mfs("Q\n\n", SETTINGS), ScriptedBackend(three_paths))
    assert sorted(result.completion_answers, key=str) == sorted([None, None, "7"], key=str)
    assert result.answer == "7" and result.vote_share == pytest.approx(1 / 3)


def test_the_engine_passes_the_action_key_and_refuses_decoders_without_one() -> None:
    engine = MFSEngine(ScriptedBackend(three_paths), SETTINGS)
    [result] = engine.decode_prompts(["Q\n\n"], answer_key=ActionVote("hermes", TOOLS))
    assert result.vote_share == pytest.approx(2 / 3) and result.answer.startswith("call ")
    [ablation] = engine.decode_prompts(["Q\n\n"], method="mfs-paper", answer_key=ActionVote("hermes", TOOLS))
    assert ablation.answer == result.answer and ablation.method == "mfs-paper"
    with pytest.raises(ValueError, match="decoder 'phi' cannot vote over actions"):
        engine.submit_prompts(["Q\n\n"], method="phi", answer_key=ActionVote("hermes", TOOLS))


def test_self_consistency_votes_over_actions() -> None:
    texts = [call("mul", '{"a": 2, "b": 5}'), call("mul", '{"b": 5, "a": 2}'), call("add", "{}"), "The answer is 10.", call("mul", "{")]
    backend = ScriptedBackend(lambda r: [continuation(t, mean_logprob=-0.1 * (i + 1)) for i, t in enumerate(texts)])
    engine = MFSEngine(backend, MFSSettings(num_samples=5))
    [result] = engine.decode_prompts(["Q"], method="sc", answer_key=ActionVote("hermes", TOOLS))
    assert result.completion_answers[3] == "10" and result.completion_answers[4] is None
    assert result.answer == 'call [{"arguments":{"a":2,"b":5},"name":"mul"}]'
    assert result.vote_share == pytest.approx(2 / 5)
    assert result.text == texts[0]  # the higher mean log-prob of the two mul paths (-0.1 > -0.2)


def test_a_forced_opening_is_put_back_before_parsing_and_voting() -> None:
    tools = ({"type": "function", "function": {"name": "add", "description": "", "parameters": {"type": "object"}}},
             {"type": "function", "function": {"name": "mul", "description": "", "parameters": {"type": "object"}}})
    required = ToolRequest(tools, ToolChoice("required"))
    named = ToolRequest(tools, ToolChoice("named", "mul"))
    assert required.forced_opening("hermes") == '<tool_call>\n{"name": "'
    assert named.forced_opening("hermes") == '<tool_call>\n{"name": "mul", "arguments": {'
    assert ToolRequest(tools).forced_opening("hermes") == ""  # auto: the model decides
    single = ToolRequest(tools[:1], ToolChoice("required"))  # one tool: the only call allowed is to it
    assert single.forced_opening("hermes") == '<tool_call>\n{"name": "add", "arguments": {'
    assert named.forced_opening("mistral") == ""  # only the Hermes opening is known
    vote = ActionVote("hermes", required, opening=required.forced_opening("hermes"))
    assert vote('add", "arguments": {"a": 1, "b": 2}}\n</tool_call>') == 'call [{"arguments":{"a":1,"b":2},"name":"add"}]'
    assert vote("add") is None  # an unfinished call does not vote
    assert vote.parse('mul", "arguments": {"a": 2, "b": 5}}\n</tool_call>').tool_calls[0].arguments == {"a": 2, "b": 5}


# --- keeping tool names to the tools given ------------------------------------------------
def test_name_choice_lists_the_shown_tools_for_the_hermes_format_only() -> None:
    from mfs_core.types import TriggeredChoice

    trigger = '<tool_call>\n{"name": "'
    assert TOOLS.name_choice("hermes") == TriggeredChoice(trigger, ('add", "arguments": ', 'mul", "arguments": '))
    assert ToolRequest((ADD, MUL), ToolChoice("named", "mul")).name_choice("hermes") == TriggeredChoice(trigger, ('mul", "arguments": ',))
    assert ToolRequest((ADD, MUL), ToolChoice("none")).name_choice("hermes") is None
    assert TOOLS.name_choice("mistral") is None and TOOLS.name_choice("llama3_json") is None


def test_a_triggered_choice_refuses_an_empty_trigger_or_choice() -> None:
    from mfs_core.types import TriggeredChoice

    with pytest.raises(ValueError, match="trigger must be a non-empty string"):
        TriggeredChoice("", ("a",))
    with pytest.raises(ValueError, match=r"choices must be non-empty strings, at least one, got \('a', ''\)"):
        TriggeredChoice("t", ("a", ""))
    assert TriggeredChoice("t", ["a"]).choices == ("a",)


def test_the_engine_puts_the_action_keys_choice_on_every_request_of_the_decode() -> None:
    backend = ScriptedBackend(three_paths)
    engine = MFSEngine(backend, SETTINGS)
    vote = ActionVote("hermes", TOOLS, triggered_choice=TOOLS.name_choice("hermes"))
    [constrained] = engine.decode_prompts(["Q\n\n"], answer_key=vote)
    assert backend.requests and all(r.triggered_choice == TOOLS.name_choice("hermes") for r in backend.requests)
    seen = len(backend.requests)
    [plain] = engine.decode_prompts(["Q\n\n"], answer_key=ActionVote("hermes", TOOLS))
    assert all(r.triggered_choice is None for r in backend.requests[seen:])
    assert constrained.answer == plain.answer  # the scripted backend ignores the constraint: same decode
    explicit = TOOLS.name_choice("hermes")
    engine.decode_prompts(["Q\n\n"], triggered_choice=explicit)  # no action key: given directly
    assert backend.requests[-1].triggered_choice == explicit


def test_plan_call_constrains_names_unless_switched_off() -> None:
    from mfs_core.tools.plan import plan_call
    from tests.scripted import hermes_template

    backend = ScriptedBackend(three_paths, chat_template=hermes_template)
    tools = [ADD, MUL]
    names = MFSSettings(tool_call_parser="hermes", constrain_actions=False)  # plan_call reads the call's settings
    assert plan_call(backend, names, tools=tools).vote.triggered_choice == TOOLS.name_choice("hermes")
    free = names.model_copy(update={"constrain_tool_names": False})
    assert plan_call(backend, free, tools=tools).vote.triggered_choice is None
    assert plan_call(backend, names).vote.triggered_choice is None  # no tools
