"""The decoder registry: what each registered decoder is and can do, one entry per decoder.

A :class:`DecoderSpec` names a decoder, its factory (a base decoder, plus the settings a
variant overrides), how it picks its final answer, and whether it is self-consistency
(``mfs bench --sc-k`` sets its k). The engine (:func:`~mfs_core.decoders.get_decoder`), the
tool-call planning (:func:`mfs_core.engine.requests.check_answer_key`) and the bench
(:mod:`mfs_core.bench.runner`: which records keep every path's answer, which are scored by
their vote) all read it.

The library registers the methods a user chooses between: greedy ``cot``, self-consistency ``sc``,
``esc``, ``deepconf``, φ-Decoding ``phi``, ``mfs`` and the paper's own search ``mfs-paper``. Anything
else (an ablation, a research variant, your own search) is one :func:`register_decoder` call, after
which ``method=`` in LangChain, LlamaIndex, the server and ``mfs bench`` accept its name
(``experiments/variants.py`` registers the repository's research variants that way).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from mfs_core.decoders.baselines import decode_cot, decode_self_consistency, with_overrides
from mfs_core.backend_identity import BACKEND_FIELDS
from mfs_core.decoders.common import Decoder
from mfs_core.decoders.deepconf import decode_deepconf
from mfs_core.decoders.esc import decode_esc
from mfs_core.decoders.mfs import decode_mfs
from mfs_core.decoders.params import (
    CoTParams, DeepConfParams, ESCParams, MethodParams, MFSParams, PhiParams, SCParams,
)
from mfs_core.decoders.phi import decode_phi
from mfs_core.settings import MFSSettings

__all__ = ["PAPER_RULES", "SPECS", "DecoderFactory", "DecoderSpec", "register_decoder", "search_tokens"]

DecoderFactory = Callable[[str, MFSSettings], Decoder]


@dataclass(frozen=True)
class DecoderSpec:
    """One registered decoder.

    Attributes:
        name: the method name (``method="mfs"``, ``mfs bench --methods``, the server's ``method``).
        decode: the base decoder, ``decode(prompt, settings, answer_key=None) -> Decoder``.
        final: how its answer is chosen: ``"vote"`` (a majority over its completed paths, weighted
            where the decode gives weights; an ``answer_key`` such as an action vote groups them),
            ``"select"`` (its own rule picks one completion, φ-Decoding: an ``answer_key`` may only
            read the completions' answers) or ``"text"`` (one text, greedy CoT).
        samples: self-consistency: its k is ``num_samples`` (``--sc-k``), and the bench keeps
            every sample's answer, so SC at every smaller k is scored from one run.
        overrides: :class:`MFSSettings` fields a variant sets over the caller's settings
            (e.g. ``mfs-no-stop``: ``early_stopping=False``); empty for a decoder of its own.
        params: the method's parameters (:mod:`mfs_core.decoders.params`): what a call may set for it
            (:meth:`check_params`). None: every per-call setting (a decoder that declares none).
        work: the most output tokens one decode can generate under given settings (before the
            variant's overrides; :meth:`worst_case_tokens` applies them): what ``mfs serve`` admits by.
        factory: the decoder the engine runs: ``decode`` with ``overrides`` applied and
            ``DecodeResult.method`` set to ``name`` (:func:`~mfs_core.decoders.baselines.with_overrides`),
            or ``decode`` itself without overrides.

    Raises:
        ValueError: an override names no ``MFSSettings`` field, or ``final`` is not one of the three.
    """

    name: str
    decode: DecoderFactory
    final: Literal["vote", "select", "text"] = "vote"
    samples: bool = False
    overrides: Mapping[str, Any] = field(default_factory=dict)
    params: type[MethodParams] | None = field(default=None, compare=False)
    work: Callable[[MFSSettings], int] | None = field(default=None, repr=False, compare=False)
    factory: DecoderFactory = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.final not in ("vote", "select", "text"):
            msg = f"final must be 'vote', 'select' or 'text', got {self.final!r} (decoder {self.name!r})"
            raise ValueError(msg)
        overrides = MappingProxyType(dict(self.overrides))
        object.__setattr__(self, "overrides", overrides)
        factory = with_overrides(self.decode, self.name, **overrides) if overrides else self.decode
        object.__setattr__(self, "factory", factory)

    def worst_case_tokens(self, settings: MFSSettings) -> int:
        """The most output tokens (sampled tokens, every rollout and completion counted) one decode of this
        decoder can generate under ``settings`` with the variant's overrides applied.

        An upper bound, not an estimate: a search stopped early generates less. Without ``work``, a
        ``samples`` decoder's bound is ``num_samples · max_answer_tokens``, any other's MFS and φ's
        (:func:`search_tokens`): per step, M·N candidates of at most ``max_step_tokens`` and their
        foresight rollouts of at most ``max_answer_tokens``, then M completions; the voting
        baselines: their most samples times ``max_answer_tokens``.
        """
        changed = settings.changed(**self.overrides)
        if self.work is not None:
            return int(self.work(changed))
        if self.samples:  # self-consistency: k = num_samples answers
            return changed.num_samples * changed.max_answer_tokens
        return search_tokens(changed)

    def check_params(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """A call's setting keywords checked as this method's parameters (:meth:`MethodParams.check`).

        Load-time settings (:data:`~mfs_core.backend_identity.BACKEND_FIELDS`: ``model``, ``backend``, ...) are
        not a method's: they pass unchecked here, and the call's engine source decides (an injected engine
        refuses different ones; an owned one is chosen or loaded for them: LangChain's per-call model override).

        Args:
            values: setting name -> value, as the call gives them (``max_tokens`` already ``max_answer_tokens``).

        Returns:
            The values, the method's validated.

        Raises:
            ParamNotAccepted: a per-call setting this method does not read (one line naming it and the method's).
            pydantic.ValidationError: a value out of range (one line naming field, value and range).
        """
        if self.params is None:
            return dict(values)
        method_values = {name: value for name, value in values.items() if name not in BACKEND_FIELDS}
        return {**values, **self.params.check(method_values, method=self.name)}

    @property
    def votes(self) -> bool:
        """True when the final answer is a vote over completed paths (``final == "vote"``)."""
        return self.final == "vote"


PAPER_RULES = {"vote_rollouts": False, "answer_stop_confidence": None, "convergence_min_paths": 1,
               "rollout_temperature": None}
"""The library's additions to the search switched off: the paper's vote over the kept beams, its convergence
stop alone, and rollouts sampled at the candidates' temperature. ``mfs-paper`` runs under them (with one
foresight rollout per candidate, no sharing or reuse: the paper's Algorithm 1)."""


def search_tokens(settings: MFSSettings) -> int:
    """The most output tokens of one MFS (or φ) decode (tokens): ``max_steps · M · N · (max_step_tokens +
    foresight_rollouts · max_answer_tokens) + M · max_answer_tokens`` (each step's candidates and their
    foresight rollouts, then the finish's completions)."""
    s = settings
    per_step = s.step_beam_size * s.num_rollouts * (s.max_step_tokens + s.foresight_rollouts * s.max_answer_tokens)
    return s.max_steps * per_step + s.step_beam_size * s.max_answer_tokens


def _samples(field_name: str) -> Callable[[MFSSettings], int]:
    """The most output tokens of a voting baseline that samples at most ``settings.<field_name>`` answers."""
    return lambda settings: getattr(settings, field_name) * settings.max_answer_tokens


_REGISTRY: dict[str, DecoderSpec] = {}


def register_decoder(spec: DecoderSpec, *, replace: bool = False) -> DecoderSpec:
    """Register ``spec`` under ``spec.name``, so that ``method=spec.name`` selects it everywhere.

    Mirrors a name-to-function search registry (HF search-and-learn's ``sal.search``): the engine,
    the adapters, ``mfs serve`` and ``mfs bench`` look methods up here when a call names one.

    Example::

        from mfs_core.decoders import DecoderSpec, register_decoder
        from mfs_core.decoders.mfs import decode_mfs

        register_decoder(DecoderSpec("mfs-no-stop", decode_mfs, overrides={"early_stopping": False}))

    Args:
        spec: the decoder and what it can do.
        replace: allow a name that is already registered to be replaced (default: refused).

    Returns:
        ``spec``, so the call can stand in an assignment.

    Raises:
        ValueError: ``spec.name`` is empty, has whitespace, or is registered already and ``replace`` is False.
    """
    name = spec.name
    if not name or any(ch.isspace() for ch in name):
        msg = f"a decoder name must be non-empty without whitespace, got {name!r}"
        raise ValueError(msg)
    if name in _REGISTRY and not replace and _REGISTRY[name] != spec:
        msg = f"decoder {name!r} is registered already; pass replace=True to replace it"
        raise ValueError(msg)
    _REGISTRY[name] = spec
    return spec


SPECS: Mapping[str, DecoderSpec] = MappingProxyType(_REGISTRY)
"""Every registered decoder by name, in registration order: a read-only, live view (:func:`register_decoder` adds)."""

for _spec in (
    DecoderSpec("mfs", decode_mfs, params=MFSParams),
    DecoderSpec("cot", decode_cot, final="text", params=CoTParams, work=lambda settings: settings.max_answer_tokens),
    DecoderSpec("sc", decode_self_consistency, samples=True, params=SCParams, work=_samples("num_samples")),
    DecoderSpec("esc", decode_esc, params=ESCParams, work=_samples("esc_max_samples")),  # votes over every sample
    # votes over its kept traces, weighted by their confidence
    DecoderSpec("deepconf", decode_deepconf, params=DeepConfParams, work=_samples("deepconf_max_traces")),
    DecoderSpec("phi", decode_phi, final="select", params=PhiParams),
    DecoderSpec("mfs-paper", decode_mfs, params=MFSParams,
                overrides={**PAPER_RULES, "share_foresight": False, "reuse_rollouts": False}),
):
    register_decoder(_spec)
del _spec
