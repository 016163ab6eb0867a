"""The search trace of a decode as text a newcomer can read (what ``mfs ask`` prints).

:func:`format_trace` writes a one-line legend, then per step what was sampled, finished,
kept, pruned and rolled out, the candidates that were kept (identical ones collapsed to one
line with ``×k``) and the verdict of the convergence test, including why it did not stop.
:func:`format_reasoning` marks which lines of the chosen path the search picked and which
the foresight rollout completed; :func:`format_vote` shows the vote the answer came from.
Candidate and reasoning texts are shown the same way (:func:`show`).
"""

from __future__ import annotations

from collections import Counter

from mfs_core.settings import MFSSettings
from mfs_core.types import Candidate, DecodeResult, StepTrace

__all__ = [
    "LEGEND", "SAMPLES_LEGEND", "format_reasoning", "format_trace", "format_vote", "scored_summary", "search_header",
    "show", "stop_check",
]

LEGEND = (
    "legend: logp/tok = a step's mean log-prob per token (nats); μ, σ = mean, std of the open candidates' logp/tok, "
    "below μ + λ1·σ pruned; V = step value, gain in foresight quality (nats); stop when max V <= ε_stop; * = kept"
)
"""One line that explains the symbols of :func:`format_trace`."""

SAMPLES_LEGEND = (
    "legend: each step is a round of whole samples (ESC: a window; DeepConf: the warm-up, then a batch); logp/tok = a "
    "sample's mean log-prob per token (nats); conf = DeepConf's score, the lowest mean token confidence over a "
    "sliding group (nats); * = votes"
)
"""The legend of :func:`format_trace` for decoders that sample whole answers and note each step (ESC, DeepConf)."""

_WIDTH = 44


def show(text: str, width: int | None = None) -> str:
    """``text`` as the trace and the reasoning print it: as written (backslashes kept), line
    breaks as ``⏎``, tabs as ``→``, cut to ``width`` characters with ``…``; empty as ``(empty)``."""
    shown = text.replace("\r", "").replace("\n", "⏎").replace("\t", "→")
    if not shown:
        return "(empty)"
    if width is not None and len(shown) > width:
        shown = shown[: width - 1] + "…"
    return shown


def _signed(value: float) -> str:
    """``value`` as ``+0.0123``; a value that rounds to zero prints ``+0.0000`` (never ``-0.0000``)."""
    return f"{0.0 if abs(value) < 5e-5 else value:+.4f}"


def stop_check(step: StepTrace, settings: MFSSettings) -> str:
    """The convergence test of one step, and why the search went on if it did not stop.

    ``max V <= ε_stop`` stops the search (paper eq. 12) once ``min_steps`` steps are done
    (step t is checked when ``t >= min_steps``) and ``early_stopping`` is on.

    Returns:
        E.g. ``"max V = +0.0000 <= ε_stop = 1e-06 but t = 0 < min_steps = 1: go on"``;
        empty when no candidate was scored (nothing to test).
    """
    if step.max_step_value is None:
        return ""
    eps = step.stop_epsilon if step.stop_epsilon is not None else settings.stop_epsilon
    value = f"max V = {_signed(step.max_step_value)}"
    if step.max_step_value > eps:
        return f"{value} > ε_stop = {eps:g}: go on"
    if step.converged:
        return f"{value} <= ε_stop = {eps:g}: converged, stop"
    if not settings.early_stopping:
        return f"{value} <= ε_stop = {eps:g} but early_stopping is off: go on"
    if step.step < settings.min_steps:
        return f"{value} <= ε_stop = {eps:g} but t = {step.step} < min_steps = {settings.min_steps}: go on"
    return f"{value} <= ε_stop = {eps:g}: the decoder went on"


def _collapsed(candidates: list[Candidate]) -> list[tuple[Candidate, int]]:
    """The candidates with identical text and status merged: (first of them, how many)."""
    groups: dict[tuple, list[Candidate]] = {}
    for cand in candidates:
        key = (cand.text, cand.finished, cand.selected, cand.pruned, cand.step_value is not None)
        groups.setdefault(key, []).append(cand)
    return [(group[0], len(group)) for group in groups.values()]


