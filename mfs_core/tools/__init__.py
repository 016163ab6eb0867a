"""Tool calling and structured output for MFS models, shared by the framework adapters.

* :mod:`~mfs_core.tools.parsers`: tool calls read from a completion (Hermes/Qwen, Llama 3.1
  JSON, Mistral), malformed ones reported as invalid calls.
* :mod:`~mfs_core.tools.actions`: the vote over normalised actions (tool + canonical JSON
  arguments, or the final answer) and the caller's tool choice.
* :mod:`~mfs_core.tools.rendering`: tools and tool messages through the chat template.
* :mod:`~mfs_core.tools.structured`: JSON structured output through the prompt.
"""

from mfs_core.tools.actions import (
    ActionVote,
    ToolChoice,
    ToolRequest,
    canonical_json,
    extract_json,
    normalise_tool_choice,
)
from mfs_core.tools.parsers import (
    InvalidToolCall,
    ParsedOutput,
    ParserName,
    ToolCall,
    detect_parser,
    parse_tool_calls,
)
from mfs_core.tools.rendering import (
    ToolsNotSupportedError,
    check_tools,
    renders_tools,
    resolve_parser,
    template_messages,
)
from mfs_core.tools.structured import (
    StructuredOutputError,
    add_system_instruction,
    json_instruction,
    validate_json,
)

__all__ = [
    "ActionVote",
    "InvalidToolCall",
    "ParsedOutput",
    "ParserName",
    "StructuredOutputError",
    "ToolCall",
    "ToolChoice",
    "ToolRequest",
    "ToolsNotSupportedError",
    "add_system_instruction",
    "canonical_json",
    "check_tools",
    "detect_parser",
    "extract_json",
    "json_instruction",
    "normalise_tool_choice",
    "parse_tool_calls",
    "renders_tools",
    "resolve_parser",
    "template_messages",
    "validate_json",
]
