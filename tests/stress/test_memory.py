"""Memory: 1,000 sequential and 1,000 concurrent decodes leave resident memory flat.

The scripted synthetic model keeps this cheap (milliseconds a decode) while exercising the
whole engine: scheduler, futures, decoders, traces; concurrent decodes go in waves of 250
in flight at once. RSS at 250, 500 and 1,000 decodes
stays within 5% of RSS after a warm-up, and the scheduler holds nothing between calls.
"""

from __future__ import annotations

import pytest

from mfs_core import MFSEngine
from tests.stress.faults import QUESTIONS, SETTINGS, FaultyBackend
from tests.stress.memory import decode_many

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("concurrent", [False, True], ids=["sequential", "concurrent"])
def test_1000_decodes_keep_memory_flat_and_queues_empty(concurrent):
    engine = MFSEngine(FaultyBackend(record=False), SETTINGS)
    decode_many(engine, QUESTIONS, 250, concurrent=concurrent, checkpoints=[250], timeout=60)  # warm-up: one wave
    marks = decode_many(engine, QUESTIONS, 1000, concurrent=concurrent, checkpoints=[0, 250, 500, 1000], timeout=60)
    base = marks[0].rss_mib
    for mark in marks:
        assert mark.queued == 0, mark
        assert abs(mark.rss_mib - base) <= 0.05 * base, (mark, base)
    assert engine.stats.decodes == 1250
