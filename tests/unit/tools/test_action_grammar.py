"""Grammar-constrained actions (mfs_core.grammar): the grammar each request gets.

Hand-built cases: where a completion is (free text, inside a call's fixed opening, inside
its JSON value, inside its closing, after it) decides the request's grammar; every grammar
built compiles with xgrammar and accepts exactly the text it should.
"""

from __future__ import annotations

import json

import pytest

from mfs_core.tools.actions import ToolChoice, ToolRequest
from mfs_core.grammar import ActionGrammar, ActionTag, json_value_ebnf

xgr = pytest.importorskip("xgrammar")

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}
TOOLS = tuple(
    {"type": "function", "function": {"name": name, "description": f"{name} two integers.", "parameters": SCHEMA}}
    for name in ("add", "multiply")
)
OPEN = '<tool_call>\n{"name": "add", "arguments": '
CALL = OPEN + '{"a": 3, "b": 4}}\n</tool_call>'


@pytest.fixture(scope="module")
def compiler() -> object:
    from transformers import AutoTokenizer

    from mfs_core.models import demo_model_path

    tokenizer = AutoTokenizer.from_pretrained(demo_model_path())
    return xgr.GrammarCompiler(xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=len(tokenizer)))


def tool_grammar() -> ActionGrammar:
    grammar = ToolRequest(TOOLS).action_grammar("hermes", action_tokens=300)
    assert grammar is not None
    return grammar


def accepts(compiler: object, structural_tag: str, text: str, *, complete: bool = False) -> bool:
    matcher = xgr.GrammarMatcher(compiler.compile_structural_tag(structural_tag))  # type: ignore[attr-defined]
    return matcher.accept_string(text) and (not complete or matcher.is_completed())


def test_json_values_are_written_with_the_models_separators_and_no_other_whitespace(compiler: object) -> None:
    tag = json.dumps({"type": "structural_tag", "format": {"type": "grammar", "grammar": json_value_ebnf(SCHEMA)}})
    assert accepts(compiler, tag, '{"a": 3, "b": 4}', complete=True)
    assert not accepts(compiler, tag, '{"a":3,"b":4}')  # no compact separators
    assert not accepts(compiler, tag, '{"a": 3,\n "b": 4}')  # no newline: an action is never split by "\n"
    assert not accepts(compiler, tag, '{"a": "3"')  # a string where the schema wants an integer
    assert not accepts(compiler, tag, '{"a": 3, "b": 4, "c": 5}')  # no property the schema does not declare


def test_a_schema_xgrammar_cannot_read_is_a_one_line_error() -> None:
    with pytest.raises(ValueError, match=r"^cannot build a grammar from the JSON schema \{\"type\": \"nonsense\"\}") as caught:
        json_value_ebnf({"type": "nonsense"})
    assert "\n" not in str(caught.value)


def test_the_hermes_grammar_has_one_tag_per_tool_with_the_call_fixed_around_its_arguments() -> None:
    grammar = tool_grammar()
    assert grammar.trigger == "<tool_call>" and grammar.action_tokens == 300
    assert [tag.begin for tag in grammar.tags] == [OPEN, OPEN.replace("add", "multiply")]
    assert {tag.end for tag in grammar.tags} == {"}\n</tool_call>"}
    assert ToolRequest(TOOLS).action_grammar("llama3_json", action_tokens=300) is None  # other formats: parsed after
    assert ToolRequest(TOOLS, ToolChoice("none")).action_grammar("hermes", action_tokens=300) is None
    named = ToolRequest(TOOLS, ToolChoice("named", "multiply")).action_grammar("hermes", action_tokens=300)
    assert [tag.begin for tag in named.tags] == [OPEN.replace("add", "multiply")]  # type: ignore[union-attr]


def test_a_forced_opening_under_the_grammar_stops_before_the_arguments_value() -> None:
    request = ToolRequest(TOOLS, ToolChoice("named", "add"))
    assert request.forced_opening("hermes") == OPEN + "{"
    assert request.forced_opening("hermes", constrained=True) == OPEN


