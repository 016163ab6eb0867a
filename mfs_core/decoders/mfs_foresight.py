"""Step 4 of an MFS decoding run (MFS_SPEC.md, "Foresight"): who shares an estimate, what a
parent's rollout already gives, and the new rollouts that are still missing.

Pure, except the request builders, which draw one seed per request from the decode's rng, and
:func:`sample_windowed`, the rounds that sample rollouts in two parts under ``foresight_window``.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, replace

import numpy as np

from mfs_core import martingale
from mfs_core.decoders.common import TokenTally, request_seed
from mfs_core.decoders.mfs_records import Draft
from mfs_core.settings import MFSSettings
from mfs_core.types import Continuation, GenerationRequest

__all__ = [
    "Estimate", "estimates_by_survivor", "foresight_groups", "foresight_requests", "joined_rollout",
    "reused_remainders", "rollout_cap", "rollout_remainder", "sample_windowed",
]


@dataclass(frozen=True)
class Estimate:
    """One foresight estimate ``F_t`` (step 4), shared by the survivors in ``members``.

    Attributes:
        members: indices into the step's survivors (one path text under ``share_foresight``).
        rollouts: reused remainders first, then fresh rollouts; ``rollouts[0]`` is the one a
            selected member keeps as its beam's rollout.
        reused: how many of ``rollouts`` are reused remainders (``reuse_rollouts``).
        key: ``(step, group index)``, the :attr:`Beam.rollout_key` of beams made from it.
        scores: each rollout's quality when it is not the whole rollout's (``foresight_window``: the
            mean log-prob per token of its first W tokens, nats); empty: computed from the rollouts.
    """

    members: tuple[int, ...]
    rollouts: tuple[Continuation, ...]
    reused: int
    key: tuple[int, int]
    scores: tuple[float, ...] = ()

    @property
    def qualities(self) -> list[float]:
        """Each rollout's ``F`` (eq. 3, nats per token): :attr:`scores`, or its mean log-prob per token."""
        if self.scores:
            return [float(q) for q in self.scores]
        return [martingale.foresight_quality(r.logprob_sum, r.num_tokens) for r in self.rollouts]

    @property
    def quality(self) -> float:
        """``F_t``: the mean of the rollouts' qualities (eq. 3, nats per token)."""
        return float(np.mean(self.qualities))

    @property
    def new_tokens(self) -> int:
        """Tokens sampled for this estimate (the reused remainders cost none)."""
        return sum(r.num_tokens for r in self.rollouts[self.reused:])


def foresight_groups(paths: list[str], share: bool) -> list[list[int]]:
    """Survivors that share one foresight estimate, as lists of indices into ``paths``.

    With ``share`` (``share_foresight``), survivors whose path text ``a_{<=t}`` (beam text +
    step text) is the same form one group: ``E[F | a_{<=t}]`` depends on the path only, so one
    estimate from ``foresight_rollouts`` rollouts serves every copy. Without it, every
    survivor is its own group (the paper's rollout per survivor). Groups are ordered by their
    first member; members keep their order.

    Args:
        paths: the path text of each survivor, shape (K,).
        share: group equal paths.

    Returns:
        A partition of ``range(K)``: e.g. ``foresight_groups(["a", "b", "a"], True) == [[0, 2], [1]]``.
    """
    if not share:
        return [[i] for i in range(len(paths))]
    groups: dict[str, list[int]] = {}
    for i, path in enumerate(paths):
        groups.setdefault(path, []).append(i)
    return list(groups.values())


def rollout_remainder(rollout: Continuation | None, step: Continuation, delimiter: str) -> Continuation | None:
    """The rest of a beam's stored rollout after ``step``, when ``step`` is its first step.

    The rollout was sampled from the beam's prefix; when it starts with exactly ``step``'s
    tokens followed by the delimiter, what follows is a sample of the future of
    ``prefix + step + delimiter`` (conditioned on that first step), i.e. a foresight rollout of
    the candidate ``step`` (MFS_SPEC.md step 4), at no new tokens. Its log-prob sum is the
    rollout's minus the step's: the same tokens from the same prefix have the same raw
    log-probs (clamped at 0 against float noise).

    Not reused (None): no rollout; a rollout cut by ``max_tokens`` (``finish_reason ==
    "length"``: a fresh rollout would have had more tokens); a step not ended by the delimiter;
    tokens or text that differ; nothing after the step.

    Args:
        rollout: the parent beam's stored rollout, or None.
        step: the candidate's step continuation (its ``token_ids`` end with the token that
            completed the delimiter; its text excludes the delimiter).
        delimiter: the step delimiter (``settings.step_delimiter``).

    Returns:
        The remainder as a :class:`Continuation` (``prompt_tokens`` 0), or None.
    """
    if rollout is None or rollout.finish_reason == "length" or step.stop_reason != delimiter:
        return None
    k = len(step.token_ids)
    head = step.text + delimiter
    if len(rollout.token_ids) <= k or rollout.token_ids[:k] != step.token_ids or not rollout.text.startswith(head):
        return None
    return Continuation(
        text=rollout.text[len(head):], token_ids=rollout.token_ids[k:],
        logprob_sum=min(0.0, rollout.logprob_sum - step.logprob_sum),
        finish_reason=rollout.finish_reason, stop_reason=rollout.stop_reason, prompt_tokens=0,
    )


