"""Replica routing of the HTTP backend: prefix blocks, affinity, the load bound, spread.

Hand-computed placements; the two-replica prefill measurement is ``experiments/benchmarks/replica_affinity.py``.
"""

from __future__ import annotations

import pytest

from mfs_core.backends.openai import OpenAIBackend
from mfs_core.backends.replica_routing import ReplicaRouter, assign_replicas, prefix_blocks
from mfs_core.settings import MFSSettings
from mfs_core.types import GenerationRequest

QUESTION_A = "Q: Tom has 3 apples and buys 4 more. How many?\n"  # 49 characters
QUESTION_B = "Q: A train runs 60 km/h for 2 hours. How far?\n"


def request(prompt: str, n: int = 1, max_tokens: int = 100) -> GenerationRequest:
    return GenerationRequest(prompt=prompt, n=n, max_tokens=max_tokens)


def test_prefix_blocks_are_chained_over_whole_blocks() -> None:
    assert len(prefix_blocks("abcdefgh", 3)) == 2  # "abc", "def"; "gh" is a partial block
    assert prefix_blocks("abcdefgh", 3) == prefix_blocks("abcdefXY", 3)  # the same two whole blocks
    assert prefix_blocks("abcdefgh", 3)[:1] == prefix_blocks("abcXYZgh", 3)[:1]
    assert prefix_blocks("abcdefgh", 3)[1] != prefix_blocks("abcXYZgh", 3)[1]
    # a different first block changes every later hash: block i stands for the whole prefix
    assert prefix_blocks("Xbcdef", 3)[1] != prefix_blocks("abcdef", 3)[1]
    assert prefix_blocks("ab", 3) == []
    with pytest.raises(ValueError, match="block_chars must be >= 1, got 0"):
        prefix_blocks("abc", 0)


def test_a_decodes_later_requests_follow_its_first_to_one_replica() -> None:
    router = ReplicaRouter(2, block_chars=8)
    first = [request(QUESTION_A), request(QUESTION_B)]
    # nothing cached: least loaded, ties to the lowest index -> A on 0, then B on 1 (0 holds A's 100 tokens)
    assert router.assign(first) == [0, 1]
    router.release(first, [0, 1])
    assert router.in_flight == [0, 0]
    # the next round: each question's candidates and rollouts (its prompt plus a step) go where its prefix is
    later = [request(QUESTION_B + "Step 1: 60 * 2 = 120.\n", n=4), request(QUESTION_A + "Step 1: 3 + 4 = 7.\n", n=4)]
    assert router.assign(later) == [1, 0]
    assert router.in_flight == [400, 400]
    assert router.routed == [2, 2] and router.spilled == 0


def test_past_the_load_bound_a_request_spills_to_the_least_loaded_replica() -> None:
    router = ReplicaRouter(2, block_chars=8)
    router.release([request(QUESTION_A)], router.assign([request(QUESTION_A)]))  # A's prefix now on replica 0
    assert router.in_flight == [0, 0]
    # Four requests of A, 100 tokens each, in one call (bound = 1.5 x mean in flight, counting the new one):
    # 1st: best 0 (loads 0, 0), 0 + 100 <= max(1.5 * 100 / 2, 100) -> 0
    # 2nd: best 0 (100, 0), 100 + 100 > 1.5 * 200 / 2 = 150 -> spills to 1, which now holds A's prefix too
    # 3rd: both match; best = least loaded, ties to 0 (100, 100): 200 <= 1.5 * 300 / 2 = 225 -> 0
    # 4th: both match; best = least loaded 1 (200, 100): 200 <= 1.5 * 400 / 2 = 300 -> 1
    assert router.assign([request(QUESTION_A + f"step {i}\n") for i in range(4)]) == [0, 1, 0, 1]
    assert router.spilled == 1
    assert router.in_flight == [200, 200]


def test_spread_is_the_per_call_work_spread() -> None:
    requests = [request(QUESTION_A, n=n, max_tokens=m) for n, m in [(8, 64), (1, 256), (1, 256), (2, 64), (1, 64)]]
    router = ReplicaRouter(2, "spread", block_chars=8)
    assert router.assign(requests) == assign_replicas(requests, 2) == [0, 1, 1, 0, 1]
    # each call on its own: the work still in flight from the first call is not counted
    assert router.assign(requests) == [0, 1, 1, 0, 1]


def test_the_memory_keeps_the_most_recently_used_blocks() -> None:
    question_c = "Q: Ann reads 12 pages a day for 5 days. How many pages?\n"

    def route_a_after_c_on_its_replica(memory_blocks: int) -> int:
        router = ReplicaRouter(2, block_chars=8, memory_blocks=memory_blocks)
        busy = router.assign([request(QUESTION_B)])  # B on 0, held: the next goes to 1
        router.release([request(QUESTION_A)], router.assign([request(QUESTION_A)]))  # A's 6 blocks on 1
        router.release([request(question_c)], router.assign([request(question_c)]))  # C on 1 too (0 still busy)
        router.release([request(QUESTION_B)], busy)
        return router.assign([request(QUESTION_A)])[0]

    assert route_a_after_c_on_its_replica(65_536) == 1  # A's prefix still remembered on 1
    assert route_a_after_c_on_its_replica(6) == 0  # C's blocks evicted A's: no match, least loaded (ties: 0)


def test_bad_router_arguments_name_the_value() -> None:
    with pytest.raises(ValueError, match="policy='nearest'"):
        ReplicaRouter(2, "nearest")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="balance=0.5"):
        ReplicaRouter(2, balance=0.5)


def test_the_backend_routes_by_the_setting_and_frees_the_work_of_a_failed_call(monkeypatch) -> None:
    urls = ["http://replica-a:8000/v1", "http://replica-b:8000/v1"]  # never reached: nothing is sent here
    settings = MFSSettings(backend="openai", base_urls=urls)
    assert settings.replica_routing == "affinity"
    backend = OpenAIBackend(urls, "m", context_window=4096, replica_routing=settings.replica_routing)
    prompt_a, prompt_b = QUESTION_A * 3, QUESTION_B * 3  # > 128 characters: two whole 64-character blocks
    jobs = backend._prepare([request(prompt_a), request(prompt_b)])
    assert [job[3] for job in jobs] == [0, 1]
    assert backend.router.in_flight == [100, 100]  # held until the call ends
    backend.router.release([job[1] for job in jobs], [job[3] for job in jobs])
    jobs = backend._prepare([request(prompt_b + "more\n"), request(prompt_a + "more\n")])
    assert [job[3] for job in jobs] == [1, 0]
    backend.router.release([job[1] for job in jobs], [job[3] for job in jobs])

    def refused(*args: object) -> None:
        raise ConnectionRefusedError("nothing listens")

    monkeypatch.setattr(backend, "_send_round", refused)
    with pytest.raises(ConnectionRefusedError):  # a call that fails gives its work back
        backend.generate([request(prompt_a)])
    assert backend.router.in_flight == [0, 0]
    assert OpenAIBackend(urls, "m", context_window=4096, replica_routing="spread").router.policy == "spread"
