"""Early-stopping self-consistency (ESC): sample answers in windows, stop at the first unanimous one.

Li et al., "Escape Sky-high Cost: Early-stopping Self-Consistency for Multi-step Reasoning"
(ICLR 2024), section 3, and the authors' code (``Yiwei98/ESC`` at commit ``799157a``,
``early_stop_gsm8k.py``; line numbers below are of that file): answers are sampled in windows
of ``w``; a window whose answers are all equal (zero entropy) stops the sampling
(``early_stop_gsm8k.py:139-143``), otherwise the next window is sampled, up to a maximum
(their GSM8K runs: w = 5, at most 40, lines 98-99); the answer is the majority over everything
sampled (MFS_SPEC.md's summary of the paper). Two departures from that script, both on purpose:

* their script answers a stopped question with the unanimous window's answer (its
  ``pre_dict`` at the ``break`` holds that window only, lines 140-148); this decoder votes over
  every sample. The two differ only when earlier windows hold more votes for another answer
  than the unanimous window adds to its own;
* an answer the extractor cannot read counts as one value, "no answer", as their ``-1000``
  placeholder does (lines 133-136): it breaks a window's unanimity unless the whole window has
  none, and a window with no answer anywhere is unanimous and stops. In the final vote it
  counts for nothing (:func:`~mfs_core.answers.majority_vote` skips None), as in
  :func:`~mfs_core.decoders.baselines.decode_self_consistency`.
"""

from __future__ import annotations

from mfs_core.answers import AnswerExtractor, extract_answer, first_seen_counts, quality_weights
from mfs_core.decoders.common import (
    Decoder, TokenTally, ask_for_answers, decode_rng, finish_result, report_step, request_seed, vote_summary,
)
from mfs_core.martingale import anytime_lead
from mfs_core.settings import MFSSettings
from mfs_core.types import Candidate, GenerationRequest, StepTrace

__all__ = ["decode_esc"]


