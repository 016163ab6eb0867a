"""An independent checker of MFS traces, for tests only.

:func:`trace_violations` reads a ``DecodeResult`` as JSON (``DecodeResult.to_dict()``) and
nothing else: no settings object, no decoder code, no ``mfs_core.martingale``. Every number
it checks is recomputed here from the trace with plain Python (MFS_SPEC.md and the paper's
equations):

* width pruning (eq. 10-11): μ and the population σ of the open candidates' step
  log-probs, ``threshold = μ + λ1·σ``, ``c_prune = best - threshold``; a candidate survives
  iff its score reaches the threshold or ties the best (within ``TOLERANCE``);
* foresight and step values (eq. 3, 8, 9): ``V = F - F_parent`` (t > 0; the parent's step
  log-prob for ``baseline="parent_step"``), ``V = F - mean F`` (t = 0); parents are
  candidates selected one step earlier; ``max V``; deficits ``F_best - F``;
* the finished pool (step 6): at most ⌊f·M⌋ finished per step while candidates are open,
  the best ones by step log-prob, the best up to M when every candidate finished;
* the stop reason (eq. 12, step 7) against ``ε_stop``, ``min_steps`` and ``max_steps``;
* the completed paths (step 8): the pool's paths and the kept beams, each joined with its
  own rollout (on a convergence stop with ``convergence_finish="parent_beams"``, the parents'
  rollouts);
* shared foresight (``share_foresight``): a candidate marked shared has no rollout tokens of its
  own and the F and rollout of an earlier scored candidate with the same path (the path is
  rebuilt from ``beam_sources``); without sharing none is marked; reused rollouts only with
  ``reuse_rollouts``; with sharing, kept beams on one path hold one rollout: the first is
  completed by it, the others by fresh completions (counted in ``completion_tokens``);
* output tokens (steps + rollouts + completions), ``FLOPs = 6·output_tokens·P``, the vote
  (the answer is a most frequent completion answer, its share = count / paths; with
  ``vote_rollouts="weighted"`` both counted by ``completion_weights``, which are recomputed from
  the candidates each rollout stands for, times ``exp(β (F - max F))`` with ``vote_quality_beta``);
* the search rules aimed at the measured failures: no convergence stop with ``convergence_stop`` off; an ``answer_certified``
  stop only with ``answer_stop_alpha`` and, when the vote is over every rollout, an answer whose
  mixture e-value ``2^(x+y+1) B(x+1, y+1) P(Beta(x+1, y+1) > 1/2)`` (its draws but the first, the
  most frequent other's) reaches ``j (j + 1) / α`` (restated here with scipy).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from scipy.special import betaln
from scipy.stats import beta

__all__ = ["TOLERANCE", "assert_trace", "trace_violations"]

TOLERANCE = 1e-6
"""Scores closer than this count as tied (the library's SCORE_TOLERANCE, restated here)."""

_REL = 1e-9


def _close(a: float | None, b: float | None, tol: float = 1e-9) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= tol + _REL * max(abs(a), abs(b))


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def _pstd(xs: list[float]) -> float:
    m = _mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))


