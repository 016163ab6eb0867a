"""Settings resolution for the front ends: their fields from :class:`MFSSettings`, and fields back to settings.

The adapters declare every :class:`MFSSettings` field as a field of their own (:func:`settings_fields`:
nothing copied by hand); an instance's field values become its settings through
:func:`settings_from_fields` (or :func:`memo_settings`, which rebuilds them only when a value changed),
and a call changes them with its own keywords (:meth:`mfs_core.call.CallKeywords.settings_on`).
``max_tokens``, the frameworks' and OpenAI's name, is ``max_answer_tokens`` (:func:`rename_max_tokens`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mfs_core.settings import MFSSettings

__all__ = ["SettingsMemo", "memo_settings", "rename_max_tokens", "settings_fields", "settings_from_fields"]

SettingsMemo = tuple[tuple[Any, ...], MFSSettings]
"""The field values an adapter's settings were built from, and those settings (:func:`memo_settings`)."""


def settings_from_fields(values: Mapping[str, Any], *, base: MFSSettings | None = None) -> MFSSettings:
    """The :class:`MFSSettings` an adapter's field values describe.

    Args:
        values: field name -> value, every name a field of :class:`MFSSettings`. A None
            value leaves that field to ``base`` (how adapters declare "not set").
        base: settings the values change (then nothing is read: no environment, no
            ``.env``); None: ``MFSSettings()``, so ``MFS_*`` environment variables, the
            ``.env`` file, then the defaults fill every field not given.

    Returns:
        New frozen settings (``base`` is not changed; ``base`` itself when nothing is given).

    Raises:
        ValueError: a name is not a settings field (the message lists the unknown names).
        pydantic.ValidationError: a value out of range (the message names field and value).
    """
    unknown = sorted(set(values) - set(MFSSettings.model_fields))
    if unknown:
        msg = f"not MFSSettings fields: {unknown}; known: {sorted(MFSSettings.model_fields)}"
        raise ValueError(msg)
    given = {name: value for name, value in values.items() if value is not None}
    if base is None:
        return MFSSettings(**given)
    return base.changed(**given)  # validated; no environment or .env read


def memo_settings(memo: SettingsMemo | None, values: Mapping[str, Any], base: MFSSettings | None) -> SettingsMemo:
    """The settings of an adapter's field ``values``, rebuilt only when a value differs from ``memo``'s.

    Args:
        memo: what the last call returned, or None.
        values: every :class:`MFSSettings` field name -> the adapter's value, in the settings' order.
        base: None: every value is the setting itself (None included) and the settings are built
            from them alone (:meth:`MFSSettings.from_values`: no environment read); settings: a None
            value leaves the field to ``base`` (:func:`settings_from_fields`).

    Returns:
        ``(the values, their settings)``: ``memo`` itself when the values are those it was built from.

    Raises:
        As :func:`settings_from_fields` and :meth:`MFSSettings.from_values`.
    """
    key = tuple(values.values())
    if memo is not None and memo[0] == key:
        return memo
    settings = MFSSettings.from_values(values) if base is None else settings_from_fields(values, base=base)
    return key, settings


def settings_fields(
    *, optional: bool = False, notes: Mapping[str, str] | None = None, overrides: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, tuple[Any, Any]]:
    """Every :class:`MFSSettings` field as an adapter field, for ``pydantic.create_model``.

    The one place the adapters' settings fields come from: name, type, default and
    description are :class:`MFSSettings`' own, so a field added there appears in both
    adapters with nothing copied by hand. Constraints are left to :class:`MFSSettings`,
    which validates every value the adapters resolve. The ablations
    (:data:`mfs_core.settings.ABLATION_FIELDS`) come as one run, in that order, each
    description starting ``"Ablation ("`` with the decoder variants that set it, so a
    framework's field listing shows them grouped and marked.

    Args:
        optional: False (LangChain): the setting's type and default. True (LlamaIndex):
            ``type | None`` defaulting to None, meaning "not set here" (the description says
            where such a field takes its value from).
        notes: field name -> a sentence on what the adapter does with it, appended to the description.
        overrides: field name -> further ``pydantic.Field`` keywords (``exclude=True``).

    Returns:
        Field name -> ``(annotation, FieldInfo)``, in :class:`MFSSettings`' order.
    """
    from pydantic import Field

    notes, overrides = notes or {}, overrides or {}
    fields: dict[str, tuple[Any, Any]] = {}
    for name, field in MFSSettings.model_fields.items():
        default = field.get_default(call_default_factory=True)
        if optional:
            tail = f"None: the injected engine's value, else MFS_{name.upper()} or the MFSSettings default ({default!r})."
            annotation, value = field.annotation | None, None
        else:
            tail = f"Default {default!r}, else MFS_{name.upper()}."
            annotation, value = field.annotation, default
        description = " ".join(part for part in (field.description, notes.get(name), tail) if part)
        extra = {"repr": False} if not field.repr else {}
        fields[name] = (annotation, Field(default=value, description=description, **{**extra, **overrides.get(name, {})}))
    return fields


def rename_max_tokens(values: Mapping[str, Any]) -> dict[str, Any]:
    """Map the frameworks' standard ``max_tokens`` to ``max_answer_tokens`` (tokens).

    Args:
        values: keyword name -> value; ``max_tokens`` may be one of them.

    Returns:
        A new dict: ``values`` with ``max_tokens`` removed and, when not None, given as ``max_answer_tokens``.

    Raises:
        ValueError: both are given with different values.
    """
    values = dict(values)
    if "max_tokens" not in values:
        return values
    max_tokens = values.pop("max_tokens")
    other = values.get("max_answer_tokens")
    if other is not None and max_tokens is not None and other != max_tokens:
        msg = f"give max_tokens or max_answer_tokens, not both (got {max_tokens} and {other})"
        raise ValueError(msg)
    if max_tokens is not None:
        values["max_answer_tokens"] = max_tokens
    return values
