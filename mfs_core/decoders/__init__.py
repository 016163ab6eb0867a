"""Decoders: coroutines that yield generation requests and return a ``DecodeResult``.

All share one signature, ``decoder(prompt: str, settings: MFSSettings) -> Decoder``, and are
looked up by name in :data:`DECODERS`.
"""

from __future__ import annotations

from collections.abc import Callable

from mfs_core.decoders.baselines import (
    decode_cot,
    decode_sc_rollout_temperature,
    decode_self_consistency,
    with_overrides,
)
from mfs_core.decoders.common import Decoder
from mfs_core.decoders.deepconf import decode_deepconf
from mfs_core.decoders.esc import decode_esc
from mfs_core.decoders.mfs import decode_mfs
from mfs_core.decoders.phi import decode_phi, decode_phi_release
from mfs_core.settings import MFSSettings

__all__ = ["DECODERS", "SELECTING_DECODERS", "Decoder", "DecoderFactory", "get_decoder"]

DecoderFactory = Callable[[str, MFSSettings], Decoder]

PAPER_RULES = {"vote_rollouts": False, "answer_stop_confidence": None, "convergence_min_paths": 1,
               "rollout_temperature": None}
"""The rules of issue 35 switched off: the paper's vote over the kept beams, its convergence stop alone, and
rollouts sampled at the candidates' temperature. ``mfs-paper`` (and ``mfs-shared``, issue 24's default: one
foresight estimate per distinct path) run under them."""

DECODERS: dict[str, DecoderFactory] = {
    "mfs": decode_mfs,
    "cot": decode_cot,
    "sc": decode_self_consistency,
    "sc-rollout-temperature": decode_sc_rollout_temperature,
    "esc": decode_esc,
    "deepconf": decode_deepconf,
    "phi": decode_phi,
    "phi-release": decode_phi_release,
    "mfs-no-stop": with_overrides(decode_mfs, "mfs-no-stop", early_stopping=False),
    "mfs-no-prune": with_overrides(decode_mfs, "mfs-no-prune", width_pruning=False),
    "mfs-converged-rollouts": with_overrides(decode_mfs, "mfs-converged-rollouts", convergence_finish="converged_rollouts"),
    "mfs-paper": with_overrides(decode_mfs, "mfs-paper", **PAPER_RULES, share_foresight=False, reuse_rollouts=False),
    "mfs-shared": with_overrides(decode_mfs, "mfs-shared", **PAPER_RULES),
    "mfs-rollout-vote": with_overrides(decode_mfs, "mfs-rollout-vote", vote_rollouts=True, answer_stop_confidence=0.95),
    "mfs-answer-stop": with_overrides(decode_mfs, "mfs-answer-stop", answer_stop_confidence=0.95),
    "mfs-min-paths": with_overrides(decode_mfs, "mfs-min-paths", convergence_min_paths=2),
    "mfs-same-temperature": with_overrides(decode_mfs, "mfs-same-temperature", rollout_temperature=None),
    "mfs-weighted-vote": with_overrides(decode_mfs, "mfs-weighted-vote", vote_rollouts="weighted"),
    "mfs-weighted-answer-stop": with_overrides(decode_mfs, "mfs-weighted-answer-stop", vote_rollouts="weighted",
                                               answer_stop_confidence=0.95),
    "mfs-reuse-only": with_overrides(decode_mfs, "mfs-reuse-only", **PAPER_RULES, share_foresight=False,
                                     reuse_rollouts=True),
    "mfs-share-reuse": with_overrides(decode_mfs, "mfs-share-reuse", **PAPER_RULES, share_foresight=True,
                                      reuse_rollouts=True),
}

SELECTING_DECODERS = frozenset({"phi", "phi-release"})
"""Decoders that choose their final completion by their own rule, not by a vote: their
``answer_key`` only reads the completions' answers (a multiple-choice
:class:`~mfs_core.answers.OptionAnswer`); an action vote is refused (``MFSEngine.submit_prompts``)."""


def get_decoder(method: str) -> DecoderFactory:
    """The decoder registered as ``method``.

    Raises:
        ValueError: unknown name; the message lists the known ones.
    """
    try:
        return DECODERS[method]
    except KeyError:
        msg = f"unknown decoding method {method!r}; known: {sorted(DECODERS)}"
        raise ValueError(msg) from None
