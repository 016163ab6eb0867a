"""How much of the backend's raw batched throughput an MFS search keeps.

One run prints one table: for each prompt (no few-shot prefix, and a few-shot prefix of
``--prefix-tokens`` tokens) and each path of the transformers backend, "before"
(``PrefillPlanner(share=False)``: every row's prompt prefilled) and "after" (the default
shared-prefix prefill), side by side (both check stop strings incrementally: the whole-text
re-decoding of the first "before" is no longer in the backend):

- ``MFS tok/s`` and ``raw tok/s``: generated tokens per second of the lockstep search, and
  of one plain ``backend.generate`` call on the same questions with the search's mean rows
  per round and mean tokens per row (no stop strings): the physical limit (target of the
  ratio >= 0.8);
- ``lockstep q/s``, ``1-at-a-time q/s`` and ``16 callers q/s``: questions per second of the
  ``--questions`` questions decoded in one ``decode`` call, one after another, and from as
  many threads at once (target of lockstep / one-at-a-time >= 4);
- ``prefilled / distinct``: prompt tokens the model ran in prefill over the nodes of the
  token trie of each round's prompts (the fewest possible), summed over the lockstep run
  (target <= 1.2);
- ``outside generate``: share of the lockstep CPU time spent outside ``backend.generate``
  (the decoders, the scheduler; target <= 5%).

Then a cProfile of the lockstep search (after, with the prefix): the functions with the
most own time, and the share of the time in the model's forward passes, the prefill, the
stop checks and the decoders.

The demo model's context window is 512 tokens; a prefix that does not fit with the search's
step and answer budgets is cut to the longest that does (the table says so). Rerun with
``--model`` and ``--prefix-tokens`` on a model with a longer window.

``--dataset gsm`` (a name or path as ``mfs bench`` takes it; ``--data-dir`` or
``$MFS_DATA_DIR`` holds the files) measures the first ``--questions`` questions of that set
with the bench's own prompts (``render_example``: the 8-shot system prompt of GSM8K) instead
of the two prompt conditions. ``--lockstep-only`` measures only the lockstep search, before
and after, and prints its wall and CPU seconds and prompt-token counters (rows' prompt tokens,
prefilled, distinct): the quick check on a model too slow for the other rates.

Usage::

    nice -n 15 env OMP_NUM_THREADS=1 python experiments/benchmarks/throughput.py            # demo model, CPU
    python experiments/benchmarks/throughput.py --model path/to/ckpt --prefix-tokens 1000 --device cuda
    nice -n 19 env OMP_NUM_THREADS=1 python experiments/benchmarks/throughput.py --model model.gguf --dataset gsm \
        --data-dir ../shared/data --questions 2 --step-beam-size 2 --num-rollouts 2 --max-steps 2 --lockstep-only

Every rate is per second of this process's CPU time (``time.process_time``, all threads;
run it with ``OMP_NUM_THREADS=1``), not wall time: on a machine shared with other jobs wall
times swing with the load, CPU time much less. On an idle machine with one thread the two
agree; on a GPU use wall time (the GPU's time is not the process's CPU time). Even so the
numbers are noisy under contention; the ratios within one run (before and after measured
back to back on the same questions) are what to compare.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import math
import pstats
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mfs_core import MFSEngine, MFSSettings  # noqa: E402
from mfs_core.backends.hf_prefill import PrefillPlanner, PrefillStats  # noqa: E402
from mfs_core.backends.transformers import TransformersBackend  # noqa: E402
from mfs_core.bench.fewshot import GSM_COT_8_SHOT  # noqa: E402
from mfs_core.decoders import get_decoder  # noqa: E402
from mfs_core.types import GenerationRequest  # noqa: E402

HELDOUT = Path(__file__).resolve().parents[2] / "mfs_core" / "demo" / "heldout.json"
CLOCKS = {"cpu": [time.process_time, time.thread_time], "wall": [time.perf_counter, time.perf_counter]}
CLOCK = list(CLOCKS["cpu"])  # (whole run, inside one generate call); --clock sets it


class RecordingBackend:
    """A backend wrapper that counts the rows and generated tokens of every ``generate`` call."""

    def __init__(self, backend: TransformersBackend) -> None:
        self.inner = backend
        self.model_name = backend.model_name
        self.calls = 0
        self.rows = 0
        self.tokens = 0
        self.seconds = 0.0  # inside generate (CPU time of the calling thread, or wall time)

    def generate(self, requests):  # noqa: ANN001, ANN201 - the Backend protocol
        start = CLOCK[1]()
        outputs = self.inner.generate(requests)
        self.seconds += CLOCK[1]() - start
        self.calls += 1
        self.rows += sum(r.n for r in requests)
        self.tokens += sum(c.num_tokens for conts in outputs for c in conts)
        return outputs

    def count_tokens(self, text: str) -> int:  # noqa: D102
        return self.inner.count_tokens(text)

    def apply_chat_template(self, messages):  # noqa: ANN001, ANN201, D102
        return self.inner.apply_chat_template(messages)

    @property
    def context_window(self) -> int:  # noqa: D102
        return self.inner.context_window

    @property
    def num_parameters(self) -> int:  # noqa: D102
        return self.inner.num_parameters


@dataclass
class Row:
    """One line of the table."""

    prefix: str
    path: str
    mfs_tps: float
    raw_tps: float
    lockstep_qps: float
    sequential_qps: float
    concurrent_qps: float
    prefill_ratio: float
    outside_share: float
    tokens: int
    rows_per_round: float
    fingerprint: tuple


def _fresh(backend: TransformersBackend) -> RecordingBackend:
    backend.prefill_stats = PrefillStats()
    return RecordingBackend(backend)


def _lockstep(backend: TransformersBackend, prompts: list[str], settings: MFSSettings) -> tuple[float, RecordingBackend, list]:
    recorder = _fresh(backend)
    engine = MFSEngine(recorder, settings)
    start = CLOCK[0]()
    results = engine.decode_prompts(prompts)
    return CLOCK[0]() - start, recorder, results


def _sequential(backend: TransformersBackend, prompts: list[str], settings: MFSSettings) -> float:
    engine = MFSEngine(backend, settings)
    start = CLOCK[0]()
    for prompt in prompts:
        engine.decode_prompts([prompt])
    return CLOCK[0]() - start


def _concurrent(backend: TransformersBackend, prompts: list[str], settings: MFSSettings) -> float:
    engine = MFSEngine(backend, settings)
    barrier = threading.Barrier(len(prompts) + 1)

    def caller(prompt: str) -> None:
        barrier.wait()
        engine.decode_prompts([prompt])

    threads = [threading.Thread(target=caller, args=(p,)) for p in prompts]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = CLOCK[0]()
    for thread in threads:
        thread.join()
    return CLOCK[0]() - start


def _raw(backend: TransformersBackend, prompts: list[str], rows: int, tokens_per_row: int) -> float:
    """Generated tokens/s of one plain batch: ``rows`` rows spread over ``prompts``, no stops."""
    per_prompt = max(1, math.ceil(rows / len(prompts)))
    requests = [GenerationRequest(prompt=p, n=per_prompt, max_tokens=tokens_per_row, temperature=0.7, seed=i)
                for i, p in enumerate(prompts)]
    start = CLOCK[0]()
    outputs = backend.generate(requests)
    seconds = CLOCK[0]() - start
    return sum(c.num_tokens for conts in outputs for c in conts) / seconds


def _prefix_text(backend: TransformersBackend, tokens: int) -> str:
    """The first ``tokens`` tokens of the GSM8K 8-shot chain-of-thought prompt (repeated if short)."""
    text = GSM_COT_8_SHOT
    ids = backend.tokenizer.encode(text, add_special_tokens=False)
    while len(ids) < tokens:
        text += "\n\n" + GSM_COT_8_SHOT
        ids = backend.tokenizer.encode(text, add_special_tokens=False)
    return backend.tokenizer.decode(ids[:tokens], skip_special_tokens=True, clean_up_tokenization_spaces=False)


def _measure(label: str, path: str, backend: TransformersBackend, prompts: list[str], settings: MFSSettings) -> Row:
    seconds, recorder, results = _lockstep(backend, prompts, settings)
    prefill = backend.prefill_stats
    rows_per_round = recorder.rows / recorder.calls
    tokens_per_row = max(1, round(recorder.tokens / recorder.rows))
    raw_tps = _raw(backend, prompts, round(rows_per_round), tokens_per_row)
    sequential = _sequential(backend, prompts, settings)
    concurrent = _concurrent(backend, prompts, settings)
    return Row(
        prefix=label, path=path, mfs_tps=recorder.tokens / seconds, raw_tps=raw_tps,
        lockstep_qps=len(prompts) / seconds, sequential_qps=len(prompts) / sequential,
        concurrent_qps=len(prompts) / concurrent, prefill_ratio=prefill.prefill_ratio,
        outside_share=1 - recorder.seconds / seconds, tokens=recorder.tokens, rows_per_round=rows_per_round,
        fingerprint=tuple((r.answer, r.output_tokens) for r in results),
    )


def _lockstep_counts(label: str, path: str, backend: TransformersBackend, prompts: list[str],
                     settings: MFSSettings) -> dict[str, Any]:
    """The lockstep search alone: wall and CPU seconds, generated tokens and the prefill counters."""
    wall, cpu = time.perf_counter(), time.process_time()
    seconds, recorder, results = _lockstep(backend, prompts, settings)
    stats = backend.prefill_stats
    return {"prompt": label, "path": path, "wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu,
            "rounds": recorder.calls, "rows": recorder.rows, "tokens": recorder.tokens,
            "row_prompt_tokens": stats.row_prompt_tokens, "prefilled_tokens": stats.prefilled_tokens,
            "distinct_prompt_tokens": stats.distinct_prompt_tokens, "forward_passes": stats.forward_passes,
            "fingerprint": [(r.answer, r.output_tokens) for r in results]}


def _lockstep_table(rows: list[dict[str, Any]]) -> str:
    head = ("| prompt | path | wall s | CPU s | rounds | rows | generated | row prompt tokens | prefilled | distinct "
            "| prefilled / distinct |")
    lines = [head, "|" + "|".join([" --- "] * 11) + "|"]
    for r in rows:
        ratio = r["prefilled_tokens"] / r["distinct_prompt_tokens"] if r["distinct_prompt_tokens"] else 0.0
        lines.append(f"| {r['prompt']} | {r['path']} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['rounds']} | {r['rows']} "
                     f"| {r['tokens']} | {r['row_prompt_tokens']} | {r['prefilled_tokens']} "
                     f"| {r['distinct_prompt_tokens']} | {ratio:.2f} |")
    return "\n".join(lines)


def _table(rows: list[Row]) -> str:
    head = ("| prompt | path | MFS tok/s | raw tok/s | MFS / raw | lockstep q/s | 1-at-a-time q/s | lockstep / 1-at-a-time "
            "| 16 callers q/s | prefilled / distinct | outside generate |")
    lines = [head, "|" + "|".join([" --- "] * 11) + "|"]
    for r in rows:
        lines.append(
            f"| {r.prefix} | {r.path} | {r.mfs_tps:.0f} | {r.raw_tps:.0f} | {r.mfs_tps / r.raw_tps:.2f} | "
            f"{r.lockstep_qps:.2f} | {r.sequential_qps:.2f} | {r.lockstep_qps / r.sequential_qps:.1f}× | "
            f"{r.concurrent_qps:.2f} | {r.prefill_ratio:.2f} | {100 * r.outside_share:.1f}% |"
        )
    return "\n".join(lines)


def _profile(backend: TransformersBackend, prompts: list[str], settings: MFSSettings, top: int) -> str:
    """cProfile of the lockstep search, driven in this thread (the engine's loop, without its worker)."""
    factory = get_decoder("mfs")
    backend.prefill_stats = PrefillStats()
    profiler = cProfile.Profile(CLOCK[0])
    profiler.enable()
    start = CLOCK[0]()
    decoders = [factory(p, settings) for p in prompts]
    pending = {i: next(d) for i, d in enumerate(decoders)}
    rounds = 0
    while pending:
        batch = [req for reqs in pending.values() for req in reqs]
        outputs = backend.generate(batch)
        rounds += 1
        offset, still = 0, {}
        for i, reqs in pending.items():
            share, offset = outputs[offset:offset + len(reqs)], offset + len(reqs)
            try:
                still[i] = decoders[i].send(share)
            except StopIteration:
                pass
        pending = still
    wall = CLOCK[0]() - start  # CPU or wall seconds (--clock)
    profiler.disable()
    stream = io.StringIO()
    stats = pstats.Stats(profiler, stream=stream)
    stats.sort_stats("tottime").print_stats(top)

    def cumulative(fragment: str) -> float:
        return max((v[3] for k, v in stats.stats.items() if fragment in f"{k[0]}:{k[2]}"), default=0.0)

    parts = {
        "backend.generate": cumulative("transformers.py:generate"),
        "  model forward (all nn.Module calls)": cumulative("module.py:_wrapped_call_impl"),
        "  prefill (shared-prefix)": cumulative("hf_prefill.py:_prefill_shared"),
        "  stop checks": cumulative("transformers.py:_check_stops"),
        "  final decode of texts": cumulative("transformers.py:_decode"),
        "decoders (send)": cumulative("mfs.py:decode_mfs"),
    }
    lines = [f"cProfile of the lockstep search ({len(prompts)} questions, {rounds} rounds, {wall:.1f} s on the run clock under the profiler)"]
    lines += [f"  {name}: {seconds:.2f} s ({100 * seconds / wall:.0f}%)" for name, seconds in parts.items()]
    lines.append("")
    lines.append(stream.getvalue())
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table and the profile."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="mfs-demo")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--questions", type=int, default=16)
    parser.add_argument("--prefix-tokens", type=int, default=1000, help="few-shot prefix length (tokens)")
    parser.add_argument("--step-beam-size", type=int, default=4, help="M")
    parser.add_argument("--num-rollouts", type=int, default=4, help="N")
    parser.add_argument("--max-steps", type=int, default=3)
    parser.add_argument("--max-step-tokens", type=int, default=24)
    parser.add_argument("--max-answer-tokens", type=int, default=48)
    parser.add_argument("--profile-top", type=int, default=20, help="functions listed by own time (0: no profile)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu",
                        help="cpu: process CPU time (a shared CPU machine); wall: wall time (a GPU)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--dataset", help="a bench set (name or path): its first --questions questions, bench prompts")
    parser.add_argument("--data-dir", type=Path, help="where --dataset's files are (default: $MFS_DATA_DIR, ./data)")
    parser.add_argument("--lockstep-only", action="store_true",
                        help="only the lockstep search, before and after: seconds and prompt-token counters")
    args = parser.parse_args(argv)
    CLOCK[:] = CLOCKS[args.clock]

    settings = MFSSettings(model=args.model, device=args.device, step_beam_size=args.step_beam_size,
                           num_rollouts=args.num_rollouts, max_steps=args.max_steps,
                           max_step_tokens=args.max_step_tokens, max_answer_tokens=args.max_answer_tokens, seed=0)
    after = TransformersBackend.from_settings(settings)
    before = TransformersBackend(after.model, after.tokenizer, after.model_name, after.batch_size,
                                 prefill=PrefillPlanner(after.model, after.tokenizer.pad_token_id, share=False))
    if args.dataset:
        return _dataset_run(args, settings, before, after)
    questions = [item["input"] for item in json.loads(HELDOUT.read_text())[: args.questions]]

    plain_prompts = [MFSEngine(after, settings).render(q) for q in questions]
    longest = max(len(after.encode_prompt(p)) for p in plain_prompts)
    budget = args.max_steps * (args.max_step_tokens + 2) + args.max_answer_tokens
    fits = max(0, after.context_window - 1 - longest - budget)
    prefix_tokens = min(args.prefix_tokens, fits)
    prefixed = settings.model_copy(update={"system_prompt": _prefix_text(after, prefix_tokens)})
    prefixed_prompts = [MFSEngine(after, prefixed).render(q) for q in questions]
    added = len(after.encode_prompt(prefixed_prompts[0])) - len(after.encode_prompt(plain_prompts[0]))

    print(f"model {args.model} on {args.device}: {after.num_parameters / 1e6:.1f} M parameters, context window "
          f"{after.context_window} tokens; {len(questions)} questions, M={args.step_beam_size}, N={args.num_rollouts}, "
          f"{args.max_steps} steps, {args.max_step_tokens} step tokens, {args.max_answer_tokens} answer tokens")
    if prefix_tokens < args.prefix_tokens:
        print(f"a {args.prefix_tokens}-token prefix does not fit the {after.context_window}-token window with "
              f"{longest}-token questions and a {budget}-token search budget: using {prefix_tokens} tokens")
    print(f"few-shot prefix: {prefix_tokens} tokens of GSM_COT_8_SHOT as the system message "
          f"(+{added} prompt tokens with the chat template)")
    sys.stdout.flush()

    conditions = ((f"{prefix_tokens}-token prefix", prefixed_prompts, prefixed), ("no prefix", plain_prompts, settings))
    if args.lockstep_only:
        return _lockstep_run(conditions, before, after, args.json)
    rows = []
    profile = ""
    conditions = ((f"{prefix_tokens}-token prefix", prefixed_prompts, prefixed), ("no prefix", plain_prompts, settings))
    for label, prompts, run_settings in conditions:  # the prefixed rows first: a slow machine prints them first
        for path, backend in (("before", before), ("after", after)):
            rows.append(_measure(label, path, backend, prompts, run_settings))
            print(f"  measured {label} / {path}: {_table(rows[-1:]).splitlines()[-1]}", file=sys.stderr, flush=True)
        if args.profile_top and not profile:
            profile = _profile(after, prefixed_prompts, prefixed, args.profile_top)
            print(profile, file=sys.stderr, flush=True)
    print()
    print(_table(rows))
    same = all(rows[i].fingerprint == rows[i + 1].fingerprint for i in range(0, len(rows), 2))
    print(f"\nbefore and after decode the same answers with the same token counts: {'yes' if same else 'NO'}")
    print(f"mean rows per round: {', '.join(f'{r.prefix}/{r.path} {r.rows_per_round:.0f}' for r in rows)}")
    if args.json:
        args.json.write_text(json.dumps([{k: v for k, v in vars(r).items() if k != 'fingerprint'} for r in rows], indent=2))
    if profile:
        print()
        print(profile)
    return 0


