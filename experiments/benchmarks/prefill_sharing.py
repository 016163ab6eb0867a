"""What 64 samples of one long prompt cost against one sample, transformers backend.

One prompt of ``--prompt-tokens`` tokens (default 1,449, the prompt first measured), 2 new tokens per sample, seed 0:
the CPU seconds (``time.process_time``; run with ``OMP_NUM_THREADS=1`` on a shared machine) of one
``generate`` with ``n=1`` and with ``n=64``, best of ``--repeats``, and their ratio. The cache is
written once with room to grow (:mod:`mfs_core.backends.hf_headroom`) and the prompt's prefill is
shared: the 64 rows are one prefill fanned out. Target: ratio <= 3. (The comparison with
transformers' ``DynamicLayer``, which grows the cache by ``torch.cat`` per token, went with that
path: docs/backends.md records the measurement.) ``--profile`` then prints the torch profiler's
share of self CPU time per operator for one 64-sample call.

Usage::

    OMP_NUM_THREADS=1 python experiments/benchmarks/prefill_sharing.py --model smollm2-135m-instruct
"""

from __future__ import annotations

import argparse
import time

from rich.console import Console
from rich.table import Table

from mfs_core import MFSSettings
from mfs_core.backends._hf import quiet_transformers
from mfs_core.backends.transformers import TransformersBackend
from mfs_core.types import GenerationRequest


def cpu_seconds(backend: TransformersBackend, prompt: str, n: int, repeats: int) -> tuple[float, list]:
    best, out = None, None
    for _ in range(repeats):
        began = time.process_time()
        out = backend.generate([GenerationRequest(prompt=prompt, n=n, max_tokens=2, temperature=1.0, seed=0)])[0]
        spent = time.process_time() - began
        best = spent if best is None else min(best, spent)
    return best, [c.token_ids for c in out]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--prompt-tokens", type=int, default=1449)
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="the torch profiler's top operators per path")
    args = parser.parse_args(argv)
    quiet_transformers()
    backend = TransformersBackend.from_settings(MFSSettings(model=args.model, device="cpu", dtype=args.dtype,
                                                            batch_size=max(args.samples, 64)))
    text = " ".join(f"Question {i}: Tom has {i} apples and buys {i + 3} more; how many does he have now?"
                    for i in range(400))
    ids = backend.tokenizer(text)["input_ids"][: args.prompt_tokens]
    prompt = backend.tokenizer.decode(ids)
    cpu_seconds(backend, prompt, 1, 1)  # warm-up
    one, _ = cpu_seconds(backend, prompt, 1, args.repeats)
    many, _ = cpu_seconds(backend, prompt, args.samples, args.repeats)
    rows = [("grown in place", one, many)]
    table = Table(title=f"{args.model}, one {backend.count_tokens(prompt)}-token prompt, 2 new tokens, CPU seconds "
                        f"(best of {args.repeats})")
    for column in ("cache", "1 sample s", f"{args.samples} samples s", "ratio"):
        table.add_column(column)
    for label, one, many in rows:
        table.add_row(label, f"{one:.2f}", f"{many:.2f}", f"{many / one:.2f}")
    Console(width=140).print(table)
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as profiled:
            cpu_seconds(backend, prompt, args.samples, 1)
        events = sorted(profiled.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
        total = sum(e.self_cpu_time_total for e in events)
        shares = ", ".join(f"{e.key} {e.self_cpu_time_total / total:.0%}" for e in events[:5])
        print(f"self CPU time by operator: {shares}")


if __name__ == "__main__":
    main()
