"""Choose among the rules aimed at MFS's measured failures on tuning questions, against SC's curve.

Pre-registered decision rule, written 2026-12-07 before any run of these candidates (none has run on any
question; nothing below may change after the first record is written, and :func:`rules_verdict` implements it)
-----------------------------------------------------------------------------------------------------------------

**Questions and setup.** GSM8K test questions 0-199 (the tuning range: never reported as held out),
Qwen2.5-Coder-0.5B-Instruct on vLLM (CPU, bf16), continuous scheduling, seed 0, answers capped at 400 tokens,
M = N = 4 (the bench's width, the one of the 300-question table), every other setting at its default; one run,
every method on the same engine, all from :func:`main`'s defaults::

    MFS_DATA_DIR=../shared/data VLLM_CPU_KVCACHE_SPACE=8 python experiments/benchmarks/rules_tuning.py \\
        --out experiments/records/qwen2.5-coder-0.5b/gsm8k-tuning-0-199-rules

**Candidates** (experiments/variants.py, one value each, ``RULE_VALUES``: W = 32 tokens, α = 0.1, β = 5,
SC in rounds of 4 up to k = 16):

* MFS rules, against the default ``mfs``: ``mfs-window`` (a: F over the rollout's first 32 tokens),
  ``mfs-anytime-stop`` (b: the anytime-valid answer stop at α = 0.1 in place of eq. 12), ``mfs-anytime-beside``
  (b: the same stop beside eq. 12), ``mfs-quality-vote`` (c: every distinct rollout and finished candidate
  votes, weighted by exp(5F)), ``mfs-rules`` (a, b in place of eq. 12, and c together).
* Voting rules (d): ``sc-anytime``, ``sc-quality-vote``, ``sc-rules`` (SC, k <= 16, against SC's own curve)
  and ``esc-anytime``, ``esc-quality-vote``, ``esc-rules`` (against ``esc``, window 4, at most 16).
* Beside them: ``cot``, ``sc`` (T = 0.7, one run at k = 16: SC at every k <= 16 from its first k samples),
  ``esc`` and the default ``mfs``.

**Measurement.** On the questions every method decoded without an error (fewer than 190: no verdict, the run
is resumed first): each method's correct answers and output tokens per question (every sampled token: steps,
rollouts, completions, answer triggers). SC's curve: its accuracy at k = 1, 2, 4, 8, 16 against its output
tokens per question, linear in log tokens between those points and flat beyond them
(:func:`~experiments.benchmarks.mfs_rules.sc_interpolated`). A method's *margin* is its accuracy minus SC's
curve at its own tokens per question. Paired counts (each candidate against its reference and against SC at
the k of its tokens, exact McNemar p) are reported; they do not enter the rule.

**Amended 2026-12-07, still before any record was written: the voting rules are replayed.** ``sc``, ``esc``
and the six voting candidates read nothing of a sample but its answer, mean log-prob and length, so each is a
function of the order SC's samples were drawn in. The run decodes ``cot``, ``sc`` (k = 16), ``mfs`` and the five
MFS rules live; ``esc`` and the six voting candidates are then decoded by the library's own decoders on each
question's 16 SC samples in order (:mod:`experiments.benchmarks.vote_replay`, written to ``replayed.jsonl``; a
sample's tokens are SC's mean per sample), as SC's curve already is at every k < 16. The replay decides as the
live decoders do on the same samples and gives back every kept SC answer (experiments/tests/test_vote_replay.py).
This saves about 4.4 million output tokens (some 8 hours of this machine) and pairs every voting rule with SC on
the same draws; nothing else in this rule changed. A voting rule that would need more than SC's 16 samples
cannot be replayed (an error, not a verdict).

**What wins.** A candidate *passes* when all of these hold:

1. its margin is at least its reference's margin + 0.02 (4 of 200 questions: the earlier tunings picked
   differences of 1-3 questions that the held-out set did not repeat); the reference is the default ``mfs``
   for the MFS rules, SC's curve itself (margin 0) for ``sc-*``, plain ``esc`` for ``esc-*``;
2. it answers at least as many questions right as its reference (none for ``sc-*``);
3. it spends at most 1.1x SC's tokens at k = 16 (beyond them the curve is extrapolated flat, which would
   favour it).

Among the MFS rules that pass, the one with the largest margin wins (equal margins: fewer tokens); the same,
separately, among the voting rules. A candidate without records on the common questions does not pass.

**What follows.** The MFS winner runs once on the held-out questions (0.5B: GSM8K 200-499; 1.5B: 200-299)
beside the default ``mfs`` and SC's curve, and its result is reported whatever it is; it becomes ``mfs``'s
default only if its held-out margin over SC's curve is larger than the default's on the same questions, and
nothing is tuned after the held-out run. The voting winner runs on the same held-out questions beside SC and
ESC and is offered as opt-in settings (``sc``'s and ``esc``'s defaults stay). **If nothing passes**, the
defaults stay as they are, no candidate runs on held-out questions, the tuning table is reported with every
candidate's margin, and the choice of which method to recommend on a small model follows the held-out curves
of the existing methods. A run of another model on these questions is reported beside this
one and does not change the verdict.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from experiments.benchmarks.mfs_rules import sc_interpolated

__all__ = [
    "METHODS", "MFS_CANDIDATES", "MIN_GAIN", "MIN_QUESTIONS", "REFERENCES", "REPLAYED", "TOKEN_CAP",
    "VOTE_CANDIDATES", "RuleVerdict", "common_questions", "main", "rules_verdict", "tuning_numbers",
]

MFS_CANDIDATES = ("mfs-window", "mfs-anytime-stop", "mfs-anytime-beside", "mfs-quality-vote", "mfs-rules")
"""The MFS rules (a)-(c) and their combination, each against the default ``mfs``."""
VOTE_CANDIDATES = ("sc-anytime", "sc-quality-vote", "sc-rules", "esc-anytime", "esc-quality-vote", "esc-rules")
"""The voting rules (d): ``sc-*`` against SC's curve, ``esc-*`` against ``esc``."""
REFERENCES = {**dict.fromkeys(MFS_CANDIDATES, "mfs"), **dict.fromkeys(VOTE_CANDIDATES[:3], None),
              **dict.fromkeys(VOTE_CANDIDATES[3:], "esc")}
