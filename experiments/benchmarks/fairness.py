"""Fair sharing: an ordinary decode's latency alone and beside the largest
request ``mfs serve``'s default limits allow, per scheduler; and how soon an abandoned decode
stops generating.

The demo model; the ordinary decode is ``mfs`` at ``mfs serve``'s settings (M = N = 4, seed 0) on
one held-out question; the maximal request is what the default limits let one body ask for:
``n = 8`` decodes (``MFS_SERVER_MAX_N``) at M = N = 4, 8 steps, all taken (``min_steps = 8``),
answers up to 1,024 tokens (cut to the demo model's window). Per scheduler (``lockstep`` on the
transformers backend, every live decode in every call; ``lockstep-fair``, the same with ``mfs serve``'s
fair share, ``--fair-share-tokens``, default ``ServerSettings``'s; ``continuous`` on vLLM
in-process), per repeat: the ordinary decode alone,
then started one second after the maximal request, its wall seconds; the factor is beside ÷
alone (the target: at most 3). Then the abandon latency: a maximal decode abandoned
mid-round; seconds from ``abandon()`` until the backend call that held it returned (lockstep:
the round, whose rows of the abandoned decode end within a token step) or until vLLM runs none of
its requests (continuous: the scheduler cancels the call, vLLM aborts the requests).

Usage::

    python experiments/benchmarks/fairness.py --schedulers lockstep,lockstep-fair,continuous --repeats 3 --out bench-results/fairness.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from mfs_core import MFSEngine, MFSSettings
from mfs_core.backends import create_backend
from mfs_core.engine import share_group
from mfs_core.bench.datasets import load_dataset
from mfs_core.serve.config import ServerSettings

ORDINARY = {"step_beam_size": 4, "num_rollouts": 4, "seed": 0}
MAXIMAL = {"step_beam_size": 4, "num_rollouts": 4, "max_steps": 8, "min_steps": 8, "max_answer_tokens": 1024}


def maximal_settings(base: MFSSettings, window: int) -> list[MFSSettings]:
    """The maximal request's 8 decodes (seeds 0..7), its answer budget cut to the model's window."""
    tokens = min(MAXIMAL["max_answer_tokens"], max(1, window // 2))
    return [base.changed(**{**MAXIMAL, "max_answer_tokens": tokens}, seed=seed) for seed in range(8)]


def timed(engine: MFSEngine, prompt: str, settings: MFSSettings) -> float:
    began = time.perf_counter()
    engine.submit_prompts([prompt], settings=settings)[0].result()
    return time.perf_counter() - began


def fairness(engine: MFSEngine, prompt: str, big_prompt: str, repeats: int, console: Console) -> dict[str, Any]:
    ordinary = engine.settings.changed(**ORDINARY)
    bigs = maximal_settings(engine.settings, engine.backend.context_window)
    alone, beside = [], []
    timed(engine, prompt, ordinary)  # warm-up
    for _ in range(repeats):
        alone.append(timed(engine, prompt, ordinary))
        with share_group("maximal"):  # one request's decodes, as mfs serve groups them
            big = [engine.submit_prompts([big_prompt], settings=s)[0] for s in bigs]
        time.sleep(1.0)
        beside.append(timed(engine, prompt, ordinary))
        for future in big:
            future.abandon("the measurement is over")
        for future in big:
            try:
                future.result(timeout=600)
            except Exception:  # noqa: BLE001 - CancelledError of the abandoned decodes
                pass
        console.print(f"alone {alone[-1]:.2f} s, beside the maximal request {beside[-1]:.2f} s", style="dim")
    return {"alone": alone, "beside": beside, "factor": statistics.median(beside) / statistics.median(alone)}


def abandon_latency(engine: MFSEngine, big_prompt: str, scheduling: str) -> float:
    """Seconds from ``abandon()`` (2 s into a maximal decode) until its backend call returned (lockstep)
    or vLLM runs none of its requests any more (continuous: ``AsyncLLM.get_num_unfinished_requests``)."""
    settings = maximal_settings(engine.settings, engine.backend.context_window)[0]
    returned: list[float] = []
    backend = engine.backend
    if scheduling.startswith("lockstep"):
        original = backend.generate

        def generate(requests):  # noqa: ANN001, ANN202
            try:
                return original(requests)
            finally:
                returned.append(time.perf_counter())

        backend.generate = generate
    try:
        future = engine.submit_prompts([big_prompt], settings=settings)[0]
        time.sleep(2.0)
        abandoned = time.perf_counter()
        future.abandon("the measurement abandons it")
        try:
            future.result(timeout=600)
        except Exception:  # noqa: BLE001 - its CancelledError
            pass
        if not scheduling.startswith("lockstep"):  # vLLM's own count of requests it still runs, until they are aborted
            deadline = time.perf_counter() + 60.0
            while backend.llm.get_num_unfinished_requests() and time.perf_counter() < deadline:
                time.sleep(0.01)
        ended = time.perf_counter()
    finally:
        if scheduling.startswith("lockstep"):
            del backend.generate
    if scheduling.startswith("lockstep"):
        after = [t for t in returned if t >= abandoned]
        return (after[0] if after else ended) - abandoned
    return ended - abandoned


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedulers", default="lockstep,lockstep-fair,continuous")
    parser.add_argument("--fair-share-tokens", type=int, default=ServerSettings().fair_share_tokens,
                        help="lockstep-fair's LockstepScheduler.fair_share_tokens (output tokens)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu", help="transformers backend's device (lockstep)")
    parser.add_argument("--kv-cache-gib", type=float, default=2.0, help="vLLM's KV cache (continuous)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    examples = load_dataset("demo", limit=2).examples
    rows = []
    for scheduling in args.schedulers.split(","):
        if scheduling.startswith("lockstep"):
            settings = MFSSettings(device=args.device, **ORDINARY)
        else:
            settings = MFSSettings(backend="vllm", scheduling="continuous", kv_cache_gib=args.kv_cache_gib, **ORDINARY)
        backend = create_backend(settings)
        try:
            engine = MFSEngine(backend, settings)
            if scheduling == "lockstep-fair":
                engine.scheduler.fair_share_tokens = args.fair_share_tokens
            prompt, big_prompt = engine.render(examples[0].question), engine.render(examples[1].question)
            measured = fairness(engine, prompt, big_prompt, args.repeats, console)
            measured["abandon_seconds"] = abandon_latency(engine, big_prompt, scheduling)
            engine.close()
        finally:
            getattr(backend, "close", lambda: None)()  # vLLM's engine process; the transformers backend has none
        rows.append({"scheduling": scheduling, "backend": settings.backend, "device": settings.device, **measured})
        console.print(f"{scheduling}: factor {measured['factor']:.2f}, abandon {measured['abandon_seconds']:.2f} s")

    table = Table(title="an ordinary decode alone and beside the maximal request of the default limits (demo model)")
    for column in ("scheduler", "backend", "alone s (median)", "beside s (median)", "factor", "abandon → stopped s"):
        table.add_column(column)
    for row in rows:
        table.add_row(row["scheduling"], row["backend"], f"{statistics.median(row['alone']):.2f}",
                      f"{statistics.median(row['beside']):.2f}", f"{row['factor']:.2f}", f"{row['abandon_seconds']:.2f}")
    Console(width=160).print(table)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"argv": sys.argv[1:], "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
