"""Prefix affinity against today's spread, over two ``vllm serve`` replicas.

The demo model served by two ``vllm serve`` replicas (CPU build, float32, 1 GiB KV cache each),
MFS at M = N = 4, seed 0, on held-out demo questions, decoded through the HTTP backend once per
``replica_routing`` (``spread``: by work, each round on its own; ``affinity``: the replica that
holds the longest prefix, within 1.5x the mean load). Each arm gets two fresh
replicas, so no arm starts with another's cache. Per arm: the prompt tokens the replicas looked up
in their prefix caches and how many of them they had to prefill (vLLM's own counters
``vllm:prefix_cache_queries`` and ``vllm:prefix_cache_hits`` from each replica's ``/metrics``),
the POSTs each replica got, wall seconds, and the answers (equal to the spread arm's?).

``--arms`` adds ``single``: one replica alone, the floor no routing over two can go below (every
prefix cached once). ``--shared-prefix-tokens K`` gives every prompt a system prompt of about K
tokens (other held-out demo questions 400 on, one per line: a few-shot-like prefix the
demo model's questions all share), to see the gain grow with the shared prefix.

Usage::

    python experiments/benchmarks/replica_affinity.py --questions 40 --out bench-results/replica_affinity.json
    python experiments/benchmarks/replica_affinity.py --questions 40 --arms single,spread,affinity --shared-prefix-tokens 600
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from benchmarks.backends import PREFIX_HITS, PREFIX_QUERIES, free_port, server_counters
from mfs_core import MFSEngine, MFSSettings
from mfs_core.backends.openai import OpenAIBackend
from mfs_core.backends.vllm import quiet_vllm
from mfs_core.bench.datasets import load_dataset
from mfs_core.vllm_server import VLLMServer


@dataclass
class Arm:
    """One routing policy and scheduler, on two fresh replicas."""

    routing: str
    scheduling: str
    wall_seconds: float
    queried_tokens: list[float]  # per replica: prompt tokens looked up in the prefix cache
    hit_tokens: list[float]  # per replica: of those, found cached
    posts: list[int]  # per replica: POSTs the router sent there
    spilled: int
    answers: list[str | None]
    output_tokens: int

    @property
    def prefilled_tokens(self) -> float:
        """Prompt tokens computed (looked up and not found) over both replicas."""
        return sum(self.queried_tokens) - sum(self.hit_tokens)


def run_arm(routing: str, scheduling: str, questions: list[str], search: dict, kv_cache_gib: float,
            console: Console) -> Arm:
    """Decode ``questions`` over fresh replicas (two; ``routing="single"``: one) and read their counters."""
    serve = MFSSettings(backend="vllm", kv_cache_gib=kv_cache_gib, vllm_kwargs={"disable_log_stats": False}, **search)
    servers = [VLLMServer(serve, port=free_port(), log_path=Path(f"/tmp/mfs-affinity-{routing}-{i}.log"),
                          startup_timeout=1200.0)  # a loaded machine compiles slowly
               for i in range(1 if routing == "single" else 2)]
    for server in servers:
        server.launch()
    try:
        for server in servers:
            server.wait_ready()
        before = [server_counters(server) for server in servers]
        http = MFSSettings(backend="openai", base_urls=[server.url for server in servers], scheduling=scheduling,
                           replica_routing="spread" if routing == "single" else routing, **search)
        with OpenAIBackend.from_settings(http) as backend:
            began = time.perf_counter()
            results = MFSEngine(backend, http).decode(questions, method="mfs")
            wall = time.perf_counter() - began
            posts, spilled = list(backend.router.routed), backend.router.spilled
        after = [server_counters(server) for server in servers]
    finally:
        for server in servers:
            server.stop()
    queried = [a[PREFIX_QUERIES] - b[PREFIX_QUERIES] for a, b in zip(after, before)]
    hits = [a[PREFIX_HITS] - b[PREFIX_HITS] for a, b in zip(after, before)]
    arm = Arm(routing, scheduling, wall, queried, hits, posts, spilled, [r.answer for r in results],
              sum(r.output_tokens for r in results))
    console.print(f"{routing}/{scheduling}: {wall:.1f} s, prefilled {arm.prefilled_tokens:.0f} of "
                  f"{sum(queried):.0f} prompt tokens, POSTs {posts}", style="dim")
    return arm


def shared_prefix(tokens: int) -> str:
    """A system prompt of about ``tokens`` demo-model tokens: held-out demo questions from 400 on, one per line."""
    from transformers import AutoTokenizer

    from mfs_core.models import demo_model_path

    tokenizer, lines = AutoTokenizer.from_pretrained(demo_model_path()), ["Questions like the one below:"]
    for example in load_dataset("demo", offset=400, limit=100).examples:
        if len(tokenizer("\n".join(lines))["input_ids"]) >= tokens:
            break
        lines.append(example.question)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=40, help="held-out demo questions, from --offset on")
    parser.add_argument("--offset", type=int, default=0)
    parser.add_argument("--kv-cache-gib", type=float, default=1.0, help="KV cache of each replica (GiB)")
    parser.add_argument("--schedulers", default="lockstep",
                        help="the HTTP backend runs lockstep only (continuous needs backend='vllm')")
    parser.add_argument("--arms", default="spread,affinity", help="routings to run: spread, affinity, single")
    parser.add_argument("--shared-prefix-tokens", type=int, default=0,
                        help="a system prompt of about this many tokens in every prompt (0: none)")
    parser.add_argument("--out", type=Path, default=None, help="write the arms as JSON here")
    args = parser.parse_args(argv)
    quiet_vllm()
    console = Console(stderr=True)
    questions = [e.question for e in load_dataset("demo", limit=args.questions, offset=args.offset).examples]
    search = {"step_beam_size": 4, "num_rollouts": 4, "seed": 0, "dtype": "float32"}
    if args.shared_prefix_tokens:
        search["system_prompt"] = shared_prefix(args.shared_prefix_tokens)
    routings = args.arms.split(",")
    if "spread" not in routings:
        parser.error("--arms must include spread (the other arms are compared with it)")
    arms = [run_arm(routing, scheduling, questions, search, args.kv_cache_gib, console)
            for scheduling in args.schedulers.split(",") for routing in routings]

    table = Table(title=f"vllm serve replicas, {len(questions)} held-out demo questions, MFS M = N = 4, float32, "
                        f"shared system prompt of ~{args.shared_prefix_tokens} tokens")
    for column in ("routing", "scheduler", "prompt tokens looked up", "prefilled", "prefilled ÷ spread's",
                   "hit rate", "POSTs per replica", "spilled", "wall s", "answers = spread's"):
        table.add_column(column)
    for arm in arms:
        spread = next(a for a in arms if a.scheduling == arm.scheduling and a.routing == "spread")
        queried = sum(arm.queried_tokens)
        table.add_row(
            arm.routing, arm.scheduling, f"{queried:,.0f}", f"{arm.prefilled_tokens:,.0f}",
            f"{arm.prefilled_tokens / spread.prefilled_tokens:.2f}" if spread.prefilled_tokens else "—",
            f"{sum(arm.hit_tokens) / queried:.1%}" if queried else "—", " / ".join(map(str, arm.posts)),
            str(arm.spilled), f"{arm.wall_seconds:.1f}",
            f"{sum(a == b for a, b in zip(arm.answers, spread.answers))}/{len(questions)}",
        )
    Console(width=200).print(table)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"argv": sys.argv[1:], "arms": [
            {**asdict(arm), "prefilled_tokens": arm.prefilled_tokens} for arm in arms]}, indent=1))


if __name__ == "__main__":
    main()
