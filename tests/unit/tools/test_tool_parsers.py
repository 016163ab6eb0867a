"""Tool-call parsers on the strings the model families write (mfs_core.tools.parsers)."""

from __future__ import annotations

import pytest

from mfs_core.tools import detect_parser, parse_tool_calls
from mfs_core.tools.parsers import parse_hermes, parse_llama3_json, parse_mistral

QWEN = (
    "I need the temperature first.\n"
    '<tool_call>\n{"name": "get_current_temperature", "arguments": {"location": "San Francisco, CA, USA"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "get_temperature_date", "arguments": {"location": "San Francisco, CA, USA", "date": "2024-10-01"}}\n</tool_call>'
)


def calls(parsed):
    return [(c.name, c.arguments) for c in parsed.tool_calls]


def test_hermes_reads_several_calls_and_keeps_the_reasoning_as_content() -> None:
    parsed = parse_hermes(QWEN)
    assert calls(parsed) == [
        ("get_current_temperature", {"location": "San Francisco, CA, USA"}),
        ("get_temperature_date", {"location": "San Francisco, CA, USA", "date": "2024-10-01"}),
    ]
    assert parsed.content == "I need the temperature first."
    assert parsed.invalid_tool_calls == []
    assert len({c.id for c in parsed.tool_calls}) == 2 and all(c.id.startswith("call_") for c in parsed.tool_calls)
    assert [c.id for c in parse_hermes(QWEN).tool_calls] == [c.id for c in parsed.tool_calls]  # same text, same ids


def test_hermes_without_newlines_with_string_arguments_and_an_unclosed_block() -> None:
    text = '<tool_call>{"name": "add", "arguments": "{\\"a\\": 3, \\"b\\": 4}"}</tool_call><tool_call>{"name": "mul", "arguments": {"x": 2}}'
    assert calls(parse_hermes(text)) == [("add", {"a": 3, "b": 4}), ("mul", {"x": 2})]


@pytest.mark.parametrize(
    ("text", "name", "error"),
    [
        ('<tool_call>\n{"name": "add", "arguments": {"a": 3, "b": 4}\n</tool_call>', "add", "not valid JSON: Expecting ',' delimiter"),
        ('<tool_call>\n{"arguments": {"a": 3}}\n</tool_call>', None, "needs a non-empty string 'name'"),
        ('<tool_call>{"name": "add", "arguments": [3, 4]}</tool_call>', "add", "must be a JSON object, got list"),
        ('<tool_call>{"name": "add", "arguments": "{a: 3}"}</tool_call>', "add", "arguments of 'add' are not valid JSON"),
        ("<tool_call>\n</tool_call>", None, "an empty <tool_call> block"),
        ('<tool_call>["add", 3]</tool_call>', None, "must be a JSON object, got list"),
    ],
)
def test_malformed_hermes_calls_are_invalid_calls_not_errors(text: str, name: str | None, error: str) -> None:
    parsed = parse_hermes(text)
    assert parsed.tool_calls == []
    [invalid] = parsed.invalid_tool_calls
    assert invalid.name == name
    assert error in invalid.error


def test_hermes_reads_a_reply_that_is_only_a_call_object_bare_or_fenced() -> None:
    """Qwen2.5-Coder-0.5B-Instruct's calls, as it wrote them for an add/multiply prompt."""
    fenced = '```json\n{\n  "name": "multiply",\n  "arguments": {\n    "a": 23,\n    "b": 17\n  }\n}\n```'
    parsed = parse_hermes(fenced)
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [("multiply", {"a": 23, "b": 17})]
    assert parsed.content == "" and not parsed.invalid_tool_calls
    parsed = parse_hermes('{"name": "add", "arguments": {"a": 128, "b": 345}}')
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [("add", {"a": 128, "b": 345})]
    bad = parse_hermes('```json\n{"name": "add", "arguments": 3}\n```')
    assert not bad.tool_calls and bad.invalid_tool_calls[0].error == "arguments of 'add' must be a JSON object, got int"
    for text in ('{"answer": 3}', '{"name": "Paris", "country": "France"}', 'Use {"name": "add", "arguments": {}} here',
                 "```json\n[1, 2]\n```"):
        assert parse_hermes(text).tool_calls == [] and parse_hermes(text).content == text  # other JSON: content


