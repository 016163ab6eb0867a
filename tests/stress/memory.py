"""Resident memory of an engine over many decodes (used by the stress test and the
reliability benchmark).

RSS comes from ``/proc/self/statm`` (Linux); the engine's own queues are read from the
scheduler (decodes incoming or live) so growth there is seen directly, not only through RSS.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Sequence
from dataclasses import dataclass

from mfs_core import MFSEngine

__all__ = ["MemoryCheckpoint", "decode_many", "rss_mib"]


def rss_mib() -> float:
    """Resident set size of this process in MiB (``/proc/self/statm``, Linux only).

    Raises:
        OSError: no ``/proc`` (not Linux).
    """
    with open("/proc/self/statm") as statm:
        resident_pages = int(statm.read().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE") / 2**20


@dataclass(frozen=True)
class MemoryCheckpoint:
    """RSS after ``decodes`` decodes, and what the engine still held then.

    Attributes:
        decodes: decodes finished so far.
        rss_mib: resident memory, MiB.
        queued: decodes the scheduler still held (incoming plus live); 0 when idle.
    """

    decodes: int
    rss_mib: float
    queued: int


def decode_many(
    engine: MFSEngine,
    questions: Sequence[str],
    total: int,
    *,
    concurrent: bool,
    checkpoints: Sequence[int],
    timeout: float,
    wave: int = 250,
) -> list[MemoryCheckpoint]:
    """Decode ``total`` questions (cycling through ``questions``), sampling RSS on the way.

    Args:
        engine: the engine under test.
        questions: questions to cycle through.
        total: decodes to run.
        concurrent: submit ``wave`` decodes at once (one lockstep batch) and wait for
            them, wave after wave, instead of one decode at a time.
        checkpoints: decode counts at which to record a :class:`MemoryCheckpoint` (0 included).
        timeout: bound on every wait, seconds.
        wave: decodes in flight together when ``concurrent`` (checkpoints should be
            multiples of it, so every checkpoint sees the same peak working set).

    Returns:
        One checkpoint per entry of ``checkpoints``, in order.
    """
    marks = sorted(set(checkpoints))
    done = 0
    out = []
    for mark in marks:
        while done < mark:
            if concurrent:
                size = min(wave, mark - done)
                chunk = [questions[(done + i) % len(questions)] for i in range(size)]
                for future in engine.submit_prompts(chunk):
                    future.result(timeout=timeout)
                done += size
            else:
                engine.decode_prompts([questions[done % len(questions)]], timeout=timeout)
                done += 1
        gc.collect()
        out.append(MemoryCheckpoint(decodes=done, rss_mib=rss_mib(), queued=engine._scheduler.queued))  # noqa: SLF001
    return out