"""Each candidate's reference method (None: SC's curve, margin 0, no count to match)."""
MIN_GAIN = 0.02
"""How much more margin than its reference a candidate needs (accuracy, 0-1: 4 of 200 questions)."""
TOKEN_CAP = 1.1
"""Most output tokens per question a candidate may spend, as a multiple of SC's at its largest k."""
MIN_QUESTIONS = 190
"""Fewest questions decoded by every method for a verdict."""
SC_KS = (1, 2, 4, 8, 16)
METHODS = ("cot", "sc", "mfs", *MFS_CANDIDATES)
"""What the run decodes live (the rest is replayed on ``sc``'s samples: :data:`REPLAYED`)."""
REPLAYED = ("esc", *VOTE_CANDIDATES)
"""Decoded by :func:`~experiments.benchmarks.vote_replay.replay_records` on each question's SC samples."""


@dataclass(frozen=True)
class RuleVerdict:
    """What the pre-registered rule decided (module docstring).

    Attributes:
        mfs_winner: the MFS rule that wins, or None (the default ``mfs`` stays).
        vote_winner: the voting rule that wins, or None.
        margins: every method's margin over SC's curve at its tokens (accuracy, 0-1).
        passed: each candidate's outcome: ``"passes"`` or the first condition it fails.
    """

    mfs_winner: str | None
    vote_winner: str | None
    margins: dict[str, float]
    passed: dict[str, str]


