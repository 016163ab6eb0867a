"""LangChain's standard integration suites for ``ChatMFS`` and ``MFSReasoningTool`` on the
bundled demo model, offline.

The demo model loads once per test session: every instance built here has the same backend
fields, so :meth:`mfs_core.MFSEngine.from_settings` hands them one shared engine. Settings
are CPU-sized (M = N = 2, two steps, 48-token rollouts) so the suite runs in seconds; the
mechanics it checks do not depend on M and N.

Capabilities the demo model lacks are declared through the suite's flags, so their tests
skip with the suite's own reason: JSON mode, image / audio / PDF / video input, image and PDF
tool messages, Anthropic-format input. Tool calling (``has_tool_calling``, which also gates
the tool-message and agent-loop tests), ``has_tool_choice`` and structured output are on
exactly when the bundled checkpoint's chat template renders tools
(:func:`tests.tool_model.demo_model_renders_tools`): off for the first demo model, on once
the tool-calling demo model is merged. Calls and structured outputs are sampled under
their schema's grammar (``constrain_actions``), so they always validate; the three tests
that check argument values the demo model does not write are marked ``xfail`` (not
strict), each with its measured reason. The VCR stream-time benchmark skips because no HTTP is recorded (a local model).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import pytest
from langchain_tests.integration_tests import ChatModelIntegrationTests, ToolsIntegrationTests

from langchain_mfs import ChatMFS, MFSLLM, MFSReasoningTool
from mfs_core.models import demo_model_path
from tests.tool_model import demo_model_renders_tools

TOOLS = demo_model_renders_tools()
"""True once the bundled demo model's chat template renders tools."""


def _xfail(test: Callable[..., Any], reason: str) -> Callable[..., Any]:
    """The inherited standard ``test`` (its parametrization kept), marked ``xfail(strict=False)``."""
    if inspect.iscoroutinefunction(test):

        @functools.wraps(test)
        async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            return await test(self, *args, **kwargs)

    else:

        @functools.wraps(test)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            return test(self, *args, **kwargs)

    return pytest.mark.xfail(reason=reason, strict=False)(wrapper)


_BASE = ChatModelIntegrationTests

# device="cpu" as tests/conftest.py's demo fixtures: the same backend fields, one loaded model.
FAST_SETTINGS = {"device": "cpu", "step_beam_size": 2, "num_rollouts": 2, "max_steps": 2, "max_answer_tokens": 48}


class TestChatMFSIntegration(ChatModelIntegrationTests):
    """``langchain_tests.integration_tests.ChatModelIntegrationTests`` for ``ChatMFS``."""

    @property
    def chat_model_class(self) -> type[ChatMFS]:
        return ChatMFS

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return dict(FAST_SETTINGS)

    # --- what the demo model can do ------------------------------------------------------
    @property
    def has_tool_calling(self) -> bool:
        return TOOLS

    @property
    def has_tool_choice(self) -> bool:
        return TOOLS

    @property
    def has_structured_output(self) -> bool:
        return TOOLS

    # Tool-model tests outside the demo model's arithmetic training (run only when TOOLS).
    # Under the action grammar (constrain_actions, default) every call and structured output
    # parses and validates against its schema, so the tests that failed on malformed
    # arguments or objects (agent loop, runnables as tools, a tool without arguments, the
    # Joke schema) pass. Those left fail on values the demo model does not write, measured
    # with seed 0: the grammar fixes the form of an action, not its content.
    test_tool_calling = _xfail(
        _BASE.test_tool_calling,
        "magic_function(input: int) with tool_choice='any': the call validates ({'input': 43}), but the demo model "
        "copies a number of its training, not the 3 the question asks for (measured, seed 0)",
    )
    test_tool_calling_async = _xfail(
        _BASE.test_tool_calling_async,
        "as test_tool_calling: a valid call with {'input': 43}, not {'input': 3} (measured, seed 0)",
    )
    test_unicode_tool_call_integration = _xfail(
        _BASE.test_unicode_tool_call_integration,
        "the call to unicode_customer validates, but its customer_name is 'add': the demo model copies no words "
        "(its card), here not the '你好啊集团' the question gives (measured, seed 0)",
    )

    @property
    def supports_json_mode(self) -> bool:
        return False

    @property
    def supports_image_inputs(self) -> bool:
        return False

    @property
    def supports_image_urls(self) -> bool:
        return False

    @property
    def supports_pdf_inputs(self) -> bool:
        return False

    @property
    def supports_audio_inputs(self) -> bool:
        return False

    @property
    def supports_video_inputs(self) -> bool:
        return False

    @property
    def supports_image_tool_message(self) -> bool:
        return False

    @property
    def supports_pdf_tool_message(self) -> bool:
        return False

    @property
    def supports_anthropic_inputs(self) -> bool:
        return False

    @property
    def returns_usage_metadata(self) -> bool:
        return True

    # --- a per-call ``model`` decodes with that model: the demo checkpoint by its path -----
    @property
    def supports_model_override(self) -> bool:
        return True

    @property
    def model_override_value(self) -> str:
        return str(demo_model_path())


class TestMFSReasoningToolIntegration(ToolsIntegrationTests):
    """``langchain_tests.integration_tests.ToolsIntegrationTests`` for ``MFSReasoningTool``."""

    @property
    def tool_constructor(self) -> type[MFSReasoningTool]:
        return MFSReasoningTool

    @property
    def tool_constructor_params(self) -> dict[str, Any]:
        return {"llm": MFSLLM(**FAST_SETTINGS)}

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"question": "Tom has 3 apples. He buys 4 more apples. How many apples does Tom have now?"}
