"""DeepConf online: warm-up traces set a confidence threshold; later traces stop when a group falls under it.

Fu et al., "Deep Think with Confidence" (2025, arXiv 2508.15260), section 3.2 and Algorithm 2,
and the authors' code (``facebookresearch/deepconf`` at commit ``675529d``: ``deepconf/wrapper.py``
``_deepthink_online`` and ``_perform_basic_voting``, ``deepconf/processors.py``; line numbers
below are of that commit). The confidence measures are :mod:`mfs_core.confidence`.

1. **Warm-up** (``wrapper.py:191-212``): ``deepconf_warmup`` traces sampled to the end, each
   token with its top-``k`` raw log-probs; a trace's score is its lowest group confidence.
2. **Threshold** (``wrapper.py:208``): ``s``, the percentile of the warm-up scores that keeps
   the top ``deepconf_keep`` of them. Warm-up traces scoring at least ``s`` vote
   (``wrapper.py:312-316``); the others are discarded.
3. **Online traces**, ``deepconf_batch_size`` at a time: each is generated in chunks of
   ``deepconf_chunk_tokens`` tokens, and after each chunk it is stopped as soon as a full
   group's confidence is below ``s`` (``processors.py:43-51`` stops at the token, in a vLLM
   logits processor: here the stop happens at chunk granularity, and the tokens of the chunk
   after the crossing are generated and counted). A stopped trace is discarded from the vote,
   and so is a finished one whose score is below ``s`` (``wrapper.py:250-252, 320-321``: a
   trace shorter than a group cannot be stopped online); its tokens still count.
4. **Vote**: each kept trace that states an answer votes with its score as weight
   (``wrapper.py:315,324``: the lowest group confidence, ``min_conf``); the answer is the
   weighted majority (ties to the highest mean log-prob per token). After the warm-up and
   after each batch, sampling stops once the leading answer's share of the weight
   ``β = V(â) / Σ_a V(a)`` reaches ``deepconf_consensus`` (the paper's consensus stop; the
   authors' code has none and samples the whole budget, ``wrapper.py:223-235``), or once
   ``deepconf_max_traces`` traces were sampled.

Chunks continue the text (``prompt + text so far``), as MFS's steps do, so a chunk boundary
inside a word is re-tokenized by the backend; an end marker split across two chunks is found
in the joined text. Where the code departs elsewhere: :mod:`mfs_core.confidence`; and
``deepthink()`` with its default ``compute_multiple_voting=True`` reports the plain majority of
the kept traces as its final answer (``wrapper.py:156-159``), while the basic vote it replaces,
followed here, is the weighted one the paper describes.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field

from mfs_core.answers import AnswerExtractor, extract_answer, majority_vote
from mfs_core.confidence import first_group_below, stopping_threshold, trace_score
from mfs_core.decoders.common import (
    Decoder, TokenTally, ask_for_answers, decode_rng, finish_result, report_step, request_seed, vote_summary,
)
from mfs_core.settings import MFSSettings
from mfs_core.types import Candidate, Continuation, GenerationRequest, StepTrace

__all__ = ["decode_deepconf"]


@dataclass
class _Trace:
    """One trace: its text so far, its tokens and their confidences, and what became of it."""

    text: str = ""
    tokens: int = 0
    logprob_sum: float = 0.0
    confidences: list[float] = field(default_factory=list)
    finish_reason: str | None = None  # set once it is done ("stop", "eos", "length")
    stopped_at: int | None = None  # tokens at which a full group fell below the threshold
    score: float = 0.0
    kept: bool = False
    answer: str | None = None
    triggered: bool = False

    def extend(self, cont: Continuation, asked: int, settings: MFSSettings) -> None:
        """Append one chunk of at most ``asked`` tokens (or a whole warm-up trace); the trace is
        done at the end marker (also one split across two chunks), EOS, ``max_answer_tokens``,
        or a chunk the backend cut short (the context window)."""
        require_confidences(cont, settings)
        self.text += cont.text
        self.tokens += cont.num_tokens
        self.logprob_sum += cont.logprob_sum
        self.confidences += cont.token_confidences
        cut = self.text.find(settings.end_marker)
        if cut >= 0:
            self.text, self.finish_reason = self.text[:cut], "stop"
        elif cont.finish_reason != "length":
            self.finish_reason = cont.finish_reason
        elif cont.num_tokens < asked or self.tokens >= settings.max_answer_tokens:
            self.finish_reason = "length"

    @property
    def quality(self) -> float:
        """Mean raw log-prob per token (nats), the tie-break of the vote."""
        return self.logprob_sum / self.tokens if self.tokens else 0.0

    def candidate(self) -> Candidate:
        """The trace as a trace candidate: ``selected`` = kept (it votes); ``pruned`` = stopped early
        (as MFS's width pruning, its generation was cut short); neither = discarded under the threshold."""
        return Candidate(beam_index=0, text=self.text, step_logprob=self.quality, step_tokens=self.tokens,
                         finished=self.finish_reason in ("stop", "eos"), pruned=self.stopped_at is not None,
                         selected=self.kept, answer=self.answer, confidence=self.score)


def require_confidences(cont: Continuation, settings: MFSSettings) -> None:
    """Raise the one-line error of a backend that reported no token confidences.

    Raises:
        ValueError: ``cont`` has not one token confidence per token.
    """
    if len(cont.token_confidences) != cont.num_tokens:
        msg = (f"method 'deepconf' needs the top-{settings.deepconf_top_logprobs} log-probs of every sampled token "
               f"(GenerationRequest.top_logprobs); the backend reported {len(cont.token_confidences)} token "
               f"confidences for {cont.num_tokens} tokens: use the transformers, vllm or openai backend")
        raise ValueError(msg)


def _sample_in_chunks(
    batch: list[_Trace], request: Callable[[str, int, int], GenerationRequest], tally: TokenTally,
    settings: MFSSettings, threshold: float,
) -> Generator[list[GenerationRequest], list[list[Continuation]], None]:
    """Extend every trace of ``batch`` by chunks of ``deepconf_chunk_tokens`` tokens (one request per live
    trace per round, counted in ``tally``) until it finishes or a full group of ``deepconf_window`` tokens
    falls below ``threshold`` (``_Trace.stopped_at``; ``deepconf/processors.py:43-51``, at chunk granularity).

    Args:
        batch: the traces, changed in place.
        request: makes the request continuing a trace's text for ``n`` samples of ``max_tokens`` tokens.
        tally: the decode's token totals.
        settings: gives ``deepconf_chunk_tokens``, ``max_answer_tokens`` and ``deepconf_window``.
        threshold: the stopping threshold ``s`` (nats).
    """
    while live := [t for t in batch if t.finish_reason is None and t.stopped_at is None]:
        chunk = [request(t.text, 1, min(settings.deepconf_chunk_tokens, settings.max_answer_tokens - t.tokens))
                 for t in live]
        outputs = yield chunk
        tally.add(chunk, outputs)
        for trace, req, conts in zip(live, chunk, outputs):
            checked = len(trace.confidences)
            trace.extend(conts[0], req.max_tokens, settings)
            trace.stopped_at = first_group_below(trace.confidences, settings.deepconf_window, threshold,
                                                 start=checked)


def _close_round(traces: list[_Trace], everything: list[_Trace], steps: list[StepTrace], head: str,
                 settings: MFSSettings) -> str:
    """Record the step of ``traces`` (appended to ``steps`` and reported) and test the consensus over the kept
    traces of ``everything`` (β of the score-weighted vote against ``deepconf_consensus``) and the budget
    (``deepconf_max_traces``).

    Returns:
        The stop reason, ``"consensus"`` or ``"max_traces"``, or ``""`` to sample another batch.
    """
    tau, budget = settings.deepconf_consensus, settings.deepconf_max_traces
    voters = [t for t in everything if t.kept and t.answer is not None]
    vote = majority_vote([t.answer for t in voters], [t.quality for t in voters],
                         [t.score for t in voters]) if voters else None
    beta = vote.vote_share if vote is not None else 0.0
    if beta >= tau:
        reason, verdict = "consensus", f">= τ = {tau:g}: stop"
    elif len(everything) >= budget:
        reason, verdict = "max_traces", f"< τ = {tau:g}; deepconf_max_traces = {budget} reached: stop"
    else:
        more = min(settings.deepconf_batch_size, budget - len(everything))
        reason, verdict = "", f"< τ = {tau:g}: sample {more} more"
    kept = [t for t in traces if t.kept]
    step = StepTrace(step=len(steps), candidates=[t.candidate() for t in traces], converged=reason == "consensus",
                     note=f"{head}; their votes {vote_summary([t.answer for t in kept], [t.score for t in kept])}; "
                          f"leader {vote.answer if vote else None} holds β = {beta:.3f} of the weight {verdict}")
    steps.append(step)
    report_step(step, [])
    return reason


def decode_deepconf(prompt: str, settings: MFSSettings, answer_key: AnswerExtractor | None = None) -> Decoder:
    """DeepConf online (Fu et al., 2025, Algorithm 2): warm-up, threshold, early-stopped traces, weighted vote.

    Steps and the authors' code lines they follow: the module docstring. Every request asks
    ``top_logprobs = deepconf_top_logprobs``, is sampled at ``settings.temperature`` and
    ``top_p``, stopped at ``settings.end_marker`` or ``max_answer_tokens`` per trace, with a seed from
    :func:`~mfs_core.decoders.common.decode_rng`. The warm-up is one request (``n =
    deepconf_warmup``); each later round sends one request per live trace of the batch, for
    at most ``deepconf_chunk_tokens`` tokens. Traces that state no answer get the answer
    trigger when ``settings.answer_trigger`` is set (one more request per round).

    The trace has one :class:`~mfs_core.types.StepTrace` for the warm-up and one per batch
    (reported as steps, so the engine streams them): the traces as candidates (``confidence``:
    the score, nats; ``selected``: kept, it votes; ``pruned``: stopped early; neither: discarded
    under the threshold; ``answer``), and a ``note`` with the threshold, the stops and the
    consensus share against ``τ``.

    Args:
        prompt: the rendered model prompt.
        settings: uses the ``deepconf_*`` settings, ``temperature``, ``top_p``, ``seed``,
            ``max_answer_tokens`` (tokens), ``end_marker``, ``answer_trigger``, ``aggregation``.
        answer_key: what the vote groups traces by (default: the extracted answer).

    Yields:
        Request lists: the warm-up, then one per chunk round (and trigger rounds).

    Returns:
        The :class:`~mfs_core.types.DecodeResult`, ``method="deepconf"``: the kept traces that
        state an answer as completions (every kept trace when none does), weighted by their
        scores (``completion_weights``); ``stop_reason`` ``"consensus"`` or ``"max_traces"``;
        ``search_settings`` with the threshold.

    Raises:
        ValueError: the backend reported no token confidences (:func:`require_confidences`).
    """
    rng = decode_rng(settings, prompt)
    key = answer_key if answer_key is not None else extract_answer
    window, budget = settings.deepconf_window, settings.deepconf_max_traces
    tally, steps, everything = TokenTally(), [], []  # token totals; StepTrace per round; every _Trace sampled

    def request(text: str, n: int, max_tokens: int) -> GenerationRequest:
        return GenerationRequest(
            prompt=prompt + text, n=n, max_tokens=max_tokens, stop=(settings.end_marker,),
            temperature=settings.temperature, top_p=settings.top_p, seed=request_seed(rng),
            top_logprobs=settings.deepconf_top_logprobs,
        )

    def read_answers(traces: list[_Trace]) -> Generator[list[GenerationRequest], list[list[Continuation]], None]:
        """Read the traces' answers (the kept ones' after the answer trigger, when set, for those that state
        none; the discarded ones' for the trace only)."""
        kept = [t for t in traces if t.kept]
        texts, asked = yield from ask_for_answers(prompt, [t.text for t in kept], settings, tally, answer_key)
        for trace, text, was_asked in zip(kept, texts, asked or [False] * len(kept)):
            trace.text, trace.triggered = text, was_asked
        for trace in traces:
            trace.answer = key(trace.text)

    warmup = [_Trace() for _ in range(settings.deepconf_warmup)]
    first = request("", settings.deepconf_warmup, settings.max_answer_tokens)
    outputs = yield [first]
    tally.add([first], outputs)
    for trace, cont in zip(warmup, outputs[0]):
        trace.extend(cont, first.max_tokens, settings)
        trace.score = trace_score(trace.confidences, window)
    threshold = stopping_threshold([t.score for t in warmup], settings.deepconf_keep)
    for trace in warmup:
        trace.kept = trace.score >= threshold
    yield from read_answers(warmup)
    everything += warmup
    scores = ", ".join(f"{t.score:.3f}" for t in warmup)
    stop = _close_round(warmup, everything, steps, f"warm-up: {len(warmup)} traces scored {scores}; "
                        f"threshold s = {threshold:.3f} keeps {sum(t.kept for t in warmup)}", settings)
    while not stop:
        batch = [_Trace() for _ in range(min(settings.deepconf_batch_size, budget - len(everything)))]
        everything += batch
        yield from _sample_in_chunks(batch, request, tally, settings, threshold)
        for trace in batch:
            trace.score = trace_score(trace.confidences, window)
            trace.kept = trace.stopped_at is None and trace.score >= threshold
        yield from read_answers(batch)
        stopped = [str(t.stopped_at) for t in batch if t.stopped_at is not None]
        where = f" (at {', '.join(stopped)} tokens)" if stopped else ""
        head = (f"round {len(steps)}: {len(batch)} traces in chunks of {settings.deepconf_chunk_tokens} tokens; "
                f"{len(stopped)} stopped under s = {threshold:.3f}{where}, {sum(t.kept for t in batch)} kept")
        stop = _close_round(batch, everything, steps, head, settings)
    voters = [t for t in everything if t.kept and t.answer is not None] or [t for t in everything if t.kept]
    return finish_result(
        [t.text for t in voters], [t.quality for t in voters], settings, tally, stop_reason=stop, steps=steps,
        method="deepconf", weights=[t.score for t in voters], answer_key=answer_key,
        triggered=[t.triggered for t in voters] if settings.answer_trigger is not None else (),
        search_settings={
            "deepconf_top_logprobs": settings.deepconf_top_logprobs, "deepconf_window": window,
            "deepconf_warmup": settings.deepconf_warmup, "deepconf_keep": settings.deepconf_keep,
            "deepconf_batch": settings.deepconf_batch_size, "deepconf_chunk_tokens": settings.deepconf_chunk_tokens,
            "deepconf_consensus": settings.deepconf_consensus, "deepconf_max_traces": budget, "threshold": threshold,
            "temperature": settings.temperature, "top_p": settings.top_p,
        },
    )
