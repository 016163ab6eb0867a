"""The LangChain fields of :class:`~langchain_mfs.MFSLLM` and :class:`~langchain_mfs.ChatMFS`.

Every :class:`~mfs_core.settings.MFSSettings` field, derived from the settings (same name,
type, default and description, :func:`mfs_core.call.settings_fields`: nothing copied by
hand, so a setting added there is a field here), then the adapter's own ``method``, ``stop``
and ``timeout``. How the fields are filled (keywords, ``MFS_*`` variables, an injected
engine) and used is :class:`~langchain_mfs._base.MFSParams`'s.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, create_model

from mfs_core.call import settings_fields
from mfs_core.settings import MFSSettings

__all__ = ["SETTINGS_FIELDS", "MFSFields"]

SETTINGS_FIELDS: tuple[str, ...] = tuple(MFSSettings.model_fields)
"""Names of the :class:`MFSSettings` fields, each also a field of the LangChain classes."""

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
    """The fields: every :class:`MFSSettings` field (same name, type and default), then
    ``method``, ``stop`` and ``timeout``. Declarations only; :class:`~langchain_mfs._base.MFSParams`
    resolves and uses them."""

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