def _candidate_line(cand: Candidate, count: int) -> str:
    mark = "*" if cand.selected else " "
    times = f"×{count}" if count > 1 else ""
    if cand.step_value is not None:
        outcome = f"V = {_signed(cand.step_value)}"
    elif cand.finished:
        outcome = "finished, kept as a completed path" if cand.selected else "finished, not kept"
    else:
        outcome = ""
    text = '"' + show(cand.text, _WIDTH) + '"'
    return f"   {mark} {times:>3} {text:<{_WIDTH + 2}} logp/tok = {cand.step_logprob:.3f}  {outcome}".rstrip()


def scored_summary(scored: list[Candidate]) -> str:
    """How the scored candidates got their ``F``: ``"12 rolled out"`` when each has its own
    rollouts; with ``share_foresight`` / ``reuse_rollouts``, ``"12 scored by 2 foresight estimates"``
    (distinct paths), with ``"(1 from a reused rollout)"`` when some reused their parent's rollout.
    """
    estimates = sum(not c.foresight_shared for c in scored)
    reused = sum(c.reused_rollouts > 0 for c in scored)
    if estimates == len(scored) and not reused:
        return f"{len(scored)} rolled out"
    text = f"{len(scored)} scored by {estimates} foresight estimate" + ("" if estimates == 1 else "s")
    return text + (f" ({reused} from a reused rollout)" if reused else "")


def _tail(text: str) -> str:
    """The end of a sample as the trace shows it (the answer is at the end): the last characters, ``…`` first."""
    shown = show(text)
    return shown if len(shown) <= _WIDTH else "…" + shown[-(_WIDTH - 1):]


def _sample_line(cand: Candidate, count: int) -> str:
    """One sample (or ``count`` identical ones) of a noted step: its end, answer, logp/tok, tokens, conf."""
    mark = "*" if cand.selected else " "
    times = f"×{count}" if count > 1 else ""
    text = '"' + _tail(cand.text) + '"'
    parts = [f"answer {cand.answer}" if cand.answer is not None else "no answer",
             f"logp/tok = {cand.step_logprob:.3f}", f"{cand.step_tokens} token" + ("" if cand.step_tokens == 1 else "s")]
    if cand.confidence is not None:
        parts.append(f"conf = {cand.confidence:.3f}")
    if cand.pruned:
        parts.append("stopped")
    else:
        parts += ([] if cand.selected else ["discarded"]) + ([] if cand.finished else ["cut at the token cap"])
    return f"   {mark} {times:>3} {text:<{_WIDTH + 2}} {', '.join(parts)}"


def _noted_step(step: StepTrace) -> list[str]:
    """A step that carries its decoder's ``note`` (ESC, DeepConf): the note, then its samples."""
    groups: dict[tuple, list[Candidate]] = {}
    for cand in step.candidates:
        groups.setdefault((cand.text, cand.answer, cand.selected, cand.pruned, cand.finished), []).append(cand)
    ordered = sorted(groups.values(), key=lambda g: (not g[0].selected, -len(g)))
    return [f"step {step.step}: {step.note}"] + [_sample_line(g[0], len(g)) for g in ordered]


def search_header(result: DecodeResult, settings: MFSSettings) -> str:
    """The line ``mfs ask`` prints above the trace: the settings the decode's method searched with.

    ESC and DeepConf name their own settings; every other method gets MFS's (M, N, λ1, ε_stop,
    min_steps, max_steps).
    """
    if result.method == "esc":
        return (f"search (ESC: windows of w = {settings.esc_window}, at most {settings.esc_max_samples} samples, "
                f"T = {settings.temperature:g}):")
    if result.method == "deepconf":
        return (f"search (DeepConf online: top-{settings.deepconf_top_logprobs} log-probs, groups of "
                f"{settings.deepconf_window} tokens, {settings.deepconf_warmup} warm-up traces, keep "
                f"{settings.deepconf_keep:g}, batches of {settings.deepconf_batch_size} in chunks of "
                f"{settings.deepconf_chunk_tokens} tokens, τ = {settings.deepconf_consensus:g}, at most "
                f"{settings.deepconf_max_traces} traces, T = {settings.temperature:g}):")
    return (f"search (M = {settings.step_beam_size}, N = {settings.num_rollouts}, λ1 = {settings.prune_lambda}, "
            f"ε_stop = {settings.stop_epsilon:g}, min_steps = {settings.min_steps}, max_steps = {settings.max_steps}):")


