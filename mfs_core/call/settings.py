"""Settings resolution for the front ends: their fields from :class:`MFSSettings`, and fields back to settings.

The adapters keep as flat fields only the settings users turn often (:data:`ADAPTER_FIELDS`, declared
from :class:`MFSSettings` by :func:`settings_fields`: nothing copied by hand), as ``ChatOllama`` keeps
``temperature`` and ``num_ctx`` flat; every other setting goes in one ``model_kwargs`` dict
(:func:`check_model_kwargs`), as ``ChatOpenAI``'s and LlamaIndex's ``HuggingFaceLLM``'s ``model_kwargs``.
An instance's values become its settings through :func:`settings_from_fields` (or :func:`memo_settings`,
which rebuilds them only when a value changed), and a call changes them with its own keywords
(:meth:`mfs_core.call.CallKeywords.settings_on`). ``max_tokens``, the frameworks' and OpenAI's name, is
``max_answer_tokens`` (:func:`rename_max_tokens`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from mfs_core.errors import unknown_name_message
from mfs_core.settings import MFSSettings

__all__ = [
    "ADAPTER_FIELDS", "SettingsMemo", "adapter_arguments", "check_adapter_arguments", "check_model_kwargs", "memo_settings",
    "rename_max_tokens", "settings_fields", "settings_from_fields",
]

ADAPTER_FIELDS: tuple[str, ...] = (
    "model", "backend", "device", "base_urls", "api_key",
    "seed", "temperature", "top_p", "max_answer_tokens", "system_prompt",
    "step_beam_size", "num_rollouts", "max_steps", "num_samples",
)
"""The :class:`MFSSettings` fields the adapters keep flat: what users turn often.