def reused_remainders(groups: Sequence[Sequence[int]], survivors: Sequence[Draft], s: MFSSettings) -> list[list[Continuation]]:
    """Step 4 at no new tokens (``reuse_rollouts``): for each group, the remainders of its
    members' parent rollouts (:func:`rollout_remainder`), at most ``foresight_rollouts`` per
    group; a stored rollout serves one survivor only (copies of a beam share their parent's)."""
    used: set[tuple[int, int]] = set()
    out: list[list[Continuation]] = []
    for group in groups:
        rollouts: list[Continuation] = []
        for i in group:
            beam = survivors[i].beam
            if not s.reuse_rollouts or beam.rollout_key in used or len(rollouts) >= s.foresight_rollouts:
                continue
            remainder = rollout_remainder(beam.rollout, survivors[i].step, s.step_delimiter)
            if remainder is not None:
                rollouts.append(remainder)
                used.add(beam.rollout_key)
        out.append(rollouts)
    return out


def foresight_requests(
    prompt: str, paths: Sequence[str], missing: Sequence[int], s: MFSSettings, rng: np.random.Generator
) -> list[GenerationRequest]:
    """Step 4's new rollouts: ``missing[g]`` rollouts from ``prompt + paths[g] + delimiter`` to the
    end marker for each group g that lacks any; one seed drawn per request, in group order."""
    return [
        GenerationRequest(
            prompt=prompt + path + s.step_delimiter, n=n, max_tokens=rollout_cap(s), stop=(s.end_marker,),
            temperature=s.rollout_sampling_temperature, top_p=s.top_p, seed=request_seed(rng),
        )
        for path, n in zip(paths, missing) if n > 0
    ]


def estimates_by_survivor(estimates: Sequence[Estimate], count: int) -> list[Estimate]:
    """Each of the ``count`` survivors' estimate, in survivor order (``Estimate.members`` inverted).

    Raises:
        ValueError: the estimates' members are not a partition of ``range(count)``.
    """
    of = {i: est for est in estimates for i in est.members}
    if sorted(of) != list(range(count)) or sum(len(est.members) for est in estimates) != count:
        msg = f"estimate members must partition range({count}), got {[list(est.members) for est in estimates]}"
        raise ValueError(msg)
    return [of[i] for i in range(count)]


def rollout_cap(s: MFSSettings) -> int:
    """``max_tokens`` of a rollout's (or finish completion's) first request (tokens): ``max_answer_tokens``,
    or the window ``foresight_window`` when that is shorter (the rest is sampled by :func:`sample_windowed`)."""
    if s.foresight_window is None:
        return s.max_answer_tokens
    return min(s.foresight_window, s.max_answer_tokens)


def joined_rollout(window: Continuation, rest: Continuation, end_marker: str) -> Continuation:
    """A rollout sampled in two parts, its first W tokens (``window``) and what followed them (``rest``), as one.

    Text, tokens and log-prob sums add; finish and stop reasons are ``rest``'s, the prompt tokens
    ``window``'s. An end marker split across the two parts (the window ends inside it: the rest's stop
    test never saw it whole) cuts the text there, as a stop at the marker.
    """
    text = window.text + rest.text
    finish, stop = rest.finish_reason, rest.stop_reason
    cut = text.find(end_marker)
    if 0 <= cut < len(window.text):
        text, finish, stop = text[:cut], "stop", end_marker
    return replace(
        window, text=text, token_ids=window.token_ids + rest.token_ids,
        logprob_sum=window.logprob_sum + rest.logprob_sum, finish_reason=finish, stop_reason=stop,
        token_confidences=window.token_confidences + rest.token_confidences,
    )


def sample_windowed(
    requests: Sequence[GenerationRequest], s: MFSSettings, rng: np.random.Generator, tally: TokenTally,
) -> Generator[list[GenerationRequest], list[list[Continuation]], tuple[list[list[Continuation]], list[list[float]]]]:
    """Sample rollouts (or completions) and score each: its ``F`` over the whole of it or over its first W tokens.

    Yields ``requests`` (counted in ``tally``). Without ``foresight_window`` (or with a window no
    shorter than ``max_answer_tokens``) that is all, and each continuation's score is its mean
    log-prob per token (eq. 3). With a window W, ``requests`` asked for W tokens
    (:func:`rollout_cap`); each continuation that W cut (``finish_reason == "length"``) is sampled on,
    one more round, from ``its prompt + its text`` (n = 1, a fresh seed from ``rng`` in order, the
    ``max_answer_tokens - W`` tokens left), and joined to what follows (:func:`joined_rollout`); its
    score stays the window's mean log-prob per token, so F does not depend on how long the rest runs
    (arXiv 2606.01682). The rest is conditioned on the window's text as the backend tokenizes it anew,
    which can differ from the sampled tokens at the seam.

    Returns:
        ``(continuations, scores)``: ``len(requests)`` lists of ``request.n`` each, and their F (nats per token).
    """
    outputs = yield list(requests)
    tally.add(requests, outputs)
    outputs = [list(conts) for conts in outputs]
    scores = [[c.mean_logprob for c in conts] for conts in outputs]
    window = rollout_cap(s)
    if s.foresight_window is None or window >= s.max_answer_tokens:
        return outputs, scores
    cut = [(r, k) for r, conts in enumerate(outputs) for k, c in enumerate(conts) if c.finish_reason == "length"]
    if not cut:
        return outputs, scores
    rest = [
        replace(requests[r], prompt=requests[r].prompt + outputs[r][k].text, n=1, seed=request_seed(rng),
                max_tokens=s.max_answer_tokens - outputs[r][k].num_tokens)
        for r, k in cut
    ]
    more = yield rest
    tally.add(rest, more)
    for (r, k), conts in zip(cut, more):
        outputs[r][k] = joined_rollout(outputs[r][k], conts[0], s.end_marker)
    return outputs, scores
