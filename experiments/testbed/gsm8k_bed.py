"""The GSM8K test bed of a real model, measured before any decoder table runs on it.

``python -m experiments.testbed.gsm8k_bed --temperatures 0.7,0.5 --json bench-results/gsm8k-bed.json`` reads
GSM8K test questions 0 to ``--limit - 1`` (the tuning split: at most 0-199; the script refuses
more, so the held-out questions 200-499 of the decoder table are never decoded here) and, with
the model (default Qwen2.5-Coder-0.5B-Instruct) on vLLM's CPU build through the library's vLLM
backend (the library's CPU defaults: dtype and KV block), in ``mfs bench``'s prompt (the
φ-Decoding release's GSM8K system prompt in the model's chat template, then the assistant
prefix, :func:`mfs_core.bench.prompts.render_example`):

* **greedy** answers, once with each ``--prefixes`` entry as ``assistant_prefix`` (the
  release's ``"The reasoning steps are:\\n\\n"`` against none, on a chat model);
* **k samples per question at each temperature** (``--k``, default 16; top-p 1; at most
  ``--max-tokens`` tokens, stopped at the end marker), seeded per question exactly as the ``sc``
  decoder seeds its one ``n = k`` request (:func:`~mfs_core.decoders.common.decode_rng`), with
  the raw top-20 log-probs of every sampled token (``SamplingParams(logprobs=20)``);
* answers scored as ``mfs bench`` scores GSM8K (:mod:`mfs_core.bench.scoring`).

Printed per temperature, with 95% intervals: the accuracy of one sample; self-consistency's
curve at k = 1, 2, 4, 8, 16 over the first k samples (majority, ties to the highest mean
log-prob, as the ``sc`` decoder); the share of questions whose k first steps hold at least two
texts (room for a step-level search); and how well each quality signal separates a question's
right samples from its wrong ones (:func:`testbed.foresight_separation.separation`: pooled and
within-question AUROC with bootstrap intervals over questions) for MFS's F (``mean_logprob``,
MFS_SPEC.md eq. 3) and DeepConf's lowest group confidence (``lowest_group_conf@w``, w = 8, 16, 32
tokens), among the other candidates of that module. An AUROC near 0.5 says no decoder that
ranks paths by that signal can gain over the vote on this bed.

The samples are appended per chunk of questions to ``<json>.samples.jsonl`` (resumed on a
rerun with the same arguments), and the summary goes to ``--json``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from experiments.testbed.evaluate import _lines, wilson_interval
from experiments.testbed.foresight_separation import TOP_K, Sample, _sample_logprobs, separation

__all__ = ["MODEL", "PREFIXES", "TUNING_QUESTIONS", "main", "sc_curve", "summarise"]

MODEL = "qwen2.5-coder-0.5b-instruct"
TUNING_QUESTIONS = 200
"""GSM8K test questions 0-199 are the tuning split; the decoder table runs on 200-499."""

PREFIXES = {"release": "The reasoning steps are:\n\n", "none": ""}
"""The assistant prefixes greedy decoding is measured with (``--prefixes``)."""

KS = (1, 2, 4, 8, 16)


def sc_curve(samples: Sequence[Sample], qualities: Sequence[float], ks: Sequence[int] = KS) -> dict[int, int]:
    """Questions self-consistency answers right over the first k samples of each question, per k.

    The vote is :func:`mfs_core.answers.majority_vote` (ties to the highest quality), as the
    ``sc`` decoder's; a k above a question's sample count is left out.

    Args:
        samples: every sample, in sampling order within each question.
        qualities: each sample's quality (its mean log-prob per token, nats).
        ks: the k values.

    Returns:
        ``{k: right questions}``.
    """
    from mfs_core.answers import majority_vote

    by_question: dict[int, list[int]] = {}
    for i, sample in enumerate(samples):
        by_question.setdefault(sample.question, []).append(i)
    right = {}
    for k in ks:
        count = 0
        for rows in by_question.values():
            if len(rows) < k:
                break
            first = rows[:k]
            vote = majority_vote([samples[i].answer for i in first], [qualities[i] for i in first])
            count += any(samples[i].right for i in first if vote.answer is not None and samples[i].answer == vote.answer)
        else:
            right[k] = count
    return right


def summarise(samples: Sequence[Sample], resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """The bed's statistics at one temperature (module docstring), from its samples."""
    questions = sorted({s.question for s in samples})
    n = len(questions)
    means = [sum(s.logprobs) / len(s.logprobs) if s.logprobs else 0.0 for s in samples]
    curve = sc_curve(samples, means)
    diverse = sum(len({s.first_step for s in samples if s.question == q}) >= 2 for q in questions)
    right = sum(s.right for s in samples)
    return {
        "questions": n, "samples": len(samples),
        "sample_accuracy": [right / len(samples), *wilson_interval(right, len(samples)), right],
        "sc": {k: [c / n, *wilson_interval(c, n), c] for k, c in curve.items()},
        "diverse_first_steps": [diverse / n, *wilson_interval(diverse, n), diverse],
        "separation": separation(samples, resamples=resamples, seed=seed),
    }