def _dataset_run(args: argparse.Namespace, settings: MFSSettings, before: TransformersBackend,
                 after: TransformersBackend) -> int:
    """``--dataset``: the bench's prompts of the set's first ``--questions`` questions."""
    from mfs_core.bench.datasets import load_dataset
    from mfs_core.bench.prompts import render_example

    dataset = load_dataset(args.dataset, data_dir=args.data_dir, limit=args.questions)
    prompts = [render_example(example, after, settings) for example in dataset.examples]
    lengths = [len(after.encode_prompt(p)) for p in prompts]
    print(f"model {args.model} on {args.device}: {after.num_parameters / 1e6:.1f} M parameters; {len(prompts)} "
          f"questions of {dataset.name} with the bench prompts ({min(lengths)}-{max(lengths)} tokens), "
          f"M={args.step_beam_size}, N={args.num_rollouts}, {args.max_steps} steps, {args.max_step_tokens} step "
          f"tokens, {args.max_answer_tokens} answer tokens")
    sys.stdout.flush()
    conditions = ((f"{dataset.name} bench prompts", prompts, settings),)
    if args.lockstep_only:
        return _lockstep_run(conditions, before, after, args.json)
    rows = []
    for label, run_prompts, run_settings in conditions:
        for path, backend in (("before", before), ("after", after)):
            rows.append(_measure(label, path, backend, run_prompts, run_settings))
    print(_table(rows))
    return 0


def _lockstep_run(conditions: tuple, before: TransformersBackend, after: TransformersBackend, json_path: Path | None) -> int:
    """``--lockstep-only``: before and after, back to back, on each condition."""
    rows = []
    for label, prompts, run_settings in conditions:
        for path, backend in (("before", before), ("after", after)):
            rows.append(_lockstep_counts(label, path, backend, prompts, run_settings))
            print(f"  measured {label} / {path}: {_lockstep_table(rows[-1:]).splitlines()[-1]}", file=sys.stderr,
                  flush=True)
    print()
    print(_lockstep_table(rows))
    same = all(rows[i]["fingerprint"] == rows[i + 1]["fingerprint"] for i in range(0, len(rows), 2))
    print(f"\nbefore and after decode the same answers with the same token counts: {'yes' if same else 'NO'}")
    if json_path:
        json_path.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
