"""The research variants of the search, registered as decoders through the public :func:`register_decoder`.

The library ships the methods a user chooses between (``cot``, ``sc``, ``esc``, ``deepconf``, ``phi``,
``mfs``, ``mfs-paper``). The variants below exist to study the search: the paper's ablations, the rules
tried on tuning questions, and the φ-Decoding release as published. Importing this module registers
them, so ``method="mfs-no-stop"`` then works in the engine, the adapters and the server;
``mfs bench --plugin experiments.variants --methods mfs,mfs-no-stop`` benches them from a clone.

Each is MFS (or SC, or φ) with some :class:`~mfs_core.settings.MFSSettings` fields overridden; what each
field does is in its description (``mfs_core.settings.ABLATION_FIELDS``) and in docs/benchmarks.md.
"""

from __future__ import annotations

import dataclasses

from mfs_core.answers import AnswerExtractor
from mfs_core.decoders import PAPER_RULES, Decoder, DecoderSpec, register_decoder
from mfs_core.decoders.baselines import decode_self_consistency
from mfs_core.decoders.esc import decode_esc
from mfs_core.decoders.mfs import decode_mfs
from mfs_core.decoders.params import ESCParams, MFSParams, PhiParams, SCParams, method_params
from mfs_core.decoders.phi import PhiConfig, decode_phi
from mfs_core.settings import MFSSettings
from mfs_core.types import DecodeResult

__all__ = ["RULE_VALUES", "VARIANTS", "decode_phi_release", "decode_sc_rollout_temperature"]


def decode_sc_rollout_temperature(prompt: str, settings: MFSSettings,
                                  answer_key: AnswerExtractor | None = None) -> Decoder:
    """Self-consistency sampled at MFS's rollout temperature: ``sc`` with ``temperature =
    settings.rollout_temperature`` (``settings.temperature`` when that is None).

    The baseline that MFS's cooler rollouts owe a comparison to: k votes sampled as cool as MFS's rollouts.

    Returns:
        The :class:`DecodeResult`, ``stop_reason="sampled"``, ``method="sc-rollout-temperature"``.
    """
    result: DecodeResult = yield from decode_self_consistency(
        prompt, settings.changed(temperature=settings.rollout_sampling_temperature), answer_key)
    return dataclasses.replace(result, method="sc-rollout-temperature")


def decode_phi_release(prompt: str, settings: MFSSettings, answer_key: AnswerExtractor | None = None) -> Decoder:
    """φ-Decoding exactly as released: finished steps do not close their beam (``method="phi-release"``)."""
    result = yield from decode_phi(prompt, settings, PhiConfig(close_finished=False), answer_key)
    return dataclasses.replace(result, method="phi-release")


def _mfs(name: str, **overrides: object) -> DecoderSpec:
    """An MFS variant: MFS with ``overrides``, voting as MFS does."""
    return DecoderSpec(name, decode_mfs, overrides=overrides, params=MFSParams)


RULE_VALUES = {"foresight_window": 32, "answer_stop_alpha": 0.1, "vote_quality_beta": 5.0, "sc_round_size": 4,
               "sc_k": 16}
"""The one value each of the rules aimed at MFS's measured failures is tried at, fixed before any run: W = 32 tokens (the longest window
the GSM8K test bed measured, as ``deepconf_window``); α = 0.1 (one answer drawn 8 times in a row certifies it);
β = 5 per nat per token (the ``exp(5F)`` tried before over kept SC samples); SC in rounds of 4 (ESC's window)
up to k = 16 (the top of the bench's SC curve)."""
_W, _ALPHA, _BETA, _ROUND = (RULE_VALUES[name] for name in ("foresight_window", "answer_stop_alpha",
                                                            "vote_quality_beta", "sc_round_size"))


def _sc(name: str, **overrides: object) -> DecoderSpec:
    """A self-consistency variant at k = 16: a method placed on SC's curve at its own tokens, not a curve of its own
    (``samples=False``: ``--sc-k`` leaves it alone, its records keep ``completion_*``)."""
    return DecoderSpec(name, decode_self_consistency, overrides={"num_samples": RULE_VALUES["sc_k"], **overrides},
                       params=SCParams, work=lambda settings: settings.num_samples * settings.max_answer_tokens)


def _esc(name: str, **overrides: object) -> DecoderSpec:
    """An ESC variant: ESC (window 4, at most 16 answers) with ``overrides``."""
    return DecoderSpec(name, decode_esc, overrides=overrides, params=ESCParams,
                       work=lambda settings: settings.esc_max_samples * settings.max_answer_tokens)


VARIANTS: tuple[DecoderSpec, ...] = (
    DecoderSpec("sc-rollout-temperature", decode_sc_rollout_temperature, samples=True,
                params=method_params("SCRolloutTemperatureParams", (*SCParams.method_fields, "rollout_temperature"),
                                     "``sc`` sampled at ``rollout_temperature``."),
                work=lambda settings: settings.num_samples * settings.max_answer_tokens),
    DecoderSpec("phi-release", decode_phi_release, final="select", params=PhiParams),
    _mfs("mfs-no-stop", early_stopping=False),
    _mfs("mfs-no-prune", width_pruning=False),
    _mfs("mfs-converged-rollouts", convergence_finish="converged_rollouts"),
    _mfs("mfs-shared", **PAPER_RULES),
    _mfs("mfs-rollout-vote", vote_rollouts=True, answer_stop_confidence=0.95),
    _mfs("mfs-answer-stop", answer_stop_confidence=0.95),
    _mfs("mfs-min-paths", convergence_min_paths=2),
    _mfs("mfs-same-temperature", rollout_temperature=None),
    _mfs("mfs-weighted-vote", vote_rollouts="weighted"),
    _mfs("mfs-weighted-answer-stop", vote_rollouts="weighted", answer_stop_confidence=0.95),
    _mfs("mfs-reuse-only", **PAPER_RULES, share_foresight=False, reuse_rollouts=True),
    _mfs("mfs-share-reuse", **PAPER_RULES, share_foresight=True, reuse_rollouts=True),
    # the rules aimed at the measured failures, one value each (RULE_VALUES), to be chosen
    # on GSM8K tuning questions 0-199 by the rule written in experiments/benchmarks/rules_tuning.py
    _mfs("mfs-window", foresight_window=_W),
    _mfs("mfs-anytime-stop", answer_stop_alpha=_ALPHA, convergence_stop=False),
    _mfs("mfs-anytime-beside", answer_stop_alpha=_ALPHA),
    _mfs("mfs-quality-vote", vote_rollouts=True, vote_quality_beta=_BETA),
    _mfs("mfs-rules", foresight_window=_W, answer_stop_alpha=_ALPHA, convergence_stop=False, vote_rollouts=True,
         vote_quality_beta=_BETA),
    _sc("sc-anytime", sc_round_size=_ROUND, answer_stop_alpha=_ALPHA),
    _sc("sc-quality-vote", vote_quality_beta=_BETA),
    _sc("sc-rules", sc_round_size=_ROUND, answer_stop_alpha=_ALPHA, vote_quality_beta=_BETA),
    _esc("esc-anytime", answer_stop_alpha=_ALPHA),
    _esc("esc-quality-vote", vote_quality_beta=_BETA),
    _esc("esc-rules", answer_stop_alpha=_ALPHA, vote_quality_beta=_BETA),
)
"""Every research variant, in the order they were added to the study."""

for _spec in VARIANTS:
    register_decoder(_spec)
del _spec