def _check_step(t: int, step: dict[str, Any], prev: dict[str, Any] | None, cfg: dict[str, Any], out: list[str]) -> None:
    cands = step["candidates"]
    open_cands = [c for c in cands if not c["finished"]]
    where = f"step {t}"
    # --- width pruning -------------------------------------------------------------------
    if step["mean_score"] is not None:
        if not cfg["width_pruning"]:
            out.append(f"{where}: pruning statistics recorded with width_pruning off")
        scores = [c["step_logprob"] for c in open_cands]
        mu, sigma = _mean(scores), _pstd(scores)
        threshold = mu + cfg["prune_lambda"] * sigma
        best = max(scores)
        for name, got, want in (("μ", step["mean_score"], mu), ("σ", step["std_score"], sigma),
                                ("threshold", step["prune_threshold"], threshold), ("c_prune", step["c_prune"], best - threshold)):
            if not _close(got, want):
                out.append(f"{where}: {name} = {got!r}, recomputed {want!r}")
        for i, c in enumerate(open_cands):
            survives = c["step_logprob"] >= threshold - TOLERANCE or c["step_logprob"] >= best - TOLERANCE
            if c["pruned"] == survives:
                out.append(f"{where}: open candidate {i} (score {c['step_logprob']!r}, threshold {threshold!r}) "
                           f"pruned={c['pruned']}")
        if all(c["pruned"] for c in open_cands):
            out.append(f"{where}: the best candidate was pruned")
    elif any(c["pruned"] for c in cands):
        out.append(f"{where}: candidates pruned without pruning statistics")
    if any(c["pruned"] and c["finished"] for c in cands):
        out.append(f"{where}: a finished candidate was pruned")
    # --- foresight, values, deficits ------------------------------------------------------
    rolled = [c for c in open_cands if not c["pruned"]] if step["max_step_value"] is not None else []
    for c in cands:
        if c not in rolled and (c["step_value"] is not None or c["rollout"] is not None):
            out.append(f"{where}: candidate {c['text']!r} has a value or rollout but was not rolled out")
    if not rolled:
        if step["max_step_value"] is not None:
            out.append(f"{where}: max V recorded without rolled-out candidates")
        return
    qualities = [c["foresight_quality"] for c in rolled]
    if any(q is None for q in qualities) or any(c["rollout_tokens"] is None for c in rolled):
        out.append(f"{where}: a rolled-out candidate lacks F or its rollout tokens")
        return
    if t == 0:
        baselines = [_mean(qualities)] * len(rolled)
    else:
        key = "parent_quality" if cfg["baseline"] == "parent_foresight" else "parent_step_logprob"
        baselines = [c[key] for c in rolled]
        parents = [c for c in prev["candidates"] if c["selected"] and not c["finished"]] if prev else []
        for c in rolled:
            if not any(_close(c["parent_quality"], p["foresight_quality"]) and _close(c["parent_step_logprob"], p["step_logprob"])
                       for p in parents):
                out.append(f"{where}: candidate {c['text']!r} has parent F {c['parent_quality']!r}, "
                           f"which no beam selected at step {t - 1} has")
    values = []
    for c, q, b in zip(rolled, qualities, baselines):
        if b is None:
            out.append(f"{where}: candidate {c['text']!r} has no baseline")
            return
        values.append(q - b)
        if not _close(c["step_value"], q - b):
            out.append(f"{where}: V({c['text']!r}) = {c['step_value']!r}, recomputed F - baseline = {q - b!r}")
        if not _close(c["deficit"], max(qualities) - q):
            out.append(f"{where}: deficit({c['text']!r}) = {c['deficit']!r}, recomputed {max(qualities) - q!r}")
    if not _close(step["max_step_value"], max(values)):
        out.append(f"{where}: max V = {step['max_step_value']!r}, recomputed {max(values)!r}")


def _paths(steps: list[dict[str, Any]], delim: str) -> list[list[str]]:
    """The full path text (beam path + step text) of every candidate, step by step."""
    beam_paths = [""]
    paths = []
    for step in steps:
        here = [beam_paths[c["beam_index"]] + c["text"] if c["beam_index"] < len(beam_paths) else None
                for c in step["candidates"]]
        paths.append(here)
        beam_paths = [here[i] + delim if here[i] is not None else "" for i in step["beam_sources"]]
    return paths


def _check_sharing(steps: list[dict[str, Any]], cfg: dict[str, Any], out: list[str]) -> None:
    share, reuse = cfg.get("share_foresight", False), cfg.get("reuse_rollouts", False)
    for t, (step, paths) in enumerate(zip(steps, _paths(steps, cfg["step_delimiter"]))):
        estimates: dict[str, dict[str, Any]] = {}
        for c, path in zip(step["candidates"], paths):
            if c["step_value"] is None:
                continue
            if c.get("reused_rollouts", 0) and not reuse:
                out.append(f"step {t}: candidate {c['text']!r} reused a rollout with reuse_rollouts off")
            if not c.get("foresight_shared", False):
                if share and path in estimates:
                    out.append(f"step {t}: candidate {c['text']!r} has its own estimate although its path was scored")
                estimates.setdefault(path, c)
                continue
            first = estimates.get(path)
            if not share:
                out.append(f"step {t}: candidate {c['text']!r} shares an estimate with share_foresight off")
            elif first is None or c["rollout_tokens"] != 0 or not _close(c["foresight_quality"], first["foresight_quality"]) \
                    or c["rollout"] != first["rollout"]:
                out.append(f"step {t}: shared candidate {c['text']!r} does not repeat an earlier estimate of its path "
                           f"at no tokens")