def format_trace(result: DecodeResult, settings: MFSSettings) -> str:
    """The legend, then one block per step, then the stop reason and the cost.

    Per step: candidates sampled, finished (and how many of them were kept as completed
    paths, so the counts add up to the vote's), pruned and rolled out; μ, σ and the pruning
    threshold; the stop check (:func:`stop_check`). Below it, the kept candidates and the
    scored ones, identical ones collapsed (``×3``).

    A step with a ``note`` (ESC's windows, DeepConf's warm-up and batches) is written as its
    note, then its samples, identical ones collapsed: the end of each sample (where its answer
    is), its answer, logp/tok, tokens, DeepConf's ``conf`` and whether it was discarded or stopped
    (:data:`SAMPLES_LEGEND` replaces the legend when every step has a note).

    Args:
        result: a decode result.
        settings: the settings it was decoded with (λ1, ε_stop, min_steps).

    Returns:
        Multi-line text.
    """
    noted = bool(result.steps) and all(step.note for step in result.steps)
    lines = [SAMPLES_LEGEND if noted else LEGEND]
    for step in result.steps:
        if step.note:
            lines.extend(_noted_step(step))
            continue
        finished = [c for c in step.candidates if c.finished]
        kept = sum(c.selected for c in finished)
        scored = [c for c in step.candidates if c.step_value is not None]
        head = f"step {step.step}: {len(step.candidates)} candidates sampled, {len(finished)} finished"
        if finished:
            head += f" ({kept} kept as completed paths)"
        head += f", {step.num_pruned} pruned, {scored_summary(scored)}"
        if step.prune_threshold is not None:
            head += (
                f"; μ = {step.mean_score:.3f}, σ = {step.std_score:.3f}, "
                f"threshold μ + λ1·σ = {step.prune_threshold:.3f}"
            )
        lines.append(head)
        shown = [c for c in step.candidates if c.selected or c.step_value is not None or c.finished]
        shown.sort(key=lambda c: (not c.selected, c.step_value is None, -(c.step_value or 0.0), -c.step_logprob))
        lines.extend(_candidate_line(cand, count) for cand, count in _collapsed(shown))
        check = stop_check(step, settings)
        if check:
            lines.append(f"   stop check: {check}")
    lines.append(f"stop reason: {result.stop_reason}")
    lines.append(
        f"tokens: {result.prompt_tokens} prompt, {result.output_tokens} output; "
        f"FLOPs ≈ {result.flops:.3e} (6·n·P); wall time {result.wall_seconds or 0:.2f} s"
    )
    return "\n".join(lines)


def search_lines(result: DecodeResult, settings: MFSSettings) -> int:
    """How many leading lines of ``result.text`` the search chose (the rest a rollout wrote).

    Line t is the search's when it equals the text of a candidate kept at step t (a beam, or
    a finished candidate kept as a completed path); the first line that is not, and every
    line after it, came from the foresight rollout that completed the path.
    """
    parts = result.text.split(settings.step_delimiter)
    count = 0
    for step, part in zip(result.steps, parts):
        kept = {c.text for c in step.candidates if c.selected}
        if part not in kept:
            break
        count += 1
        if any(c.finished and c.selected and c.text == part for c in step.candidates):
            break
    return count


def format_reasoning(result: DecodeResult, settings: MFSSettings, indent: str = "   ") -> str:
    """The chosen path, one line per step; lines a foresight rollout wrote are marked ``↳``.

    Returns:
        Text whose lines read ``"   3 + 4 = 7"`` (chosen by the search) or
        ``" ↳ The answer is: \\boxed{7}."`` (completed by the rollout). A decode whose steps carry
        notes (ESC, DeepConf: whole samples, no search or rollout) has every line unmarked.
    """
    chosen = len(result.text.split(settings.step_delimiter)) if any(step.note for step in result.steps) \
        else search_lines(result, settings)
    lines = []
    for i, line in enumerate(result.text.split(settings.step_delimiter)):
        mark = indent if i < chosen else indent[:-2] + "↳ "
        lines.append(mark + show(line))
    return "\n".join(lines)


def format_vote(result: DecodeResult) -> str:
    """The vote over the completed paths, e.g. ``"vote: 7 ×3, 12 ×1 (4 completed paths)"``."""
    counts = Counter("(no answer)" if answer is None else answer for answer in result.completion_answers)
    votes = ", ".join(f"{answer} ×{count}" for answer, count in counts.most_common())
    total = len(result.completion_answers)
    return f"vote: {votes} ({total} completed path{'s' if total != 1 else ''})"
