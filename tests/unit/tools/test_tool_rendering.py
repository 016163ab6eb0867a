"""Tools and tool messages through chat templates (mfs_core.tools.rendering, mfs_core.prompts)."""

from __future__ import annotations

from typing import Any

import pytest

from mfs_core.backends._hf import load_local_tokenizer, render_chat
from mfs_core.models import demo_model_path
from mfs_core.prompts import assistant_prefix, render_messages, render_question
from mfs_core.settings import MFSSettings
from mfs_core.tools import ToolsNotSupportedError, check_tools, renders_tools, resolve_parser, template_messages
from mfs_core.tools.rendering import PROBE_TOOL
from tests.scripted import ScriptedBackend, hermes_template

CALL = {"name": "add", "arguments": {"a": 3, "b": 4}, "id": "c1"}
CONVERSATION = [
    {"role": "user", "content": "What is 3 plus 4?"},
    {"role": "assistant", "content": "I add them.", "tool_calls": [CALL]},
    {"role": "tool", "content": "7", "tool_call_id": "c1"},
]

# A Qwen 2.5-style template in the demo model's roles (jinja, rendered by transformers).
QWEN_LIKE = (
    "{{ bos_token }}{% if tools %}<|system|>\n<tools>\n{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}</tools>\n"
    "Call a tool as <tool_call>{\"name\": ..., \"arguments\": ...}</tool_call>\n{% endif %}"
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}"
    "{% if message.tool_calls %}{% for call in message.tool_calls %}\n<tool_call>\n"
    "{\"name\": \"{{ call.function.name }}\", \"arguments\": {{ call.function.arguments | tojson }}}\n</tool_call>"
    "{% endfor %}{% endif %}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def test_template_messages_native_uses_the_hugging_face_tool_format() -> None:
    assert template_messages(CONVERSATION, native=True) == [
        {"role": "user", "content": "What is 3 plus 4?"},
        {"role": "assistant", "content": "I add them.",
         "tool_calls": [{"type": "function", "id": "c1", "function": {"name": "add", "arguments": {"a": 3, "b": 4}}}]},
        {"role": "tool", "content": "7", "name": "add", "tool_call_id": "c1"},  # the name found from the call id
    ]


def test_template_messages_as_text_for_a_template_without_tools() -> None:
    assert template_messages(CONVERSATION, native=False) == [
        {"role": "user", "content": "What is 3 plus 4?"},
        {"role": "assistant", "content": 'I add them.\nCalled tool add with {"a": 3, "b": 4}'},
        {"role": "user", "content": "Tool result (add): 7"},
    ]


def test_renders_tools_compares_prompts_with_and_without_a_tool() -> None:
    assert renders_tools(ScriptedBackend(lambda r: [], chat_template=hermes_template)) is True
    assert renders_tools(ScriptedBackend(lambda r: [])) is False  # the demo model's shape ignores tools
    assert renders_tools(ScriptedBackend(lambda r: [], chat_template=None)) is False

    class OldBackend(ScriptedBackend):  # the protocol before tools: apply_chat_template(messages)
        def apply_chat_template(self, messages: Any) -> str:  # type: ignore[override]
            return "x"

    assert renders_tools(OldBackend(lambda r: [])) is False


def test_resolve_parser_reads_the_template() -> None:
    assert resolve_parser("auto", ScriptedBackend(lambda r: [], chat_template=hermes_template)) == "hermes"
    assert resolve_parser("mistral", ScriptedBackend(lambda r: [], chat_template=hermes_template)) == "mistral"


def test_render_messages_with_tools_and_the_clear_error_without() -> None:
    settings = MFSSettings()
    prompt = render_messages(CONVERSATION, ScriptedBackend(lambda r: [], chat_template=hermes_template), settings, tools=[PROBE_TOOL])
    assert prompt.startswith("<s><|system|>\nYou may call tools:\n<tools>\n")
    assert prompt.endswith('<|tool|>\n7\n<|assistant|>\nThe reasoning steps are:\n\n')
    with pytest.raises(ToolsNotSupportedError, match="model 'mfs-demo' cannot call tools"):
        render_messages(CONVERSATION, ScriptedBackend(lambda r: []), settings, tools=[PROBE_TOOL])


def test_the_default_assistant_prefix_is_the_releases_for_the_demo_model_only() -> None:
    release = "The reasoning steps are:\n\n"
    assert assistant_prefix(MFSSettings(), "mfs-demo") == release
    assert assistant_prefix(MFSSettings(), "qwen2.5-coder-0.5b-instruct") == ""
    assert assistant_prefix(MFSSettings(assistant_prefix=""), "mfs-demo") == ""
    assert assistant_prefix(MFSSettings(assistant_prefix="Steps:\n"), "qwen2.5-coder-0.5b-instruct") == "Steps:\n"
    # A chat model with tools bound: the prompt ends at the template's generation prompt, where it opens its call.
    qwen = ScriptedBackend(lambda r: [], chat_template=hermes_template, model_name="qwen2.5-coder-0.5b-instruct")
    assert render_messages(CONVERSATION, qwen, MFSSettings(), tools=[PROBE_TOOL]).endswith("<|tool|>\n7\n<|assistant|>\n")
    assert render_question("What is 3 plus 4?", qwen, MFSSettings()).endswith("<|user|>\nWhat is 3 plus 4?\n<|assistant|>\n")
    # Set by hand it is used as given, tools or not.
    explicit = MFSSettings(assistant_prefix=release)
    assert render_messages(CONVERSATION, qwen, explicit, tools=[PROBE_TOOL]).endswith("<|assistant|>\n" + release)


@pytest.mark.parametrize(
    ("tools", "error"),
    [
        ({"type": "function"}, (TypeError, "tools must be a list of tool dicts, got dict")),
        ([{"name": "add"}], (ValueError, r"tool 0 must be \{'type': 'function'")),
        ([{"type": "function", "function": {"name": ""}}], (ValueError, "tool 0 needs a non-empty function name")),
        ([{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}],
         (ValueError, "tool 'f': parameters must be a JSON object schema")),
    ],
)
def test_check_tools_rejects_malformed_tools(tools: Any, error: tuple[type, str]) -> None:
    with pytest.raises(error[0], match=error[1]):
        check_tools(tools)


def test_check_tools_fills_empty_parameters() -> None:
    [tool] = check_tools([{"type": "function", "function": {"name": "now"}}])
    assert tool["function"]["parameters"] == {"type": "object", "properties": {}}


def test_a_real_tokenizer_renders_tools_and_tool_turns_through_its_jinja_template() -> None:
    tokenizer = load_local_tokenizer(str(demo_model_path()))
    demo_with_tools = render_chat(tokenizer, CONVERSATION[:1], [PROBE_TOOL])  # the demo model's own template
    assert demo_with_tools != render_chat(tokenizer, CONVERSATION[:1])
    assert demo_with_tools.startswith(f"{tokenizer.bos_token}<|system|>\nYou may call functions") and "<tools>\n" in demo_with_tools
    tokenizer.chat_template = QWEN_LIKE
    with_tools = render_chat(tokenizer, template_messages(CONVERSATION, native=True), [PROBE_TOOL])
    assert with_tools.startswith(f"{tokenizer.bos_token}<|system|>\n<tools>\n")
    assert '{"type": "function", "function": {"name": "add", "description": "Add two integers."' in with_tools
    assert '<tool_call>\n{"name": "add", "arguments": {"a": 3, "b": 4}}\n</tool_call>' in with_tools  # the assistant's call
    assert "<|tool|>\n7" in with_tools and with_tools.endswith("<|assistant|>\n")  # transformers trims block newlines
