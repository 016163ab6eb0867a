"""The request bodies ``mfs serve`` takes: OpenAI fields mapped to the engine, extra fields as
per-request settings, and every refusal a one-line error with its HTTP status (no model loaded)."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette", reason="the serve extra is not installed")

from mfs_core.serve.schemas import BACKEND_FIELDS, RequestError, parse_chat, parse_completion  # noqa: E402
from mfs_core.settings import MFSSettings  # noqa: E402
from mfs_core.tools.plan import ResponseFormat  # noqa: E402

BASE = MFSSettings(step_beam_size=4, num_rollouts=4, seed=0)
USER = [{"role": "user", "content": "2 + 3 = ?"}]


def chat(body):
    return parse_chat(body, BASE, served="mfs-demo", max_n=8, max_messages=4)


def refused(body, parse=chat) -> RequestError:
    with pytest.raises(RequestError) as caught:
        parse(body)
    assert "\n" not in caught.value.message
    return caught.value


def test_openai_fields_map_to_the_settings_the_adapters_use() -> None:
    call = chat({"model": "mfs-demo", "messages": USER, "seed": 7, "temperature": 0.5, "top_p": 0.9, "n": 3,
                 "max_completion_tokens": 99, "stop": "\n\n", "stream": True, "stream_options": {"include_usage": False},
                 "user": "u1", "parallel_tool_calls": True, "logprobs": False})
    s = call.settings
    assert (s.seed, s.temperature, s.top_p, s.max_answer_tokens, s.step_beam_size) == (7, 0.5, 0.9, 99, 4)
    assert (call.n, call.stop, call.stream, call.include_usage, call.method) == (3, ["\n\n"], True, False, "mfs")
    assert call.messages == [{"role": "user", "content": "2 + 3 = ?"}]


def test_extra_fields_set_the_search_and_the_trace() -> None:
    call = chat({"messages": USER, "step_beam_size": 2, "num_rollouts": 3, "method": "phi", "return_trace": True,
                 "max_tokens": 50})
    assert (call.settings.step_beam_size, call.settings.num_rollouts, call.settings.max_answer_tokens) == (2, 3, 50)
    assert call.method == "phi" and call.return_trace is True
    assert chat({"messages": USER, "method": "sc", "num_samples": 3, "temperature": 0.5}).settings.num_samples == 3


def test_a_parameter_the_method_does_not_take_is_a_400_naming_it() -> None:
    with pytest.raises(RequestError, match=r"^method 'cot' does not take 'num_rollouts', 'step_beam_size'; its "
                                           r"parameters: none, and the common ones \(seed, temperature, ") as caught:
        chat({"messages": USER, "step_beam_size": 2, "num_rollouts": 3, "method": "cot"})
    assert (caught.value.status, caught.value.param) == (400, "num_rollouts")
    with pytest.raises(RequestError, match=r"^num_samples=0: .*allowed: 1 <= num_samples <= 4096$") as caught:
        chat({"messages": USER, "method": "sc", "num_samples": 0})
    assert caught.value.param == "num_samples"


def test_messages_tools_and_response_format_become_the_neutral_forms() -> None:
    history = [
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": "add 2 and 3"},
        {"role": "assistant", "content": None, "refusal": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}]},
        {"role": "tool", "content": "5", "tool_call_id": "c1"},
    ]
    call = chat({"messages": history, "response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "object"}, "strict": True}}})
    assert call.messages[0] == {"role": "system", "content": "Be brief."}
    assert call.messages[2]["tool_calls"] == [{"name": "add", "arguments": {"a": 2, "b": 3}, "id": "c1"}]
    assert call.messages[3] == {"role": "tool", "content": "5", "tool_call_id": "c1"}
    assert call.response_format == ResponseFormat("json_schema", {"type": "object"})
    assert chat({"messages": USER, "response_format": {"type": "json_object"}}).response_format == ResponseFormat("json_mode")
    assert chat({"messages": USER, "response_format": {"type": "text"}}).response_format is None


def test_completions_take_a_prompt_or_a_list() -> None:
    call = parse_completion({"prompt": ["a?", "b?"], "n": 2}, BASE, served="mfs-demo", max_n=8, max_messages=4)
    assert call.prompts == ["a?", "b?"] and call.n == 2 and call.endpoint == "completions"


@pytest.mark.parametrize(("body", "status", "needle"), [
    ([1, 2], 400, "the request body must be a JSON object, got list"),
    ({"messages": USER, "step_beam": 2}, 400, "unknown field 'step_beam' (did you mean 'step_beam_size'?)"),
    ({"messages": USER, "step_beam_size": 0}, 400,
     "step_beam_size=0: Input should be greater than or equal to 1; allowed: 1 <= step_beam_size <= 1024"),
    ({"messages": USER, "temperature": 0}, 400, "allowed: 0.0 < temperature <= 10.0"),
    ({"messages": USER, "n": 9}, 400, "n=9 is more than this server allows; allowed: 1 <= n <= 8"),
    ({"messages": USER, "n": 0}, 400, "n=0: Input should be greater than or equal to 1"),
    ({"messages": USER, "api_key": "x"}, 400, "cannot set ['api_key']"),
    ({"messages": USER, "model": "gpt-4o"}, 404, "model 'gpt-4o' is not served here; this server serves 'mfs-demo'"),
    ({"messages": USER, "method": "nope"}, 400, "nope"),
    ({"messages": USER, "logprobs": True}, 400, "logprobs=True is not supported by mfs serve"),
    ({"messages": USER, "return_trace": "yes"}, 400, "return_trace must be true or false, got 'yes'"),
    ({"messages": USER * 5}, 400, "messages holds 5 messages; this server allows at most 4"),
    ({"messages": []}, 400, "messages must hold at least one message, got []"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}, 400,
     "messages[0] holds a 'image_url' content part; mfs serve renders text only"),
    ({"messages": [{"role": "wizard", "content": "x"}]}, 400, "messages[0]: unknown chat role 'wizard'"),
    ({"messages": USER, "max_tokens": 10, "max_completion_tokens": 20}, 400,
     "give one of max_tokens, max_completion_tokens, max_answer_tokens, not several"),
    ({"messages": USER, "response_format": {"type": "xml"}}, 400, "response_format type must be"),
    ({"messages": [{"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "add", "arguments": "{oops"}}]}]}, 400, "arguments of 'add' are not JSON"),
])
def test_refusals_name_the_value_and_the_allowed_range(body, status, needle) -> None:
    error = refused(body)
    assert error.status == status and needle in error.message, error.message
    assert error.body()["error"]["message"] == error.message


def test_backend_fields_are_settings_and_not_overridable() -> None:
    assert BACKEND_FIELDS <= set(MFSSettings.model_fields) and {"model", "backend", "device", "api_key"} <= BACKEND_FIELDS
    for name in sorted(BACKEND_FIELDS - {"model"}):  # model is an OpenAI field: it must name the served model
        assert refused({"messages": USER, name: None}).param == name


def test_json_depth_counts_nested_containers_without_recursion() -> None:
    from mfs_core.serve.app import MAX_JSON_DEPTH, json_depth

    assert [json_depth(v) for v in (1, "x", None, [], {}, [1, [2]], {"a": [{"b": 1}]})] == [0, 0, 0, 1, 1, 2, 3]
    deep: list = []
    for _ in range(5000):  # far past Python's recursion limit: counted, and cut once over the limit
        deep = [deep]
    assert json_depth(deep) == MAX_JSON_DEPTH + 1


def test_request_fields_are_strict_json_types() -> None:
    from mfs_core.serve.schemas import RequestError, parse_chat

    user = [{"role": "user", "content": "What is 3 + 4?"}]
    ok = parse_chat({"messages": user, "temperature": 1, "n": 2, "step_beam_size": 4}, MFSSettings(), served="mfs-demo",
                    max_n=8, max_messages=8)
    assert (ok.settings.temperature, ok.n, ok.settings.step_beam_size) == (1.0, 2, 4)  # an integer is a number
    for field, value in (("n", "2"), ("seed", True), ("stream", "yes"), ("step_beam_size", "4"), ("share_foresight", 1),
                         ("temperature", "0.5")):
        with pytest.raises(RequestError, match=f"^{field}={value!r}") as refused:
            parse_chat({"messages": user, field: value}, MFSSettings(), served="mfs-demo", max_n=8, max_messages=8)
        assert refused.value.status == 400 and refused.value.param == field