def _outcome(name: str, results: Mapping[str, tuple[int, float]], margins: Mapping[str, float],
             token_cap: float) -> str:
    """``"passes"`` or why not, for one candidate (conditions 1-3 of the module docstring)."""
    if name not in results:
        return "no records"
    reference = REFERENCES[name]
    if reference is not None and reference not in results:
        return f"no records of its reference {reference}"
    base = margins[reference] if reference is not None else 0.0
    if margins[name] < base + MIN_GAIN - 1e-12:
        return f"margin {margins[name]:+.4f} < reference {base:+.4f} + {MIN_GAIN}"
    if reference is not None and results[name][0] < results[reference][0]:
        return f"{results[name][0]} right < {reference}'s {results[reference][0]}"
    if results[name][1] > token_cap:
        return f"{results[name][1]:.0f} tokens/question > {token_cap:.0f} (1.1x SC at its largest k)"
    return "passes"


def rules_verdict(results: Mapping[str, tuple[int, float]], questions: int,
                  sc_points: Sequence[tuple[float, float]]) -> RuleVerdict:
    """Apply the pre-registered rule (module docstring) to a run's numbers.

    Example (hand-computed): 200 questions, SC ``[(300, 0.20), (4800, 0.36)]``: SC at 1,200 tokens is
    0.20 + 0.16 · ln 4 / ln 16 = 0.28. ``mfs`` (56 right at 1,200) has margin 0.28 - 0.28 = 0;
    ``mfs-rules`` (62 at 1,200) margin 0.31 - 0.28 = +0.03 >= 0 + 0.02 and 62 >= 56: it wins;
    ``mfs-window`` (59 at 1,200) margin +0.015 < 0.02: it does not pass.

    Args:
        results: ``(correct, output tokens per question)`` per method label, on the same questions.
        questions: those questions' number (>= 1).
        sc_points: SC's ``(output tokens per question, accuracy 0-1)`` points of the same run (k = 1 ... 16).

    Returns:
        The :class:`RuleVerdict`.

    Raises:
        ValueError: ``questions`` < 1, or no SC point.
    """
    if questions < 1 or not sc_points:
        msg = f"need questions >= 1 and SC points, got {questions} questions and {len(sc_points)} SC points"
        raise ValueError(msg)
    margins = {name: correct / questions - sc_interpolated(tokens, list(sc_points))
               for name, (correct, tokens) in results.items()}
    token_cap = TOKEN_CAP * max(tokens for tokens, _ in sc_points)
    passed = {name: _outcome(name, results, margins, token_cap) for name in (*MFS_CANDIDATES, *VOTE_CANDIDATES)}

    def winner(names: Sequence[str]) -> str | None:
        passing = [(margins[n], -results[n][1], n) for n in names if passed[n] == "passes"]
        return max(passing)[2] if passing else None

    return RuleVerdict(winner(MFS_CANDIDATES), winner(VOTE_CANDIDATES), margins, passed)


def common_questions(records: Sequence[dict[str, Any]], labels: Sequence[str]) -> set[int]:
    """The question indices that every method of ``labels`` with records decoded without an error (the rule's
    questions); empty when none of them has records."""
    ok: dict[str, set[int]] = {}
    for record in records:
        if record.get("error") is None and record["method"] in labels:
            ok.setdefault(record["method"], set()).add(record["index"])
    return set.intersection(*ok.values()) if ok else set()


def tuning_numbers(records: Sequence[dict[str, Any]], kind: str, labels: Sequence[str],
                   ks: Sequence[int] = SC_KS) -> tuple[dict[str, tuple[int, float]], list[tuple[float, float]], int]:
    """The rule's inputs from a run's records, on the questions every method of ``labels`` decoded without error.

    Args:
        records: the run's bench records (``sc``'s with ``sample_predictions``).
        kind: the set's scoring kind (``"gsm"``).
        labels: the methods run (``"sc"`` among them).
        ks: SC's sample counts on its curve.

    Returns:
        ``(results, sc_points, questions)``: ``(correct, mean output tokens)`` per label that has records, SC's
        ``(tokens, accuracy)`` at each k of ``ks`` its samples cover, and the number of common questions.
    """
    from mfs_core.bench.curve import curve_records

    ok: dict[str, dict[int, dict[str, Any]]] = {}
    for record in records:
        if record.get("error") is None and record["method"] in labels:
            ok.setdefault(record["method"], {})[record["index"]] = record
    common = common_questions(records, labels)
    results = {label: (sum(bool(by_index[i]["correct"]) for i in common),
                       sum(by_index[i]["output_tokens"] for i in common) / len(common))
               for label, by_index in ok.items() if common}
    sc_points = []
    curve = curve_records([r for r in records if r.get("index") in common], kind, ks, "sc")
    for k in ks:
        at_k = [r for r in curve if r["sc_k"] == k]
        if at_k:
            tokens = sum(r["output_tokens"] for r in at_k) / len(at_k)
            sc_points.append((tokens, sum(bool(r["correct"]) for r in at_k) / len(at_k)))
    results.pop("sc", None)  # SC is the curve
    return results, sc_points, len(common)


