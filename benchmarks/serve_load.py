"""Load on ``mfs serve``: Poisson arrivals at several rates, streamed chat requests, on loopback.

For each rate the generator sends held-out demo questions as streamed ``/v1/chat/completions``
requests whose start times are a Poisson process (exponential gaps, seeded), for
``--duration`` seconds, then waits for the last answer. Per rate it reports the completed
questions per second, output tokens per second (``usage.completion_tokens``: every token the
searches sampled), latency percentiles (request sent to ``[DONE]``), the time to the first
reasoning chunk, and the 429s of a full queue (nothing else is dropped: each request either
completes or is refused at once).

It measures the design the server runs: the lockstep engine (one batched ``generate`` per
round for every live decode). The issue's other design (each decode's requests flowing on
their own into vLLM's ``AsyncLLM``) is not implemented, so not measured here.

Status: not yet measured. Its one smoke run (rates 0.1 and 0.2/s, 20 s, M = 1, N = 2), on a
2-core machine shared with a vLLM benchmark, was stopped after 15 minutes with 1 of its 4
admitted requests answered; it has produced no table.

Usage (from a checkout; starts ``mfs serve`` on a free loopback port unless ``--url`` is given)::

    nice -n 10 python -m benchmarks.serve_load --rates 0.25,0.5,1 --duration 60
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

QUESTIONS = Path(__file__).resolve().parents[1] / "mfs_core" / "demo" / "heldout.json"


@dataclass
class Outcome:
    """One request: its HTTP status, seconds to the first reasoning chunk and to ``[DONE]``, tokens."""

    status: int
    first_reasoning: float | None = None
    latency: float | None = None
    tokens: int = 0


async def _one(http, url: str, question: str, seed: int, key: str | None, start: float) -> Outcome:
    body = {"messages": [{"role": "user", "content": question}], "stream": True, "seed": seed}
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    sent = time.perf_counter()
    async with http.stream("POST", url + "/v1/chat/completions", json=body, headers=headers) as response:
        if response.status_code != 200:
            await response.aread()
            return Outcome(response.status_code)
        outcome = Outcome(200)
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                outcome.latency = time.perf_counter() - sent
                break
            chunk = json.loads(data)
            if outcome.first_reasoning is None and any(c.get("delta", {}).get("reasoning") for c in chunk["choices"]):
                outcome.first_reasoning = time.perf_counter() - sent
            if chunk.get("usage"):
                outcome.tokens = chunk["usage"]["completion_tokens"]
        return outcome


async def run_rate(url: str, rate: float, duration: float, questions: list[str], seed: int,
                   key: str | None) -> tuple[list[Outcome], float]:
    """Send Poisson(``rate``/s) requests for ``duration`` s; the outcomes and the wall seconds to the last answer."""
    import httpx

    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / rate, size=int(rate * duration * 3) + 10)
    arrivals = np.cumsum(gaps)
    arrivals = arrivals[arrivals < duration]
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=100)
    async with httpx.AsyncClient(timeout=httpx.Timeout(1800.0), limits=limits) as http:
        start = time.perf_counter()
        tasks = []
        for i, at in enumerate(arrivals):
            await asyncio.sleep(max(0.0, start + at - time.perf_counter()))
            tasks.append(asyncio.create_task(_one(http, url, questions[i % len(questions)], i, key, start)))
        outcomes = await asyncio.gather(*tasks)
    return list(outcomes), time.perf_counter() - start


def summarise(rate: float, outcomes: list[Outcome], wall: float) -> dict[str, float]:
    """The row of the table for one rate."""
    done = [o for o in outcomes if o.status == 200 and o.latency is not None]
    latencies = np.array([o.latency for o in done]) if done else np.array([np.nan])
    firsts = np.array([o.first_reasoning for o in done if o.first_reasoning is not None] or [np.nan])
    return {
        "rate": rate, "sent": len(outcomes), "completed": len(done), "rejected_429": sum(o.status == 429 for o in outcomes),
        "other_errors": sum(o.status not in (200, 429) for o in outcomes),
        "completed_per_s": len(done) / wall, "output_tokens_per_s": sum(o.tokens for o in done) / wall,
        "p50_s": float(np.percentile(latencies, 50)), "p95_s": float(np.percentile(latencies, 95)),
        "p99_s": float(np.percentile(latencies, 99)), "ttfr_p50_s": float(np.percentile(firsts, 50)),
        "ttfr_p95_s": float(np.percentile(firsts, 95)), "wall_s": wall,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the load at each rate and print the table (and ``--out`` JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="0.25,0.5,1", help="arrival rates, requests per second")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of arrivals per rate")
    parser.add_argument("--url", help="an mfs serve already running (default: start one)")
    parser.add_argument("--key", help="its server key")
    parser.add_argument("--serve-args", default="--step-beam-size 4 --num-rollouts 4",
                        help="flags of the mfs serve this script starts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="write the rows as JSON here")
    args = parser.parse_args(argv)
    questions = [item["input"] for item in json.loads(QUESTIONS.read_text())]
    rates = [float(r) for r in args.rates.split(",")]

    def measure(url: str) -> list[dict[str, float]]:
        rows = []
        for rate in rates:
            outcomes, wall = asyncio.run(run_rate(url, rate, args.duration, questions, args.seed, args.key))
            rows.append(summarise(rate, outcomes, wall))
            print(json.dumps(rows[-1]), flush=True)
        return rows

    if args.url:
        rows = measure(args.url.rstrip("/"))
    else:
        from tests.serve_process import serve_process

        with serve_process(args.serve_args.split(), {"MFS_SERVER_QUEUE_SIZE": "256"}) as server:
            rows = measure(server.url)
    header = ("rate/s", "sent", "done", "429", "done/s", "out tok/s", "p50 s", "p95 s", "p99 s", "TTFR p50 s", "TTFR p95 s")
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for r in rows:
        print(f"| {r['rate']:g} | {r['sent']} | {r['completed']} | {r['rejected_429']} | {r['completed_per_s']:.2f} | "
              f"{r['output_tokens_per_s']:.0f} | {r['p50_s']:.1f} | {r['p95_s']:.1f} | {r['p99_s']:.1f} | "
              f"{r['ttfr_p50_s']:.2f} | {r['ttfr_p95_s']:.2f} |")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