def test_free_text_gets_the_lazy_grammar_that_starts_at_the_prompts_end(compiler: object) -> None:
    grammar = tool_grammar()
    for completion in ("", "First, 3 + 4 = 7.\n", CALL + "\n"):
        bound = grammar.request_grammar(completion)
        assert (bound.prefix, bound.in_action, bound.remote) == ("", False, bound.structural_tag), completion
    free = grammar.request_grammar("").structural_tag
    assert accepts(compiler, free, "I add them.\n" + CALL + "\nThe answer is 7.", complete=True)
    assert accepts(compiler, free, "No call at all.", complete=True)
    assert not accepts(compiler, free, '<tool_call>\n{"name": "subtract"')  # a tool that is not bound
    assert not accepts(compiler, free, OPEN + '{"a": 3}}')  # "b" is required


@pytest.mark.parametrize(
    ("completion", "remote_accepts"),
    [
        ("<tool_call>", '\n{"name": "multiply", "arguments": {"a": 3, "b": 4}}\n</tool_call>'),
        ('<tool_call>\n{"name": "', 'add", "arguments": {"a": 3, "b": 4}}\n</tool_call> done'),
        (OPEN, '{"a": 3, "b": 4}}\n</tool_call>'),
        (OPEN + '{"a": 3, "b": 4}}\n', "</tool_call>"),
    ],
)
def test_a_prompt_that_ends_in_a_calls_fixed_text_continues_it_on_every_backend(
        compiler: object, completion: str, remote_accepts: str) -> None:
    bound = tool_grammar().request_grammar("Let me call.\n" + completion)
    assert bound.in_action and bound.prefix == completion and bound.action_tokens == 300
    assert accepts(compiler, bound.structural_tag, bound.prefix + remote_accepts)  # the matcher fed the prefix
    assert bound.remote is not None and accepts(compiler, bound.remote, remote_accepts)
    assert not accepts(compiler, bound.remote, "x" + remote_accepts)  # nothing but the rest of the call


def test_inside_a_json_value_only_a_matcher_fed_the_prefix_can_continue() -> None:
    bound = tool_grammar().request_grammar(OPEN + '{"a": 3')
    assert bound.in_action and bound.remote is None and bound.prefix == OPEN + '{"a": 3'


def test_a_call_written_outside_the_grammar_leaves_the_text_free() -> None:
    bound = tool_grammar().request_grammar('<tool_call>\n{"name": "calc", "arguments": {}}\n</tool_call>\n')
    assert not bound.in_action and bound.prefix == ""


def test_structured_output_is_the_whole_completion(compiler: object) -> None:
    grammar = ActionGrammar((ActionTag("", SCHEMA, ""),), "", 200)
    start = grammar.request_grammar("")
    assert start.in_action and start.prefix == "" and start.remote == start.structural_tag
    assert accepts(compiler, start.structural_tag, '{"a": 1, "b": 2}', complete=True)
    assert not accepts(compiler, start.structural_tag, 'The answer is {"a": 1, "b": 2}')
    later = grammar.request_grammar('{"a": 1, "b": 2}')
    assert later.prefix == '{"a": 1, "b": 2}' and later.remote is None and not later.in_action


@pytest.mark.parametrize(
    ("tags", "trigger", "message"),
    [
        ((), "<tool_call>", "an ActionGrammar needs at least one tag, got none"),
        ((ActionTag("", SCHEMA, ""), ActionTag("", SCHEMA, "")), "", "a whole-completion ActionGrammar (trigger '') takes one tag, got 2"),
        ((ActionTag("<call>", SCHEMA, ""),), "<tool_call>", "tag begin '<call>' does not start with the trigger '<tool_call>'"),
    ],
)
def test_malformed_grammars_are_refused_in_one_line(tags: tuple[ActionTag, ...], trigger: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        ActionGrammar(tags, trigger)
    assert str(caught.value) == message


def test_properties_are_written_in_the_schemas_order(compiler: object) -> None:
    """The schema's property order is the order the model writes (not sorted: ``name``
    before ``country`` as a pydantic model declares them)."""
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "country": {"type": "string"}},
              "required": ["name", "country"]}
    tag = json.dumps({"type": "structural_tag", "format": {"type": "grammar", "grammar": json_value_ebnf(schema)}})
    assert accepts(compiler, tag, '{"name": "Paris", "country": "France"}', complete=True)
    assert not accepts(compiler, tag, '{"country": "France"')