def decode_esc(prompt: str, settings: MFSSettings, answer_key: AnswerExtractor | None = None) -> Decoder:
    """Early-stopping self-consistency (Li et al., ICLR 2024): windows of samples, stop when one is unanimous.

    Window ``t`` is one request for ``n = min(esc_window, esc_max_samples - sampled)``
    completions at ``settings.temperature`` and ``top_p``, to ``settings.end_marker`` or
    ``max_answer_tokens``, with its own seed from :func:`~mfs_core.decoders.common.decode_rng`
    (the first window's seed is the one :func:`~mfs_core.decoders.baselines.decode_self_consistency`
    draws). After each window (and the answer trigger, when set, on its samples that state no
    answer) its answers are read with ``answer_key`` (default
    :func:`~mfs_core.answers.extract_answer`); when they are all equal, "no answer" counting as
    one value (module docstring), sampling stops (``stop_reason="unanimous_window"``), else the
    next window follows, until ``esc_max_samples`` samples (``"max_samples"``). The answer is the
    majority over every sample, ties broken by the highest mean log-prob per token
    (:func:`~mfs_core.decoders.common.finish_result`, ``settings.aggregation`` applies).

    Two settings change the rule (both off by default): ``answer_stop_alpha`` replaces the
    unanimity test by the anytime-valid one over every sample so far
    (:func:`~mfs_core.martingale.anytime_lead`: an answer certified as the most likely at level α,
    ``stop_reason="answer_certified"``), and ``vote_quality_beta`` weights each sample's vote by
    ``exp(β (F - max F))``, F its mean log-prob per token (:func:`~mfs_core.answers.quality_weights`).

    Each window is one :class:`~mfs_core.types.StepTrace` (reported as a step, so the engine
    streams it): its samples as finished candidates with their answers, ``converged`` when the
    window's stop test fired, and a ``note`` with the window's vote and what it decided.

    Args:
        prompt: the rendered model prompt.
        settings: uses ``esc_window`` (w, answers), ``esc_max_samples`` (answers),
            ``temperature``, ``top_p``, ``seed``, ``max_answer_tokens`` (tokens), ``end_marker``,
            ``answer_trigger``, ``aggregation``, ``answer_stop_alpha``, ``vote_quality_beta``.
        answer_key: what the windows and the vote group samples by (default: the extracted answer).

    Yields:
        One list with one request per window (and one more after a window when
        ``settings.answer_trigger`` asks for answers).

    Returns:
        The :class:`~mfs_core.types.DecodeResult`, ``method="esc"``, every sample a completion.
    """
    rng = decode_rng(settings, prompt)
    key = answer_key if answer_key is not None else extract_answer
    tally = TokenTally()
    texts: list[str] = []
    qualities: list[float] = []
    triggered: list[bool] = []
    steps: list[StepTrace] = []
    stop_reason = "max_samples"
    while len(texts) < settings.esc_max_samples:
        n = min(settings.esc_window, settings.esc_max_samples - len(texts))
        request = GenerationRequest(
            prompt=prompt, n=n, max_tokens=settings.max_answer_tokens, stop=(settings.end_marker,),
            temperature=settings.temperature, top_p=settings.top_p, seed=request_seed(rng),
        )
        outputs = yield [request]
        tally.add([request], outputs)
        conts = outputs[0]
        window, asked = yield from ask_for_answers(prompt, [c.text for c in conts], settings, tally, answer_key)
        answers = [key(text) for text in window]
        texts += window
        qualities += [c.mean_logprob for c in conts]
        triggered += asked
        stopped, verdict, reason = _window_verdict(answers, texts, key, settings)
        stop_reason = reason or stop_reason
        step = StepTrace(
            step=len(steps),
            candidates=[
                Candidate(beam_index=0, text=text, step_logprob=cont.mean_logprob, step_tokens=cont.num_tokens,
                          finished=cont.finish_reason != "length", selected=True, answer=answer)
                for text, cont, answer in zip(window, conts, answers)
            ],
            converged=reason is not None,  # the stop test fired (not only the sample cap)
            note=f"window {len(steps) + 1}: {n} sampled, answers {vote_summary(answers)}; {verdict}",
        )
        steps.append(step)
        report_step(step, [])
        if stopped:
            break
    weights = quality_weights(qualities, settings.vote_quality_beta) if settings.vote_quality_beta is not None else None
    return finish_result(
        texts, qualities, settings, tally, stop_reason=stop_reason, steps=steps, method="esc",
        search_settings={"esc_window": settings.esc_window, "esc_max_samples": settings.esc_max_samples,
                         "temperature": settings.temperature, "top_p": settings.top_p,
                         "answer_stop_alpha": settings.answer_stop_alpha,
                         "vote_quality_beta": settings.vote_quality_beta},
        answer_key=answer_key, triggered=triggered, weights=weights,
    )


def _window_verdict(
    answers: list[str | None], texts: list[str], key: AnswerExtractor, settings: MFSSettings
) -> tuple[bool, str, str | None]:
    """After a window: whether sampling stops, the trace note's verdict, and the stop reason it sets.

    ESC's test: the window's ``answers`` all equal ("no answer" one value). With
    ``answer_stop_alpha``, the anytime-valid test over every sample so far (``texts``) replaces it
    (:func:`~mfs_core.martingale.anytime_lead`: an answer certified as the most likely at level α).
    """
    left = settings.esc_max_samples - len(texts)
    more = f"sample {min(settings.esc_window, left)} more"
    if settings.answer_stop_alpha is not None:
        lead = anytime_lead(list(first_seen_counts([key(text) for text in texts]).values()), settings.answer_stop_alpha)
        if lead.certified:
            return True, f"certified (e-value {lead.e_value:.3g} >= {lead.threshold:.3g}): stop", "answer_certified"
        verdict = f"not certified (e-value {lead.e_value:.3g} < {lead.threshold:.3g})"
    elif len(set(answers)) == 1:  # None is one value: an all-None window is unanimous
        return True, "unanimous: stop", "unanimous_window"
    else:
        verdict = "not unanimous"
    if left <= 0:
        return True, f"{verdict}; esc_max_samples = {settings.esc_max_samples} reached: stop", None
    return False, f"{verdict}: {more}", None