def _distinct_scored(step: dict[str, Any]) -> int:
    """Distinct foresight estimates of a step: scored candidates that do not share an earlier one's."""
    return sum(c["step_value"] is not None and not c.get("foresight_shared", False) for c in step["candidates"])


def _converges(t: int, step: dict[str, Any], cfg: dict[str, Any]) -> bool:
    return (cfg["early_stopping"] and cfg.get("convergence_stop", True) and t >= cfg["min_steps"] and step["max_step_value"] is not None
            and step["max_step_value"] <= step["stop_epsilon"]
            and _distinct_scored(step) >= cfg.get("convergence_min_paths", 1))


def _check_rollout_vote(data: dict[str, Any], steps: list[dict[str, Any]], cfg: dict[str, Any],
                        out: list[str]) -> None:
    """``vote_rollouts``: the completions are every finished candidate's path and every distinct
    estimate's path joined with its rollout, each once, at no completion tokens. ``"weighted"``:
    each completion's weight is 1 for a finished candidate and, for a rollout, the scored
    candidates of its step on its path (over ``foresight_rollouts``); the weights add up to the
    finished plus the scored candidates of all steps. Otherwise no weights are recorded."""
    delim = cfg["step_delimiter"]
    weighted = cfg.get("vote_rollouts") == "weighted"
    expected = []
    for step, paths in zip(steps, _paths(steps, delim)):
        scored = Counter(path for c, path in zip(step["candidates"], paths) if c["step_value"] is not None)
        for c, path in zip(step["candidates"], paths):
            if c["finished"]:
                expected.append((path, c["step_logprob"], 1.0))
            elif c["step_value"] is not None and not c.get("foresight_shared", False):
                expected.append((path + delim + c["rollout"], c["foresight_quality"],
                                 scored[path] / cfg.get("foresight_rollouts", 1)))
    weights = data.get("completion_weights") or []
    beta_q = cfg.get("vote_quality_beta")
    if beta_q is not None and len(weights) == len(data["completions"]) and weights:  # undo exp(β (F - max F))
        top = max(data["completion_qualities"])
        weights = [w / math.exp(beta_q * (q - top)) for w, q in zip(weights, data["completion_qualities"])]
    if (weighted or beta_q is not None) and len(weights) != len(data["completions"]):
        out.append(f"{len(weights)} completion weights for {len(data['completions'])} completions (weighted vote)")
        return
    if not weighted and beta_q is None and weights:
        out.append(f"completion weights {weights[:4]}... recorded although vote_rollouts = {cfg.get('vote_rollouts')!r}")
    paths = list(zip(data["completions"], data["completion_qualities"], weights or [1.0] * len(data["completions"])))
    if len(paths) != len(expected):
        out.append(f"{len(paths)} completed paths, expected {len(expected)} (finished candidates + distinct rollouts)")
    for text, quality, weight in expected:
        match = [p for p in paths if p[0].startswith(text) and _close(p[1], quality)
                 and (not weighted or _close(p[2], weight))]
        if not match:
            out.append(f"no completed path {text[-60:]!r} at F = {quality!r}" + (f", weight {weight}" if weighted else ""))
        else:
            paths.remove(match[0])
    if weighted:
        candidates = sum(c["finished"] or c["step_value"] is not None for step in steps for c in step["candidates"])
        if not _close(sum(weights), float(candidates)):
            out.append(f"the weights add up to {sum(weights)!r}, not the {candidates} finished and scored candidates")
    if data["completion_tokens"] != 0:
        out.append(f"{data['completion_tokens']} completion tokens under vote_rollouts")