def main(argv: list[str] | None = None) -> None:
    """Run every method of the rule on the tuning questions, then print and write the verdict (``verdict.json``)."""
    from mfs_core.bench.datasets import load_dataset
    from mfs_core.bench.drain import drain_on_sigterm
    from mfs_core.bench.report import format_table, paired_comparisons, summarize
    from mfs_core.bench.runner import parse_method, run_bench
    from mfs_core.engine import MFSEngine
    from mfs_core.settings import MFSSettings

    import experiments.variants  # noqa: F401  (registers the candidates by name)
    from experiments.benchmarks.vote_replay import replay_records

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="gsm8k")
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--limit", type=int, default=200)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--backend", default="vllm")
    parser.add_argument("--max-answer-tokens", type=int, default=400)
    parser.add_argument("--step-beam-size", type=int, default=4)
    parser.add_argument("--num-rollouts", type=int, default=4)
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated registered decoders")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)

    scheduling = "continuous" if args.backend == "vllm" else "lockstep"
    settings = MFSSettings(model=args.model, backend=args.backend, scheduling=scheduling, seed=0,
                           max_answer_tokens=args.max_answer_tokens, step_beam_size=args.step_beam_size,
                           num_rollouts=args.num_rollouts)
    data = load_dataset(args.dataset, offset=args.offset, limit=args.limit)
    methods = [parse_method(name) for name in args.methods.split(",") if name]
    engine = MFSEngine.from_settings(settings)
    try:
        with drain_on_sigterm() as stop:  # kill PID: the questions in flight finish, then it stops (resumable)
            records = run_bench(engine, data, methods, args.out, settings=settings, sc_k=max(SC_KS),
                                concurrency=args.concurrency, stop=stop)
    finally:
        engine.close()
    replayed = replay_records(records, REPLAYED, settings.changed(num_samples=max(SC_KS)), data.kind)
    (args.out / "replayed.jsonl").write_text("".join(json.dumps(r) + "\n" for r in replayed), encoding="utf-8")
    records = [*records, *replayed]
    labels = [m.label for m in methods] + list(REPLAYED)
    print(format_table(summarize(records, labels)))
    results, sc_points, questions = tuning_numbers(records, data.kind, labels)
    if questions < MIN_QUESTIONS or not sc_points:
        print(f"no verdict: {questions} questions decoded by every method (< {MIN_QUESTIONS}); resume the run")
        return
    verdict = rules_verdict(results, questions, sc_points)
    for name, (correct, tokens) in results.items():
        print(f"  {name}: {correct}/{questions} at {tokens:,.0f} tok/q, margin {100 * verdict.margins[name]:+.1f} "
              f"points; {verdict.passed.get(name, 'reference')}")
    for name in verdict.passed:
        reference = REFERENCES[name]
        for pair in paired_comparisons(records, name):
            if pair.other == reference:
                print(f"  {name} vs {reference}: only it {pair.only_method}, only {reference} {pair.only_other}, "
                      f"p = {pair.p_value:.3f}")
    print(f"MFS rule kept: {verdict.mfs_winner or 'none (the default mfs stays)'}; "
          f"voting rule kept: {verdict.vote_winner or 'none'}")
    summary = {**asdict(verdict), "questions": questions, "sc_points": sc_points, "results": results}
    (args.out / "verdict.json").write_text(json.dumps(summary, indent=2, default=str) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
