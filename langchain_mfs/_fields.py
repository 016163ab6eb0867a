"""The LangChain fields of :class:`~langchain_mfs.MFSLLM` and :class:`~langchain_mfs.ChatMFS`.

The settings users turn often (:data:`mfs_core.call.ADAPTER_FIELDS`) as flat fields, derived from
:class:`~mfs_core.settings.MFSSettings` (same name, type, default and description,
:func:`mfs_core.call.settings_fields`: nothing copied by hand); every other setting in
``model_kwargs`` (as ``ChatOpenAI``'s); then the adapter's own ``method``, ``stop`` and
``timeout``. How the fields are filled (keywords, ``MFS_*`` variables, an injected engine) and
used is :class:`~langchain_mfs._base.MFSParams`'s.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from mfs_core.call import ADAPTER_FIELDS, settings_fields

__all__ = ["ADAPTER_FIELDS", "MFSFields"]

_NOTES = {
    "api_key": "Kept out of repr, callbacks, the cache key and save() (lc_secrets maps it to MFS_API_KEY).",
    "prompt_format": "An LLM prompt is the user message under 'chat'; chat models always use the template.",
    "system_prompt": "The system message of 'chat'-format LLM prompts.",
    "max_answer_tokens": "max_tokens sets it; the returned path can be longer: up to max_steps steps plus one completion.",
    "temperature": "MFS samples: for reproducible output fix seed instead of lowering this.",
}
"""What the LangChain classes add to a setting's own description."""


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=(), arbitrary_types_allowed=True)


_SettingsFields = create_model(
    "_SettingsFields", __base__=_Config, __module__=__name__, **settings_fields(notes=_NOTES)
)


class MFSFields(_SettingsFields):  # type: ignore[misc, valid-type]
    """The fields: the flat settings (same name, type and default as :class:`MFSSettings`'),
    ``model_kwargs``, then ``method``, ``stop`` and ``timeout``. Declarations only;
    :class:`~langchain_mfs._base.MFSParams` resolves and uses them."""

    model_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Every other :class:`MFSSettings` setting, by name (``{"dtype": "bfloat16", "stop_epsilon": 0.05}``):
    load-time ones (dtype, batch size, vLLM's engine, the prompt format) and the methods' parameters (ε, λ, the
    baselines' knobs). Validated with the flat fields; a flat field's name or an unknown name is refused.
    Those not given take ``MFS_*`` variables, else the defaults (or the injected engine's settings)."""

    method: str = "mfs"
    """Registered decoder (default ``"mfs"``; baselines where installed)."""
    stop: list[str] | None = None
    """Stop sequences applied to every call, together with the call's own ``stop``: the
    returned text is cut before the first occurrence of any of them (default None)."""
    timeout: float | None = None
    """Most seconds a call waits for its decodes (default None: no limit). On timeout the
    call raises ``TimeoutError`` and abandons its decodes, as a cancelled async call or a
    stream closed early does: the engine drops them at its next round boundary (after the
    model call in flight), so ``with_retry`` / ``with_fallbacks`` never pile work onto it."""
