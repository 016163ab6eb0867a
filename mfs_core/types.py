"""Plain data types shared by backends, decoders and the engine.

Every result is a dataclass (never a tuple read by index) and every ``DecodeResult`` is
JSON-serialisable through :meth:`DecodeResult.to_dict`. Units: token counts in tokens,
log-probabilities in nats, compute in FLOPs.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "Candidate",
    "Continuation",
    "DecodeResult",
    "FinishReason",
    "GenerationRequest",
    "StepTrace",
    "RequestGrammar",
    "TriggeredChoice",
]

FinishReason = Literal["stop", "length", "eos", "abort"]
"""Why a continuation ended: a stop string, ``max_tokens``, the EOS token, or ``"abort"``: its request's
:attr:`GenerationRequest.cancel` was set mid-call (the decode that asked was abandoned; such
continuations go to no decoder: the engine fails the decode at the end of the call)."""


@dataclass(frozen=True)
class TriggeredChoice:
    """A lazy constraint: wherever the text ends with ``trigger``, it continues with one of ``choices``.

    The text is the prompt followed by what has been generated; after a whole choice the
    sampling is free again, until the trigger occurs again. This is how tool calls are
    kept to the declared tools (``trigger='<tool_call>\\n{"name": "'``, ``choices`` the
    tool names each closed by ``", "arguments": ``), as llama.cpp's lazy tool-call grammars and vLLM's
    structural tags with triggers do.

    Attributes:
        trigger: the text that starts the constrained span (non-empty).
        choices: the texts allowed right after it (non-empty strings, at least one).

    Raises:
        ValueError: an empty trigger, no choices, or an empty choice.
    """

    trigger: str
    choices: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "choices", tuple(self.choices))
        if not self.trigger:
            msg = "trigger must be a non-empty string, got ''"
            raise ValueError(msg)
        if not self.choices or not all(self.choices):
            msg = f"choices must be non-empty strings, at least one, got {self.choices!r}"
            raise ValueError(msg)


@dataclass(frozen=True)
class RequestGrammar:
    """The grammar one generation request samples under (grammar-constrained actions).

    Both grammars are xgrammar structural tags as JSON text (``{"type": "structural_tag",
    "format": {...}}``, the format vLLM's ``StructuredOutputsParams(structural_tag=...)`` and
    its server's ``structured_outputs`` take); built by
    :meth:`mfs_core.grammar.ActionGrammar.request_grammar`.

    Attributes:
        structural_tag: the grammar from the start of ``prefix``.
        prefix: the end of the prompt the grammar has already matched (the part of an open
            action written so far; ``""`` when the grammar starts where the prompt ends). A
            backend that runs the grammar itself (transformers) feeds it this text first.
        remote: the same constraint as a grammar that starts where the prompt ends, for the
            backends that cannot feed a prefix (vLLM, HTTP), or None when none can be built
            (the prompt ends inside an action's JSON value: those backends then sample
            unconstrained and say so once).
        in_action: the prompt ends inside an action; the engine raises the request's
            ``max_tokens`` to ``action_tokens`` so the step cap does not cut the action.
        action_tokens: the token budget of an action (tokens).
    """

    structural_tag: str
    prefix: str = ""
    remote: str | None = None
    in_action: bool = False
    action_tokens: int = 512


@dataclass(frozen=True)
class GenerationRequest:
    """One prompt to sample ``n`` continuations from (mirrors vLLM ``SamplingParams``).

    Attributes:
        prompt: prompt text, sent to the model as is (no special tokens added).
        n: continuations to sample, >= 1.
        max_tokens: most new tokens per continuation, >= 1.
        stop: stop strings; the returned text is cut before the first one found.
        temperature: sampling temperature, > 0 (the log-probs reported stay raw).
        top_p: nucleus mass in (0, 1].
        seed: seed of this request's own random generator; None draws from entropy.
        greedy: take the most likely token at every step (argmax of the logits, ties to
            the lowest token id) instead of sampling; ``temperature``, ``top_p`` and
            ``seed`` are then unused (mirrors vLLM's ``temperature=0``).
        triggered_choice: a :class:`TriggeredChoice` the continuation keeps to, or None.
            Honoured by the transformers backend (token by token, with the raw log-probs
            reported unchanged); the vLLM and HTTP backends ignore it.
        grammar: a :class:`RequestGrammar` the continuation keeps to, or None. Honoured by
            every backend (transformers: xgrammar's matcher, raw log-probs reported; vLLM:
            structured outputs; HTTP: the server's ``structured_outputs`` field; both
            report the constrained tokens' log-probs renormalised over the allowed tokens).
        cancel: an event the engine sets when the decode that made the request is abandoned
            (disconnect, deadline), or None. The transformers backend checks it between tokens
            and ends the request's rows at once (``finish_reason="abort"``), so an abandoned
            decode stops generating within one token step, not one round; the HTTP backend
            cuts off the request's POST in flight (closing the connection makes ``vllm serve``
            abort it) and answers ``finish_reason="abort"`` too; vLLM's offline
            ``LLM.generate`` cannot stop one request of a batch and ignores it. Not compared
            or hashed (two requests that differ only here are equal).
        top_logprobs: ``k``, how many of the most likely raw log-probs each sampled position
            reports, reduced to :attr:`Continuation.token_confidences` (DeepConf's token
            confidence, :func:`mfs_core.confidence.token_confidence`); 0, the default, asks for
            none (mirrors vLLM ``SamplingParams(logprobs=k)``; vLLM's engine allows k <= its
            ``max_logprobs``, 20 by default).
    """

    prompt: str
    n: int = 1
    max_tokens: int = 256
    stop: tuple[str, ...] = ()
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    greedy: bool = False
    triggered_choice: TriggeredChoice | None = None
    grammar: RequestGrammar | None = None
    top_logprobs: int = 0
    cancel: Any = field(default=None, compare=False, repr=False)  # a threading.Event, or None

    def __post_init__(self) -> None:
        if not isinstance(self.prompt, str):
            msg = f"prompt must be a string, got {type(self.prompt).__name__}"
            raise TypeError(msg)
        if self.n < 1:
            msg = f"n must be >= 1, got {self.n}"
            raise ValueError(msg)
        if self.max_tokens < 1:
            msg = f"max_tokens must be >= 1, got {self.max_tokens}"
            raise ValueError(msg)
        if not self.temperature > 0:
            msg = f"temperature must be > 0, got {self.temperature}"
            raise ValueError(msg)
        if not 0 < self.top_p <= 1:
            msg = f"top_p must be in (0, 1], got {self.top_p}"
            raise ValueError(msg)
        if self.top_logprobs < 0:
            msg = f"top_logprobs must be >= 0, got {self.top_logprobs}"
            raise ValueError(msg)
        object.__setattr__(self, "stop", tuple(self.stop))


@dataclass(frozen=True)
class Continuation:
    """One sampled continuation (mirrors vLLM ``CompletionOutput``).

    Attributes:
        text: the generated text, cut before the stop string that ended it.
        token_ids: every token sampled, including the one that completed a stop string
            or the EOS token (as vLLM's ``token_ids``).
        logprob_sum: sum over ``token_ids`` of the raw (temperature-1) log-probability of
            each token, in nats; 0.0 for no tokens.
        finish_reason: ``"stop"`` (a stop string), ``"eos"`` (the model's EOS token) or
            ``"length"`` (``max_tokens`` reached).
        stop_reason: the stop string that ended the text (as vLLM's ``stop_reason``),
            None unless ``finish_reason == "stop"``.
        prompt_tokens: tokens of the request's prompt (the same for its ``n`` continuations).
        token_confidences: one per token of ``token_ids`` when the request asked for
            ``top_logprobs = k > 0``: DeepConf's token confidence ``-(1/k) sum_{j<=k} log P(j)``
            over the ``k`` largest raw (temperature-1) log-probs at that position (nats,
            :func:`mfs_core.confidence.token_confidence`); empty otherwise.
    """

    text: str
    token_ids: tuple[int, ...]
    logprob_sum: float
    finish_reason: FinishReason
    stop_reason: str | None = None
    prompt_tokens: int = 0
    token_confidences: tuple[float, ...] = ()

    @property
    def num_tokens(self) -> int:
        """Number of sampled tokens, ``len(token_ids)``."""
        return len(self.token_ids)

    @property
    def mean_logprob(self) -> float:
        """Mean log-probability per token in nats (``logprob_sum / num_tokens``; 0 if empty)."""
        return self.logprob_sum / self.num_tokens if self.num_tokens else 0.0


@dataclass
class Candidate:
    """A beam extended by one sampled step, as recorded in the trace.

    Attributes:
        beam_index: index of the parent beam in the step's beams.
        text: the step text (without the step delimiter).
        step_logprob: mean log-probability per token of the step, nats.
        step_tokens: tokens of the step.
        finished: the step closed the answer (the end marker or the model's EOS token).
        pruned: removed by width pruning (no foresight rollout), or a blank step (whitespace only).
        foresight_quality: ``F_t``, mean log-prob per token of its rollouts (nats); None if pruned.
        step_value: ``V = F_t - baseline`` (paper eq. 8, nats); None if not computed.
        deficit: ``D_t = F_best - F_t`` over the scored candidates (eq. 9, nats).
        selected: chosen as a beam (or kept in the finished pool) for the next step.
        rollout: the text of its first foresight rollout, if any.
        rollout_tokens: new tokens sampled for its foresight rollouts (tokens; 0 when its
            estimate is shared with an earlier copy or made of reused rollouts only); None if pruned.
        foresight_shared: its ``F_t`` is the estimate of an earlier survivor with the same path
            text (``share_foresight``): no rollout was sampled for it.
        reused_rollouts: how many of its rollouts are the remainder of its parent beam's
            stored rollout (``reuse_rollouts``; 0 or 1), sampled at no new tokens.
        parent_quality: ``F_{t-1}`` of its parent beam (nats); None at t = 0 (the root has none).
        parent_step_logprob: step log-prob of its parent beam's last step (nats; the
            ``baseline="parent_step"`` baseline); None at t = 0.
        answer: the answer read from ``text`` by a decoder that votes on whole samples (ESC,
            DeepConf; None: none stated, or not recorded).
        confidence: DeepConf's score of the sample, its lowest group confidence (nats); None
            for other decoders.
    """

    beam_index: int
    text: str
    step_logprob: float
    step_tokens: int
    finished: bool = False
    pruned: bool = False
    foresight_quality: float | None = None
    step_value: float | None = None
    deficit: float | None = None
    selected: bool = False
    rollout: str | None = None
    rollout_tokens: int | None = None
    foresight_shared: bool = False
    reused_rollouts: int = 0
    parent_quality: float | None = None
    parent_step_logprob: float | None = None
    answer: str | None = None
    confidence: float | None = None


@dataclass
class StepTrace:
    """What happened at one deliberation step.

    Attributes:
        step: index t, from 0.
        candidates: every candidate sampled at this step.
        mean_score: μ of the unfinished candidates' step log-probs (nats).
        std_score: σ of the same (population standard deviation, nats).
        prune_threshold: ``μ + λ1·σ`` (nats); candidates below it are pruned.
        c_prune: ``F_best - (μ + λ1·σ)``, the deficit bound of eq. 10-11 (nats).
        max_step_value: largest step value among the scored candidates (nats), or None.
        stop_epsilon: ``ε_stop`` the convergence test compares ``max_step_value`` to.
        converged: the convergence test fired at this step.
        beam_sources: for each beam of the next step, in beam order, the index in
            ``candidates`` of the candidate it extends (the next step's
            ``Candidate.beam_index`` indexes this list); empty where a decoder does not
            record it (φ-Decoding) and in traces written before it existed.
        note: a decoder's own account of a step that these fields do not describe, one line
            (ESC: the window's answers and the unanimity test; DeepConf: the threshold, the
            traces stopped under it and the consensus share); empty for MFS and φ-Decoding.
            :func:`mfs_core.trace.format_trace` and :func:`mfs_core.events.step_summary` show it.
    """

    step: int
    candidates: list[Candidate] = field(default_factory=list)
    mean_score: float | None = None
    std_score: float | None = None
    prune_threshold: float | None = None
    c_prune: float | None = None
    max_step_value: float | None = None
    stop_epsilon: float | None = None
    converged: bool = False
    beam_sources: list[int] = field(default_factory=list)
    note: str = ""

    @property
    def num_pruned(self) -> int:
        """Candidates removed by width pruning at this step."""
        return sum(c.pruned for c in self.candidates)


@dataclass
class DecodeResult:
    """What one decode returns, for every decoder (MFS, φ-Decoding, baselines).

    Attributes:
        text: the chosen reasoning path, completed to the end marker (marker removed).
        answer: the extracted answer of ``text``'s vote group, or None.
        vote_share: share of completed paths that voted for ``answer`` (0-1).
        stop_reason: why deliberation ended. MFS: ``"converged"`` (``max V <= ε_stop`` after
            ``min_steps``), ``"all_finished"`` (every candidate of the last step finished),
            ``"finished_pool_full"`` (the finished pool reached M paths while candidates were
            still open), ``"max_steps"``, ``"blank_steps"`` (every candidate of a step stayed a
            blank line); CoT ``"greedy"``, self-consistency ``"sampled"``,
            φ-Decoding ``"cluster_converged"``, ``"identical_rollouts"``, ...; ESC
            ``"unanimous_window"``, ``"max_samples"``; DeepConf ``"consensus"``, ``"max_traces"``.
        prompt_tokens: prompt tokens over all generation requests (tokens).
        output_tokens: generated tokens over all requests (tokens).
        flops: ``6 · output_tokens · num_parameters`` (Kaplan et al., as the paper).
        steps: per-step trace.
        completions: every completed path's text.
        completion_answers: the answer extracted from each completed path.
        completion_qualities: each completed path's quality ``F`` (nats per token).
        method: decoder name.
        wall_seconds: wall-clock time of the decode, seconds (set by the engine).
        num_parameters: model parameters ``P`` of ``flops`` (set by the engine).
        completion_tokens: output tokens sampled after deliberation to complete paths that
            had no rollout (tokens; 0 when every path finished "without extra tokens").
        search_settings: the decoder settings the trace depends on (M, N, λ1, ε_stop,
            ``min_steps``, ...), so the trace can be checked from the result alone.
        completion_triggered: for each completed path, whether its answer was read after
            ``MFSSettings.answer_trigger`` (the path stated none); empty when the trigger is off.
        completion_weights: each completed path's vote in the final vote when it is weighted (MFS
            with ``vote_rollouts="weighted"``: the sampled candidates a rollout stands for); empty
            when every path votes once.
    """

    text: str
    answer: str | None
    vote_share: float
    stop_reason: str
    prompt_tokens: int
    output_tokens: int
    flops: float
    steps: list[StepTrace] = field(default_factory=list)
    completions: list[str] = field(default_factory=list)
    completion_answers: list[str | None] = field(default_factory=list)
    completion_qualities: list[float] = field(default_factory=list)
    method: str = "mfs"
    wall_seconds: float | None = None
    num_parameters: int | None = None
    completion_tokens: int = 0
    search_settings: dict[str, Any] = field(default_factory=dict)
    completion_triggered: list[bool] = field(default_factory=list)
    completion_weights: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (steps and candidates included)."""
        return dataclasses.asdict(self)

    def to_json(self, **kwargs: Any) -> str:
        """``json.dumps`` of :meth:`to_dict`; keyword arguments go to ``json.dumps``."""
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DecodeResult:
        """Rebuild a result written by :meth:`to_dict`."""
        data = dict(data)
        steps = []
        for step in data.pop("steps", []):
            step = dict(step)
            step["candidates"] = [Candidate(**c) for c in step.get("candidates", [])]
            steps.append(StepTrace(**step))
        return cls(steps=steps, **data)
