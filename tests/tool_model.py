"""Whether the bundled demo model can call tools: the ``requires_tool_model`` skip condition.

The tool-calling demo model (v2 and later) has a chat template that renders ``tools``; the first
demo model's does not. The condition renders a conversation with and without a tool through
the bundled checkpoint's tokenizer (no weights loaded) and compares the two prompts
(:func:`mfs_core.tools.renders_tools`' test), so tests and documentation examples marked with
it run by themselves once the new checkpoint is merged.
"""

from __future__ import annotations

import functools

import pytest

__all__ = ["demo_model_renders_tools", "requires_tool_model"]


@functools.cache
def demo_model_renders_tools() -> bool:
    """True when the bundled demo checkpoint's chat template renders tools."""
    try:
        from mfs_core.backends._hf import load_local_tokenizer, render_chat
        from mfs_core.models import demo_model_path
        from mfs_core.tools.rendering import PROBE_TOOL
    except ImportError:
        return False
    tokenizer = load_local_tokenizer(str(demo_model_path()))
    messages = [{"role": "user", "content": "What is 2 + 3?"}]
    try:
        plain = render_chat(tokenizer, messages)
        with_tools = render_chat(tokenizer, messages, [PROBE_TOOL])
    except Exception:  # a template that fails on tools cannot use them
        return False
    return plain is not None and with_tools is not None and plain != with_tools


requires_tool_model = pytest.mark.skipif(
    not demo_model_renders_tools(),
    reason="the bundled demo model's chat template does not render tools (the tool-calling demo model is not merged yet)",
)
"""Skip unless the bundled demo model's chat template renders tools."""