def _settings(args: argparse.Namespace, prefix: str) -> Any:
    from mfs_core.settings import MFSSettings

    return MFSSettings(model=args.model, backend="vllm", seed=args.seed, max_answer_tokens=args.max_tokens,
                       assistant_prefix=prefix)


def _done(path: Path) -> set[tuple[str, int]]:
    if not path.exists():
        return set()
    keys = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:  # a torn last line
            continue
        keys.add((row["run"], row["question"]))
    return keys


def decode(args: argparse.Namespace, samples_path: Path) -> None:
    """Greedy answers per prefix and k samples per temperature, appended to ``samples_path``."""
    import vllm

    from mfs_core.backends import _hf
    from mfs_core.backends.vllm import VLLMBackend
    from mfs_core.bench.datasets import load_dataset
    from mfs_core.bench.prompts import render_example
    from mfs_core.bench.scoring import extract_prediction, is_correct
    from mfs_core.decoders.common import decode_rng, request_seed

    data = load_dataset("gsm8k", data_dir=args.data_dir, limit=args.limit)
    backend = VLLMBackend.from_settings(_settings(args, PREFIXES[args.sample_prefix]))
    tokenizer = backend.llm.get_tokenizer()
    runs = [(f"greedy:{p}", p, None) for p in args.prefixes] + [(f"T={t:g}", args.sample_prefix, t)
                                                                   for t in args.temperatures]
    done = _done(samples_path)
    start = time.perf_counter()
    try:
        with samples_path.open("a", encoding="utf-8") as out:
            for run, prefix, temperature in runs:
                settings = _settings(args, PREFIXES[prefix])
                todo = [e for e in data.examples if (run, e.index) not in done]
                for lo in range(0, len(todo), args.chunk):
                    block = todo[lo: lo + args.chunk]
                    prompts, params = [], []
                    for example in block:
                        prompt = render_example(example, backend, settings)
                        prompts.append({"prompt_token_ids": _hf.encode_prompt(tokenizer, prompt)})
                        common = {"max_tokens": args.max_tokens, "stop": [settings.end_marker], "logprobs": TOP_K}
                        if temperature is None:
                            params.append(vllm.SamplingParams(n=1, temperature=0.0, **common))
                        else:
                            seed = request_seed(decode_rng(settings, prompt))
                            params.append(vllm.SamplingParams(n=args.k, temperature=temperature, top_p=1.0,
                                                              seed=seed, **common))
                    outputs = backend.llm.generate(prompts, params, use_tqdm=False)
                    for example, output in zip(block, outputs):
                        rows = []
                        for completion in sorted(output.outputs, key=lambda c: c.index):
                            answer = extract_prediction(example.kind, completion.text, example.target, example.question)
                            lps, confs = _sample_logprobs(completion)
                            sample = Sample(example.index, is_correct(example.kind, answer, example.target), answer,
                                            (_lines(completion.text) or [""])[0], lps, confs)
                            rows.append({**asdict(sample), "finish_reason": completion.finish_reason})
                        out.write(json.dumps({"run": run, "question": example.index, "samples": rows}) + "\n")
                    out.flush()
                    print(f"{run}: {lo + len(block)}/{len(todo)} questions, {time.perf_counter() - start:.0f} s",
                          flush=True)
    finally:
        backend.close()