def _check_certified(data: dict[str, Any], cfg: dict[str, Any], last_t: int, converges: bool, out: list[str]) -> None:
    """An ``answer_certified`` stop: ``answer_stop_alpha`` set, stops on, ``min_steps`` done, no convergence;
    with ``vote_rollouts`` (every distinct rollout and finished candidate is a completion, one draw each)
    some answer, the j-th to appear, has ``E(its draws - 1, the most of another) >= j (j + 1) / α``."""
    alpha = cfg.get("answer_stop_alpha")
    if alpha is None or not cfg["early_stopping"] or last_t < cfg["min_steps"] or converges:
        out.append(f"stop reason answer_certified with answer_stop_alpha = {alpha!r}, t = {last_t}")
        return
    if not cfg.get("vote_rollouts"):
        return
    draws: dict[str, int] = {}
    for answer in data["completion_answers"]:
        if answer is not None:
            draws[answer] = draws.get(answer, 0) + 1
    counts = list(draws.values())
    for j, n in enumerate(counts, start=1):
        x, y = n - 1, max([c for i, c in enumerate(counts, start=1) if i != j], default=0)
        e_value = math.exp((x + y + 1) * math.log(2) + betaln(x + 1, y + 1)) * float(beta.sf(0.5, x + 1, y + 1))
        if e_value >= j * (j + 1) / alpha * (1 - 1e-9):
            return
    out.append(f"stop reason answer_certified, but no answer of {draws} reaches its threshold at α = {alpha}")


def _votes(data: dict[str, Any]) -> tuple[Counter, float, list[float]]:
    """Votes per answer, all the paths' votes, and the answered paths' votes (1 each unless weighted)."""
    answers = data["completion_answers"]
    weights = data.get("completion_weights") or [1.0] * len(answers)
    counts: Counter = Counter()
    for answer, weight in zip(answers, weights):
        if answer is not None:
            counts[answer] += weight
    return counts, float(sum(weights)), [w for a, w in zip(answers, weights) if a is not None]