def test_llama3_json_with_python_tag_and_chained_calls() -> None:
    text = (
        "Let me look that up.\n<|python_tag|>"
        '{"name": "get_current_conditions", "parameters": {"location": "San Francisco, CA", "unit": "Fahrenheit"}}; '
        '{"name": "get_time", "parameters": {}}'
    )
    parsed = parse_llama3_json(text)
    assert calls(parsed) == [
        ("get_current_conditions", {"location": "San Francisco, CA", "unit": "Fahrenheit"}),
        ("get_time", {}),
    ]
    assert parsed.content == "Let me look that up."


def test_llama3_json_bare_object_and_non_call_json() -> None:
    assert calls(parse_llama3_json('{"name": "add", "parameters": {"a": 3, "b": 4}}')) == [("add", {"a": 3, "b": 4})]
    plain = parse_llama3_json('The data is\n{"a": 1}\nso the answer is 1.')
    assert plain.tool_calls == [] and plain.invalid_tool_calls == []
    assert plain.content == 'The data is\n{"a": 1}\nso the answer is 1.'
    broken = parse_llama3_json('{"name": "add", "parameters": {"a": 3\nThe answer is 7.')
    assert [(c.name, c.error.split(":")[0]) for c in broken.invalid_tool_calls] == [("add", "not valid JSON")]
    assert broken.content == "The answer is 7."


def test_mistral_array_and_args_formats() -> None:
    v3 = parse_mistral('[TOOL_CALLS] [{"name": "get_current_weather", "arguments": {"location": "Paris, France", "format": "celsius"}}]')
    assert calls(v3) == [("get_current_weather", {"location": "Paris, France", "format": "celsius"})]
    v11 = parse_mistral('[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{}')
    assert calls(v11) == [("get_weather", {"city": "Paris"}), ("get_time", {})]
    broken = parse_mistral('Sure. [TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": ')
    assert broken.tool_calls == [] and broken.content == "Sure."
    assert "the [TOOL_CALLS] array is not valid JSON" in broken.invalid_tool_calls[0].error
    mixed = parse_mistral('[TOOL_CALLS][{"name": "a", "arguments": {}}, {"name": "b", "arguments": 5}]')
    assert calls(mixed) == [("a", {})] and mixed.invalid_tool_calls[0].name == "b"


def test_auto_tries_each_parser_and_leaves_answers_alone() -> None:
    assert calls(parse_tool_calls(QWEN, "auto"))[0][0] == "get_current_temperature"
    assert calls(parse_tool_calls('[TOOL_CALLS]f[ARGS]{"x": 1}', "auto")) == [("f", {"x": 1})]
    assert calls(parse_tool_calls('{"name": "f", "parameters": {"x": 1}}', "auto")) == [("f", {"x": 1})]
    answer = parse_tool_calls("3 + 4 = 7\nThe answer is: \\boxed{7}.", "auto")
    assert not answer.has_calls and answer.content == "3 + 4 = 7\nThe answer is: \\boxed{7}."
    # a named parser reads only its own format
    assert parse_tool_calls(QWEN, "mistral").tool_calls == []


def test_an_unknown_parser_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"unknown tool_call_parser 'qwen'; known: \['auto', 'hermes'"):
        parse_tool_calls("x", "qwen")


@pytest.mark.parametrize(
    ("rendered", "expected"),
    [
        ("<s>[AVAILABLE_TOOLS] [{\"type\": \"function\"}][/AVAILABLE_TOOLS][INST] What is 2 + 3?[/INST]", "mistral"),
        ("<|im_start|>system\n# Tools\n<tools>\n{...}\n</tools>\nFor each function call, return a json object "
         "with function name and arguments within <tool_call></tool_call> XML tags", "hermes"),
        ("<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for a "
         "function call with its proper arguments that best answers the given prompt.\n\nRespond in the format "
         '{"name": function name, "parameters": dictionary of argument name and its value}.', "llama3_json"),
        ("<s><|user|>\nWhat is 2 + 3?\n<|assistant|>\n", None),
    ],
)
def test_detect_parser_reads_the_rendered_template(rendered: str, expected: str | None) -> None:
    assert detect_parser(rendered) == expected
