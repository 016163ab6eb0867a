"""Reliability on the demo model, as one table: load and memory.

- **load**: 64 concurrent callers (16 threads calling the engine, 16 threads calling
  LangChain ``MFSLLM.invoke``, 16 asyncio tasks calling ``ChatMFS.ainvoke``, 16 calling
  LlamaIndex ``MFSLLM.acomplete``) on one engine: answered calls, answers equal to the
  serial decode, backend calls concurrent vs serial, wall times.
- **memory**: resident memory (MiB) after 0, 250, 500 and 1,000 decodes, sequential and
  concurrent (waves of ``--wave`` decodes in flight), after a warm-up of one wave; the
  scheduler's queue length at each mark.

The fault and bad-input cases are tests (``python -m pytest tests/stress -q``); this script
measures what a test should not time.

Usage::

    python experiments/benchmarks/reliability.py                  # the whole table (~10 min on 2 cores)
    python experiments/benchmarks/reliability.py --decodes 200    # a quicker memory run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from mfs_core import MFSEngine, MFSSettings  # noqa: E402
from tests.stress.memory import decode_many  # noqa: E402

SEARCH = {"step_beam_size": 2, "num_rollouts": 2, "max_steps": 3, "max_answer_tokens": 48, "max_step_tokens": 24, "seed": 7}


def _questions(count: int) -> list[str]:
    items = json.loads((ROOT / "mfs_core" / "demo" / "heldout.json").read_text())
    return [item["input"] for item in items[:count]]


def measure_load(engine: MFSEngine, questions: list[str]) -> dict[str, float]:
    """64 mixed callers against the serial decode of the same questions (see module doc)."""
    from langchain_mfs import ChatMFS
    from langchain_mfs import MFSLLM as LangChainMFSLLM
    from llamaindex_mfs import MFSLLM as LlamaIndexMFSLLM

    start_calls, start = engine.stats.generate_calls, time.perf_counter()
    serial = [engine.decode([q])[0].text for q in questions]
    serial_calls, serial_seconds = engine.stats.generate_calls - start_calls, time.perf_counter() - start

    lc_llm, lc_chat, li_llm = LangChainMFSLLM(engine=engine), ChatMFS(engine=engine), LlamaIndexMFSLLM(engine=engine)
    answers: dict[int, str] = {}
    errors: list[BaseException] = []

    def thread_call(i: int) -> None:
        try:
            answers[i] = engine.decode([questions[i]])[0].text if i < 16 else lc_llm.invoke(questions[i])
        except BaseException as exc:  # noqa: BLE001 - counted in the table
            errors.append(exc)

    async def async_calls() -> None:
        async def call(i: int) -> None:
            if i < 48:
                answers[i] = (await lc_chat.ainvoke(questions[i])).text
            else:
                answers[i] = (await li_llm.acomplete(questions[i])).text

        results = await asyncio.gather(*(call(i) for i in range(32, 64)), return_exceptions=True)
        errors.extend(r for r in results if isinstance(r, BaseException))

    start_calls, start = engine.stats.generate_calls, time.perf_counter()
    threads = [threading.Thread(target=thread_call, args=(i,)) for i in range(32)]
    for thread in threads:
        thread.start()
    asyncio.run(async_calls())
    for thread in threads:
        thread.join()
    return {
        "callers": 64,
        "answered": len(answers),
        "errors": len(errors),
        "equal to serial": sum(answers.get(i) == serial[i] for i in range(64)),
        "backend calls concurrent": engine.stats.generate_calls - start_calls,
        "backend calls serial": serial_calls,
        "wall s concurrent": time.perf_counter() - start,
        "wall s serial": serial_seconds,
    }


def main() -> None:
    """Run both measurements and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--decodes", type=int, default=1000, help="decodes per memory run (default 1000)")
    parser.add_argument("--wave", type=int, default=250, help="concurrent decodes in flight at once (default 250)")
    args = parser.parse_args()

    engine = MFSEngine.from_settings(MFSSettings(device="cpu", **SEARCH))
    questions = _questions(64)
    load = measure_load(engine, questions)
    print("## Load: 64 mixed concurrent callers, one engine, demo model (M = N = 2, 3 steps)\n")
    print("| " + " | ".join(load) + " |")
    print("|" + " --- |" * len(load))
    print("| " + " | ".join(f"{v:.1f}" if isinstance(v, float) else str(v) for v in load.values()) + " |\n")

    marks = [0, args.decodes // 4, args.decodes // 2, args.decodes]
    print(f"## Memory: resident MiB after N decodes (warm-up: one wave of {args.wave})\n")
    print("| run | " + " | ".join(f"N = {m}" for m in marks) + " | max drift | queued at the end |")
    print("|" + " --- |" * (len(marks) + 3))
    for concurrent in (False, True):
        decode_many(engine, questions, args.wave, concurrent=concurrent, checkpoints=[args.wave], timeout=3600, wave=args.wave)
        points = decode_many(engine, questions, args.decodes, concurrent=concurrent, checkpoints=marks, timeout=3600, wave=args.wave)
        base = points[0].rss_mib
        drift = max(abs(p.rss_mib - base) / base for p in points)
        label = f"concurrent (waves of {args.wave})" if concurrent else "sequential"
        cells = " | ".join(f"{p.rss_mib:.1f}" for p in points)
        print(f"| {label} | {cells} | {drift:.1%} | {points[-1].queued} |")


if __name__ == "__main__":
    main()
