"""Each method's own parameters: one pydantic model per decoder, checked per call.

vLLM splits what is fixed when a model loads (``EngineArgs``) from what each request sets
(``SamplingParams``); so does this library. What loads and reaches the model is
:class:`~mfs_core.settings.BackendSettings` (:data:`~mfs_core.backend_identity.BACKEND_FIELDS`:
backend, model, dtype, device, server, ...), fixed per engine. Everything else is per call, and each
method takes only its own: :data:`COMMON_PARAMS` (prompt, sampling and answer settings every method
reads) and the method's (``mfs``: ``step_beam_size``, ``num_rollouts``, ε, λ, ...; ``sc``:
``num_samples``, ...). A :class:`DecoderSpec <mfs_core.decoders.DecoderSpec>` carries its model as
``params``; a call's keywords (LangChain's and LlamaIndex's ``invoke(..., num_samples=4)``, the
server's request body) are checked against it before anything decodes: a name the method does not
read, or a value out of range, is one line naming it and what is allowed.

The fields are :class:`~mfs_core.settings.MFSSettings`' own (same names, types, ranges, defaults and
descriptions, declared once there), so a params model is the settings a method reads, and a call's
checked values change the caller's settings for that call alone.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from mfs_core.backend_identity import BACKEND_FIELDS
from mfs_core.errors import MFSError, one_line
from mfs_core.settings import MFSSettings

__all__ = [
    "COMMON_PARAMS", "CoTParams", "DeepConfParams", "ESCParams", "MFSParams", "MethodParams", "ParamNotAccepted",
    "PhiParams", "SCParams", "method_params",
]

COMMON_PARAMS: tuple[str, ...] = (
    "seed", "temperature", "top_p", "max_answer_tokens", "generate_timeout", "prompt_format", "assistant_prefix",
    "system_prompt", "step_delimiter", "end_marker", "answer_trigger", "answer_trigger_tokens", "tool_call_parser",
    "constrain_tool_names", "constrain_actions",
)
"""Per-call settings every method reads: the seed, sampling (``temperature``, ``top_p``; greedy ``cot`` ignores
them), the answer's length and deadline, and how a prompt is rendered and its answer or tool call read."""

_VOTE = ("aggregation", "vote_quality_beta", "answer_stop_alpha")
"""Settings of a vote over sampled answers: the tie rule, foresight-weighted votes, the anytime-valid answer stop."""


class ParamNotAccepted(MFSError, ValueError):
    """A call gave a parameter its method does not read (a ``ValueError``; one line naming it and the method's).

    Attributes:
        names: the parameters refused, in the call's order.
    """

    def __init__(self, message: str, names: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.names = tuple(names)


class MethodParams(BaseModel):
    """Base of the per-method parameter models: frozen, unknown names refused (:meth:`check`).

    Subclasses are built by :func:`method_params` from :class:`MFSSettings` fields.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    method_fields: ClassVar[tuple[str, ...]] = ()
    """The method's own fields, without :data:`COMMON_PARAMS` (set by :func:`method_params`; a class attribute)."""

    @classmethod
    def check(cls, values: Mapping[str, Any], *, method: str) -> dict[str, Any]:
        """``values`` checked as this method's parameters, each value validated against its range.

        Args:
            values: parameter name -> value, as a call gives them (None values are "not given" and pass).
            method: the method's name, for the messages.

        Returns:
            The values given, validated (pydantic's coercion applied), in their order.

        Raises:
            ParamNotAccepted: a name that is not one of this method's parameters (one line: the name,
                the closest valid one, the method's own parameters; the common ones named as such).
            pydantic.ValidationError: a value out of range (one line naming field, value and range).
        """
        fields = cls.model_fields
        unknown = sorted(name for name in values if name not in fields)
        if unknown:
            own = ", ".join(cls.method_fields) or "none"
            names = ", ".join(repr(name) for name in unknown)
            msg = (f"method {method!r} does not take {names}; its parameters: {own}, and the common "
                   f"ones ({', '.join(COMMON_PARAMS)})")
            raise ParamNotAccepted(msg, unknown)
        given = {name: value for name, value in values.items() if value is not None}
        try:
            checked = cls.model_validate(given)
        except ValidationError as exc:
            raise one_line(exc, MFSSettings) from None
        return {name: getattr(checked, name) for name in given}


def method_params(name: str, fields: Iterable[str], doc: str) -> type[MethodParams]:
    """A :class:`MethodParams` model of :data:`COMMON_PARAMS` and ``fields``, declared by :class:`MFSSettings`.

    Args:
        name: the class name (``"SCParams"``).
        fields: the method's own :class:`MFSSettings` field names, in order.
        doc: the class docstring.

    Raises:
        ValueError: a name in ``fields`` is not an :class:`MFSSettings` field or is a backend (load-time) field.
    """
    own = tuple(fields)
    bad = sorted(set(own) - set(MFSSettings.model_fields) | set(own) & set(BACKEND_FIELDS))
    if bad:
        msg = f"{name}: not per-call MFSSettings fields: {bad}"
        raise ValueError(msg)
    declared = {field: (MFSSettings.model_fields[field].annotation, copy.copy(MFSSettings.model_fields[field]))
                for field in (*COMMON_PARAMS, *own)}
    model = create_model(name, __base__=MethodParams, __module__=__name__, __doc__=doc, **declared)
    model.method_fields = own
    return model


CoTParams = method_params("CoTParams", (), "Greedy chain of thought ``cot``: the common parameters alone.")
SCParams = method_params(
    "SCParams", ("num_samples", "sc_round_size", *_VOTE),
    "Self-consistency ``sc`` (Wang et al., 2023): k = ``num_samples`` completions and their vote.",
)
ESCParams = method_params(
    "ESCParams", ("esc_window", "esc_max_samples", "sc_round_size", *_VOTE),
    "Early-stopping self-consistency ``esc`` (Li et al., ICLR 2024): windows of answers until one window agrees.",
)
DeepConfParams = method_params(
    "DeepConfParams", ("deepconf_top_logprobs", "deepconf_window", "deepconf_warmup", "deepconf_keep", "deepconf_batch",
                       "deepconf_chunk_tokens", "deepconf_consensus", "deepconf_max_traces"),
    "DeepConf online ``deepconf`` (Fu et al., 2025): traces cut by their group confidence, a confidence-weighted vote.",
)
PhiParams = method_params(
    "PhiParams", ("step_beam_size", "num_rollouts", "max_step_tokens", "max_steps", "selection_temperature"),
    "φ-Decoding ``phi`` (Xu et al., 2025): M beams, N candidates each, foresight-sampled step selection.",
)
MFSParams = method_params(
    "MFSParams",
    ("step_beam_size", "num_rollouts", "max_step_tokens", "max_steps", "min_steps", "foresight_rollouts",
     "prune_lambda", "stop_epsilon", "selection_temperature", "foresight_window", "convergence_stop", *_VOTE,
     "share_foresight", "reuse_rollouts", "vote_rollouts", "answer_stop_confidence", "convergence_min_paths",
     "early_stopping", "width_pruning", "convergence_finish", "baseline", "selection", "max_finished_fraction",
     "rollout_temperature"),
    "Martingale Foresight Sampling ``mfs`` and ``mfs-paper``: M = ``step_beam_size`` beams, N = ``num_rollouts`` "
    "candidates each, λ (``prune_lambda``), ε (``stop_epsilon``) and the search's rules (MFS_SPEC.md).",
)