def load_samples(samples_path: Path) -> dict[str, list[Sample]]:
    """The saved samples by run (``greedy:<prefix>``, ``T=<temperature>``), questions in order."""
    runs: dict[str, dict[int, list[Sample]]] = {}
    for line in samples_path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        runs.setdefault(row["run"], {})[row["question"]] = [
            Sample(**{k: v for k, v in s.items() if k != "finish_reason"}) for s in row["samples"]]
    return {run: [s for q in sorted(by_q) for s in by_q[q]] for run, by_q in runs.items()}


def format_summary(summary: dict[str, Any]) -> str:
    """Markdown tables of :func:`main`'s summary."""
    lines = ["| greedy, assistant prefix | right | accuracy % (95% CI) |", "| --- | --- | --- |"]
    for run, (p, lo, hi, c, n) in summary["greedy"].items():
        lines.append(f"| {run} | {c}/{n} | {100 * p:.1f} ({100 * lo:.1f}-{100 * hi:.1f}) |")
    lines += ["", "| T | one sample % | " + " | ".join(f"SC k={k} %" for k in KS)
              + " | first steps >= 2 texts % | F within-question AUROC (95% CI) | F pooled | "
              "lowest group conf@8 / @16 / @32 within-question AUROC (95% CI) |",
              "| --- " * (6 + len(KS)) + "|"]
    for run, stats in summary["temperatures"].items():
        sep = stats["separation"]["candidates"]

        def within(name: str) -> str:
            r = sep[name]
            return f"{r['within_auroc']:.3f} ({r['within_ci'][0]:.3f}-{r['within_ci'][1]:.3f})"

        sc = " | ".join(f"{100 * stats['sc'][k][0]:.1f} ({100 * stats['sc'][k][1]:.1f}-{100 * stats['sc'][k][2]:.1f})"
                        if k in stats["sc"] else "" for k in KS)
        lines.append(f"| {run} | {100 * stats['sample_accuracy'][0]:.1f} | {sc} | "
                     f"{100 * stats['diverse_first_steps'][0]:.1f} | {within('mean_logprob')} | "
                     f"{sep['mean_logprob']['pooled_auroc']:.3f} | "
                     + " / ".join(within(f"lowest_group_conf@{w}") for w in (8, 16, 32)) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command line: decode (resumable), then print and save the bed's statistics."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--limit", type=int, default=TUNING_QUESTIONS, help=f"first N questions (<= {TUNING_QUESTIONS})")
    parser.add_argument("--k", type=int, default=16, help="samples per question and temperature")
    parser.add_argument("--temperatures", default="0.7,0.5", help="comma-separated sampling temperatures")
    parser.add_argument("--prefixes", default="release,none", help=f"greedy assistant prefixes, of {sorted(PREFIXES)}")
    parser.add_argument("--sample-prefix", default="none", choices=sorted(PREFIXES),
                        help="the assistant prefix of the sampled answers (none: the library's default for Qwen)")
    parser.add_argument("--max-tokens", type=int, default=400)
    parser.add_argument("--chunk", type=int, default=16, help="questions per vLLM generate call")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=Path("bench-results/gsm8k-bed.json"))
    parser.add_argument("--no-decode", action="store_true", help="summarise the saved samples only")
    args = parser.parse_args(argv)
    if not 1 <= args.limit <= TUNING_QUESTIONS:
        parser.error(f"--limit must be in 1..{TUNING_QUESTIONS} (the tuning questions), got {args.limit}")
    args.temperatures = [float(t) for t in args.temperatures.split(",") if t]
    args.prefixes = [p for p in args.prefixes.split(",") if p]
    unknown = [p for p in args.prefixes if p not in PREFIXES]
    if unknown:
        parser.error(f"--prefixes: unknown {unknown}; known {sorted(PREFIXES)}")
    samples_path = args.json.with_suffix(".samples.jsonl")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    if not args.no_decode:
        decode(args, samples_path)
    runs = load_samples(samples_path)
    summary: dict[str, Any] = {"model": args.model, "limit": args.limit, "k": args.k, "greedy": {},
                               "temperatures": {}, "sample_prefix": args.sample_prefix}
    for run, samples in runs.items():
        if run.startswith("greedy:"):
            right, n = sum(s.right for s in samples), len(samples)
            summary["greedy"][run.split(":", 1)[1]] = [right / n, *wilson_interval(right, n), right, n]
        else:
            summary["temperatures"][run] = summarise(samples, resamples=args.resamples, seed=args.seed)
    print(format_summary(summary))
    args.json.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return summary


if __name__ == "__main__":
    main()