def trace_violations(data: dict[str, Any]) -> list[str]:
    """Every invariant an MFS ``DecodeResult`` (as JSON) breaks; empty when it holds them all.

    Args:
        data: ``DecodeResult.to_dict()`` of an MFS decode (or its ablations) by the engine
            (``num_parameters`` set), with ``aggregation="majority"``.

    Returns:
        One line per violation, naming the step and the numbers.
    """
    out: list[str] = []
    cfg = data["search_settings"]
    steps = data["steps"]
    m = cfg["step_beam_size"]
    cap = math.floor(cfg["max_finished_fraction"] * m + 1e-9)
    if not steps:
        return ["no steps in the trace"]
    for t, step in enumerate(steps):
        if step["step"] != t:
            out.append(f"step {t} is numbered {step['step']}")
        _check_step(t, step, steps[t - 1] if t else None, cfg, out)
    _check_sharing(steps, cfg, out)
    # --- the finished pool and the beams --------------------------------------------------
    last_t = len(steps) - 1
    reason = data["stop_reason"]
    parent_finish = reason == "converged" and cfg["convergence_finish"] == "parent_beams"
    pool: list[dict[str, Any]] = []
    for t, step in enumerate(steps):
        cands = step["candidates"]
        finished = [c for c in cands if c["finished"]]
        open_cands = [c for c in cands if not c["finished"]]
        pooled = [c for c in finished if c["selected"]]
        slots = m - len(pool)
        if t == last_t and parent_finish:
            if pooled or any(c["selected"] for c in cands):
                out.append(f"step {t}: converged with parent_beams, yet candidates of the step were kept")
            continue
        allowed = min(cap, slots) if open_cands else slots
        if len(pooled) != min(allowed, len(finished)):
            out.append(f"step {t}: {len(pooled)} finished kept, expected min({allowed}, {len(finished)})")
        if pooled and finished and min(c["step_logprob"] for c in pooled) < max(
                (c["step_logprob"] for c in finished if not c["selected"]), default=-math.inf) - 1e-12:
            out.append(f"step {t}: a finished candidate with a better step log-prob was left out of the pool")
        for c in pooled:
            if not _close(c["foresight_quality"], c["step_logprob"]):
                out.append(f"step {t}: pooled candidate's F {c['foresight_quality']!r} is not its step log-prob")
        pool.extend(pooled)
        selected_open = [c for c in open_cands if c["selected"]]
        rolled = [c for c in open_cands if c["step_value"] is not None]
        if t < last_t or reason in ("max_steps", "converged", "answer_decided", "answer_certified"):
            want = min(m - len(pool), len(rolled))
            if len(selected_open) != want:
                out.append(f"step {t}: {len(selected_open)} beams selected, expected min(M - pool, rolled out) = {want}")
        elif selected_open:
            out.append(f"step {t}: beams selected at a step that ended by {reason}")
    # --- the stop reason -------------------------------------------------------------------
    for t, step in enumerate(steps):
        if step["converged"] != (t == last_t and reason == "converged"):
            out.append(f"step {t}: converged={step['converged']} with stop reason {reason!r}")
        if t < last_t and _converges(t, step, cfg):
            out.append(f"step {t}: max V = {step['max_step_value']!r} <= ε_stop after min_steps, yet the search went on")
        if t < last_t and (len(pool) > m or not [c for c in step["candidates"] if not c["finished"]]):
            out.append(f"step {t}: the search went on although nothing was open")
    last = steps[-1]
    last_open = [c for c in last["candidates"] if not c["finished"]]
    if reason == "converged":
        if not _converges(last_t, last, cfg):
            out.append(f"stop reason converged, but max V = {last['max_step_value']!r}, ε_stop = {last['stop_epsilon']!r}, "
                       f"t = {last_t}, min_steps = {cfg['min_steps']}, early_stopping = {cfg['early_stopping']}")
    elif reason == "max_steps":
        if len(steps) != cfg["max_steps"] or _converges(last_t, last, cfg):
            out.append(f"stop reason max_steps after {len(steps)} of {cfg['max_steps']} steps")
    elif reason == "all_finished":
        if last_open:
            out.append(f"stop reason all_finished with {len(last_open)} open candidates")
    elif reason == "answer_decided":
        confidence = cfg.get("answer_stop_confidence")
        if confidence is None or not cfg["early_stopping"] or last_t < cfg["min_steps"] or _converges(last_t, last, cfg):
            out.append(f"stop reason answer_decided with answer_stop_confidence = {confidence!r}, t = {last_t}")
        elif cfg.get("vote_rollouts"):
            counts, _, answered = _votes(data)
            # weighted: Kish's effective sample size, n_eff / W = W / sum(w^2) (martingale.effective_counts)
            scale = sum(answered) / sum(w * w for w in answered) if answered else 0.0
            top = sorted((v * scale for v in counts.values()), reverse=True) + [0, 0]
            # P(p > 1/2) under Beta(v1 + 1, v2 + 1), restated with scipy (martingale.lead_probability)
            if float(beta.sf(0.5, top[0] + 1, top[1] + 1)) < confidence - 1e-12:
                out.append(f"stop reason answer_decided, but the votes {dict(counts)} do not reach {confidence}")
    elif reason == "answer_certified":
        _check_certified(data, cfg, last_t, _converges(last_t, last, cfg), out)
    elif reason == "finished_pool_full":
        if not last_open or len(pool) != m:
            out.append(f"stop reason finished_pool_full with {len(last_open)} open and {len(pool)} of M = {m} in the pool")
    else:
        out.append(f"unknown stop reason {reason!r}")
    # --- the completed paths ---------------------------------------------------------------
    if cfg.get("vote_rollouts") and data["completions"] and steps:
        _check_rollout_vote(data, steps, cfg, out)
    else:
        all_paths = _paths(steps, cfg["step_delimiter"])
        if reason in ("all_finished", "finished_pool_full"):
            beams: list[dict[str, Any]] | None = []
            beam_paths: list[str | None] = []
        elif parent_finish:
            kept = [(c, p) for c, p in zip(steps[-2]["candidates"], all_paths[-2]) if c["selected"] and not c["finished"]] \
                if last_t else None
            beams = [c for c, _ in kept] if kept is not None else None
            beam_paths = [p for _, p in kept] if kept is not None else []
        else:
            kept = [(c, p) for c, p in zip(last["candidates"], all_paths[-1]) if c["selected"] and not c["finished"]]
            beams, beam_paths = [c for c, _ in kept], [p for _, p in kept]
        paths = list(zip(data["completions"], data["completion_qualities"]))
        expected = [(c["text"], c["step_logprob"]) for c in pool]
        delim = cfg["step_delimiter"]
        fresh: list[str] = []  # kept beams completed by a fresh sample (a copy of an earlier beam's path)
        if beams is not None:
            seen: set[str | None] = set()
            for c, path in zip(beams, beam_paths):
                head = (path if path is not None else c["text"]) + delim
                if cfg.get("share_foresight", False) and path in seen:
                    fresh.append(head)
                else:
                    expected.append((head + c["rollout"], c["foresight_quality"]))
                seen.add(path)
            if len(paths) != len(expected) + len(fresh):
                out.append(f"{len(paths)} completed paths, expected {len(expected) + len(fresh)} (pool + kept beams)")
            for suffix, quality in expected:
                match = [p for p in paths if p[0].endswith(suffix) and _close(p[1], quality)]
                if not match:
                    out.append(f"no completed path ends with {suffix[-60:]!r} at F = {quality!r}")
                else:
                    paths.remove(match[0])
            for head in fresh:
                match = [p for p in paths if p[0].startswith(head)]
                if not match:
                    out.append(f"no fresh completion of the copied beam {head[-60:]!r}")
                else:
                    paths.remove(match[0])
        elif len(paths) != len(pool) + m:  # converged at the root: M sampled completions
            out.append(f"{len(paths)} completed paths after a convergence at t = 0, expected {len(pool) + m}")
        if beams is not None and not fresh and data["completion_tokens"] != 0:
            out.append(f"{data['completion_tokens']} completion tokens although every kept path had a rollout")
        if fresh and data["completion_tokens"] == 0:
            out.append(f"{len(fresh)} copied beams completed anew at 0 completion tokens")
    # --- tokens, FLOPs, the vote -----------------------------------------------------------
    tokens = sum(c["step_tokens"] for s in steps for c in s["candidates"])
    tokens += sum(c["rollout_tokens"] or 0 for s in steps for c in s["candidates"])
    tokens += data["completion_tokens"]
    if data["output_tokens"] != tokens:
        out.append(f"output_tokens = {data['output_tokens']}, steps + rollouts + completions = {tokens}")
    if data["num_parameters"] is None or not _close(data["flops"], 6.0 * data["output_tokens"] * data["num_parameters"]):
        out.append(f"flops = {data['flops']!r}, 6·{data['output_tokens']}·{data['num_parameters']} expected")
    answers = data["completion_answers"]
    if len(answers) != len(data["completions"]):
        out.append("completion_answers and completions differ in length")
    if data.get("completion_weights") and not (
            (cfg.get("vote_rollouts") == "weighted" or cfg.get("vote_quality_beta") is not None) and data["completions"]):
        out.append(f"completion weights recorded although vote_rollouts = {cfg.get('vote_rollouts')!r}")
    counts, total, _ = _votes(data)  # by completion_weights when the vote is weighted
    if counts:
        top = max(counts.values())
        if data["answer"] not in counts or counts[data["answer"]] != top:
            out.append(f"answer {data['answer']!r} is not a most frequent completion answer {dict(counts)}")
        elif not _close(data["vote_share"], top / total):
            out.append(f"vote share {data['vote_share']!r}, recomputed {top}/{total}")
    elif data["answer"] is not None or data["vote_share"] != 0:
        out.append(f"answer {data['answer']!r} (share {data['vote_share']}) although no completion has one")
    return out


def assert_trace(data: dict[str, Any]) -> None:
    """Raise ``AssertionError`` listing every violation of :func:`trace_violations`."""
    problems = trace_violations(data)
    assert not problems, "trace invariants broken:\n  " + "\n  ".join(problems)