Which model and where it runs (``model``, ``backend``, ``device``, ``base_urls``, ``api_key``: every
user sets them); the sampling settings LangChain's and LlamaIndex's own models keep flat (``seed``,
``temperature``, ``top_p``, ``max_answer_tokens`` alias ``max_tokens``, ``system_prompt``, which is
also LlamaIndex's own field); the search's width and depth (``step_beam_size`` M, ``num_rollouts`` N,
``max_steps`` T: the paper's knobs, what the docs' tables vary) and self-consistency's k
(``num_samples``). Every other setting (dtype, batch size, vLLM's engine, the prompt format, ε, λ, the
baselines' knobs) goes in ``model_kwargs``, or per call as a keyword."""

SettingsMemo = tuple[tuple[Any, ...], MFSSettings]
"""The values an adapter's settings were built from, and those settings (:func:`memo_settings`)."""


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


def memo_settings(
    memo: SettingsMemo | None, values: Mapping[str, Any], base: MFSSettings, *, none_unset: bool
) -> SettingsMemo:
    """The settings of an adapter's ``values`` on ``base``, rebuilt only when a value differs from ``memo``'s.

    Args:
        memo: what the last call returned, or None.
        values: :class:`MFSSettings` field name -> the adapter's value (its ``model_kwargs``, then its
            flat fields).
        base: the settings resolved when the adapter was built (its engine's, or the ``MFS_*``
            environment and the defaults); nothing is read now.
        none_unset: True (LlamaIndex): a None value leaves the field to ``base``
            (:func:`settings_from_fields`); False (LangChain): every value is the setting itself,
            None included (:meth:`MFSSettings.changed`).

    Returns:
        ``(the values, their settings)``: ``memo`` itself when the values are those it was built from.

    Raises:
        As :func:`settings_from_fields` and :meth:`MFSSettings.changed`.
    """
    key = tuple(values.items())
    if memo is not None and memo[0] == key:
        return memo
    settings = settings_from_fields(values, base=base) if none_unset else base.changed(**values)
    return key, settings


def check_adapter_arguments(owner: str, arguments: Mapping[str, Any], valid: Iterable[str]) -> None:
    """Refuse a constructor argument that is not a field of ``owner``, in one line.

    Args:
        owner: the adapter's class name (``"ChatMFS"``).
        arguments: the arguments given, name -> value.
        valid: every name ``owner`` accepts.

    Raises:
        TypeError: a setting kept out of the flat fields (the message says to pass it in
            ``model_kwargs``), or a name that is no setting (naming the closest valid one).
    """
    valid = set(valid)
    unknown = [name for name in arguments if name not in valid]
    settings = [name for name in unknown if name in MFSSettings.model_fields]
    if settings:
        given = ", ".join(f"{name!r}: {arguments[name]!r:.40}" for name in settings)
        msg = f"{owner} keeps {', '.join(map(repr, settings))} out of its flat fields: pass model_kwargs={{{given}}}"
        raise TypeError(msg)
    if unknown:
        raise TypeError(unknown_name_message(owner, unknown, valid | {"max_tokens"}))


def check_model_kwargs(owner: str, model_kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """An adapter's ``model_kwargs``, checked: every key a setting that is not a flat field.

    Values are validated later, with the rest of the settings (:func:`settings_from_fields`).

    Args:
        owner: the adapter's class name.
        model_kwargs: setting name -> value, or None (none).

    Returns:
        A new dict of the same items.

    Raises:
        TypeError: a key that is a flat field (pass it as the field), or no setting (one line
            naming the closest setting).
    """
    model_kwargs = dict(model_kwargs or {})
    flat = [name for name in model_kwargs if name in ADAPTER_FIELDS or name == "max_tokens"]
    if flat:
        msg = f"{owner}: pass {', '.join(map(repr, flat))} as {'fields' if len(flat) > 1 else 'a field'}, not in model_kwargs"
        raise TypeError(msg)
    unknown = [name for name in model_kwargs if name not in MFSSettings.model_fields]
    if unknown:
        raise TypeError(unknown_name_message(f"{owner}'s model_kwargs", unknown, MFSSettings.model_fields, what="setting"))
    return model_kwargs


def settings_fields(
    *, optional: bool = False, notes: Mapping[str, str] | None = None, overrides: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, tuple[Any, Any]]:
    """The :data:`ADAPTER_FIELDS` as adapter fields, for ``pydantic.create_model``.

    The one place the adapters' settings fields come from: name, type, default and
    description are :class:`MFSSettings`' own, so both adapters declare the same fields with
    nothing copied by hand. Constraints are left to :class:`MFSSettings`, which validates
    every value the adapters resolve.

    Args:
        optional: False (LangChain): the setting's type and default. True (LlamaIndex):
            ``type | None`` defaulting to None, meaning "not set here" (the description says
            where such a field takes its value from).
        notes: field name -> a sentence on what the adapter does with it, appended to the description.
        overrides: field name -> further ``pydantic.Field`` keywords (``exclude=True``).

    Returns:
        Field name -> ``(annotation, FieldInfo)``, in :data:`ADAPTER_FIELDS`' order.
    """
    from pydantic import Field

    notes, overrides = notes or {}, overrides or {}
    fields: dict[str, tuple[Any, Any]] = {}
    for name in ADAPTER_FIELDS:
        field = MFSSettings.model_fields[name]
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


def adapter_arguments(values: Mapping[str, Any]) -> dict[str, Any]:
    """Settings by name as an adapter's constructor arguments: the flat fields, the rest in ``model_kwargs``.

    ``ChatMFS(**adapter_arguments({"step_beam_size": 4, "dtype": "bfloat16"}))`` is
    ``ChatMFS(step_beam_size=4, model_kwargs={"dtype": "bfloat16"})``: for settings kept as one
    dict (a config file, a bench's settings).

    Args:
        values: setting name (or ``max_tokens``, or an adapter argument such as ``method``) -> value.

    Returns:
        A new dict: every name of :data:`ADAPTER_FIELDS` or not a setting as given, every other
        setting under ``"model_kwargs"`` (merged with a ``model_kwargs`` already in ``values``;
        the key is absent when there is none).
    """
    arguments = {name: value for name, value in values.items() if name not in MFSSettings.model_fields or name in ADAPTER_FIELDS}
    others = {name: value for name, value in values.items() if name in MFSSettings.model_fields and name not in ADAPTER_FIELDS}
    if others:
        arguments["model_kwargs"] = {**arguments.get("model_kwargs", {}), **others}
    return arguments
