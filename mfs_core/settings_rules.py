"""The descriptions and the cross-field rule of the settings of the search rules aimed at MFS's measured failures.

:class:`mfs_core.settings.MFSSettings` declares the fields (``foresight_window``, ``answer_stop_alpha``,
``convergence_stop``, ``vote_quality_beta`` in its MFS section, ``sc_round_size`` beside ESC's); their
descriptions live here so that the settings module stays under 600 lines. Every default keeps the
search as it was before these rules: a seeded decode gives the same output with them unset.
"""

from __future__ import annotations


__all__ = ["RULE_DESCRIPTIONS", "check_rules"]

RULE_DESCRIPTIONS: dict[str, str] = {
    "foresight_window": (
        "W, foresight over a fixed-length window, in [1, 65536] (tokens): a foresight rollout's quality F is the "
        "mean log-prob per token of its first W tokens (a shorter rollout: all of them), so that F does not drift "
        "with the length of what is left of the path (log-likelihood stays length-biased even per token, arXiv "
        "2606.01682). Each rollout, and each completion sampled at the finish, is then two requests: its first W "
        "tokens, then the rest from after their text (one more round per step). None, the default: F over the "
        "whole rollout (eq. 3). Needs reuse_rollouts=False."
    ),
    "answer_stop_alpha": (
        "α, the level of an anytime-valid stop on the answers drawn so far, in (0, 1): sampling stops once an "
        "answer is certified as the sampler's most likely (an e-process of each answer against the most frequent "
        "other one reaching j(j+1)/α for the j-th answer to appear, mfs_core.martingale.anytime_lead); when draws "
        "are independent given the past, a non-mode is ever certified with probability <= α, however the stop is "
        "timed (Ville's inequality). Read by `mfs` (each distinct foresight rollout and each finished candidate is "
        "one draw; tested after each step from min_steps on, beside eq. 12, or in its place with "
        "convergence_stop=False), `sc` (after each round of sc_round_size) and `esc` (after each window, in place "
        "of its unanimity test). None, the default: off."
    ),
    "convergence_stop": (
        "Apply eq. 12's convergence stop, max V <= ε_stop (when early_stopping). False: a search stops only on its "
        "answers (answer_stop_alpha, answer_stop_confidence), a full or finished pool, or max_steps: no stop that "
        "the drift of F along a path can fire. True, the default: the paper's."
    ),
    "vote_quality_beta": (
        "β of a quality-weighted vote, in [0, 1000] (per nat per token): each voted path counts exp(β·(F - max F)), "
        "F its quality (a rollout's or completion's mean log-prob per token, over the window with foresight_window; "
        "a finished candidate's step log-prob), times its copies with vote_rollouts='weighted'. Read by `mfs` (over "
        "the kept beams, or with vote_rollouts over every distinct rollout, once each, and every finished "
        "candidate), `sc` and `esc` (over their samples). None, the default: one vote each."
    ),
    "sc_round_size": (
        "Method `sc`: answers sampled per round, in [1, 4096] (answers; the last round takes what is left of k = "
        "num_samples); after each round answer_stop_alpha, when set, may stop the sampling. None, the default: "
        "all k in one request, as self-consistency samples them."
    ),
}
"""Each rule setting's description (what it does, unit, range, default), by field name."""


def check_rules(foresight_window: int | None, reuse_rollouts: bool) -> None:
    """The cross-field rule of these settings, called by ``MFSSettings``' model validator with their values.

    Args:
        foresight_window: ``MFSSettings.foresight_window`` (tokens, or None).
        reuse_rollouts: ``MFSSettings.reuse_rollouts``.

    Raises:
        ValueError: ``foresight_window`` set with ``reuse_rollouts`` (a reused rollout remainder was
            sampled from the parent beam and has no window of its own).
    """
    if foresight_window is not None and reuse_rollouts:
        msg = (f"foresight_window ({foresight_window}) needs reuse_rollouts=False: a reused rollout "
               "remainder has no window of its own")
        raise ValueError(msg)
