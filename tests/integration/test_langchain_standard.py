"""LangChain's standard integration suites for ``ChatMFS`` and ``MFSReasoningTool`` on the
bundled demo model, offline.

The demo model loads once per test session: every instance built here has the same backend
fields, so :meth:`mfs_core.MFSEngine.from_settings` hands them one shared engine. Settings
are CPU-sized (M = N = 2, two steps, 48-token rollouts) so the suite runs in seconds; the
mechanics it checks do not depend on M and N.

Capabilities the demo model lacks are declared through the suite's flags, so their tests
skip with the suite's own reason: tool calling (``has_tool_calling``, which also gates the
tool-choice, tool-message and agent-loop tests), structured output and JSON mode, image /
audio / PDF / video input, image and PDF tool messages, Anthropic-format input. The VCR
stream-time benchmark skips because no HTTP is recorded (a local model).
"""

from __future__ import annotations

from typing import Any

from langchain_tests.integration_tests import ChatModelIntegrationTests, ToolsIntegrationTests

from langchain_mfs import ChatMFS, MFSLLM, MFSReasoningTool
from mfs_core.backends.transformers import demo_model_path

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
        return False

    @property
    def has_tool_choice(self) -> bool:
        return False

    @property
    def has_structured_output(self) -> bool:
        return False

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
