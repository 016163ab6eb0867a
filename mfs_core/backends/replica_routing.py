"""Which ``vllm serve`` replica each POST of the HTTP backend goes to.

A decode's requests share long prefixes: every candidate and rollout of a step starts with the
question and the path so far, and a replica's prefix cache prefills that prefix once. Spread
over the replicas by work alone (``"spread"``, :func:`assign_replicas`),
the same prefix lands on every replica and each prefills it. ``"affinity"`` routes each POST to
the replica that already holds the longest prefix of its prompt, as cache-aware routers do
(SGLang's router, llm-d's precise prefix-cache scorer, Ray Serve's ``PrefixCacheAffinityRouter``),
and spills to the least-loaded replica when that one would carry more than ``balance`` times
its share of the work in flight.

The prefix a replica holds is estimated here, not asked of the server: the prompts routed to
it, as chained hashes of ``block_chars``-character blocks (a stand-in for vLLM's token blocks:
a prompt shares ``k`` blocks with a replica when its first ``k · block_chars`` characters
equal a prompt sent there before), the ``memory_blocks`` most recently used kept per replica.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Literal

from mfs_core.types import GenerationRequest

__all__ = ["ReplicaRouting", "ReplicaRouter", "assign_replicas", "prefix_blocks"]

ReplicaRouting = Literal["affinity", "spread"]


def prefix_blocks(prompt: str, block_chars: int) -> list[int]:
    """Chained hashes of ``prompt``'s whole ``block_chars``-character blocks: hash ``i`` stands
    for the first ``(i + 1) · block_chars`` characters (a trailing partial block is left out,
    as vLLM caches only full blocks).

    Raises:
        ValueError: ``block_chars`` < 1.
    """
    if block_chars < 1:
        msg = f"block_chars must be >= 1, got {block_chars}"
        raise ValueError(msg)
    hashes, previous = [], 0
    for start in range(0, len(prompt) - block_chars + 1, block_chars):
        previous = hash((previous, prompt[start:start + block_chars]))
        hashes.append(previous)
    return hashes


class ReplicaRouter:
    """Assigns the POSTs of the HTTP backend to replicas; thread-safe, one per backend.

    Args:
        replicas: number of replicas (``len(base_urls)``), >= 1.
        policy: ``"affinity"`` (longest cached prefix within the load bound, see the module
            docstring) or ``"spread"`` (by work alone, each call on its own: the backend's
            behaviour before affinity, :func:`assign_replicas`).
        block_chars: characters per prefix block (64: about 16 tokens of English, vLLM's block).
        balance: most work in flight a replica may carry under affinity, as a multiple of the
            mean over replicas (counting the POST being placed), >= 1.
        memory_blocks: prefix blocks remembered per replica (least recently used dropped).

    Work is ``n · max_tokens`` output tokens per POST, held from :meth:`assign` until
    :meth:`release`.

    Raises:
        ValueError: a value out of the ranges above (one line naming it).
    """

    def __init__(self, replicas: int, policy: ReplicaRouting = "affinity", *, block_chars: int = 64,
                 balance: float = 1.5, memory_blocks: int = 65_536) -> None:
        if replicas < 1 or policy not in ("affinity", "spread") or block_chars < 1 or balance < 1 or memory_blocks < 1:
            msg = (f"need replicas >= 1, policy 'affinity' or 'spread', block_chars >= 1, balance >= 1, "
                   f"memory_blocks >= 1; got replicas={replicas}, policy={policy!r}, block_chars={block_chars}, "
                   f"balance={balance}, memory_blocks={memory_blocks}")
            raise ValueError(msg)
        self.replicas, self.policy = replicas, policy
        self.block_chars, self.balance, self.memory_blocks = block_chars, balance, memory_blocks
        self._in_flight = [0] * replicas
        self._cached: list[OrderedDict[int, None]] = [OrderedDict() for _ in range(replicas)]
        self._lock = threading.Lock()
        self.routed = [0] * replicas  # POSTs sent to each replica
        self.spilled = 0  # POSTs that went past their best prefix's replica for the load bound

    @property
    def in_flight(self) -> list[int]:
        """Work (output tokens) in flight per replica, as assigned and not yet released."""
        with self._lock:
            return list(self._in_flight)

    def assign(self, requests: Sequence[GenerationRequest]) -> list[int]:
        """The replica index of each request, in order; their work counts as in flight until
        :meth:`release`."""
        with self._lock:
            spread = assign_replicas(requests, self.replicas) if self.policy == "spread" else None
            assigned = []
            for i, request in enumerate(requests):
                replica = spread[i] if spread is not None else self._place(request)
                self._in_flight[replica] += _work(request)  # counted before the next request is placed
                self.routed[replica] += 1
                assigned.append(replica)
            return assigned

    def release(self, requests: Sequence[GenerationRequest], replicas: Sequence[int]) -> None:
        """The POSTs of ``requests`` (sent to ``replicas``, as :meth:`assign` returned) have ended."""
        with self._lock:
            for request, replica in zip(requests, replicas):
                self._in_flight[replica] = max(0, self._in_flight[replica] - _work(request))

    def _place(self, request: GenerationRequest) -> int:
        """Affinity for one request (the lock held): the replica with the longest cached
        prefix whose load stays within the bound, else the least loaded; then its blocks are
        remembered there. This request's own work counts toward the mean of the bound."""
        blocks = prefix_blocks(request.prompt, self.block_chars)
        work = _work(request)
        load = self._in_flight
        least = min(range(self.replicas), key=lambda r: (load[r], r))
        bound = self.balance * (sum(load) + work) / self.replicas
        matched = [self._matched(r, blocks) for r in range(self.replicas)]
        best = max(range(self.replicas), key=lambda r: (matched[r], -load[r], -r))
        if matched[best] == 0:
            chosen = least
        elif load[best] + work <= max(bound, work):
            chosen = best
        else:
            chosen = least
            self.spilled += chosen != best
        self._remember(chosen, blocks)
        return chosen

    def _matched(self, replica: int, blocks: list[int]) -> int:
        cached = self._cached[replica]
        count = 0
        for block in blocks:
            if block not in cached:
                break
            count += 1
        return count

    def _remember(self, replica: int, blocks: list[int]) -> None:
        cached = self._cached[replica]
        for block in blocks:
            cached[block] = None
            cached.move_to_end(block)
        while len(cached) > self.memory_blocks:
            cached.popitem(last=False)


def _work(request: GenerationRequest) -> int:
    return request.n * request.max_tokens


def assign_replicas(requests: Sequence[GenerationRequest], replicas: int) -> list[int]:
    """Spread the requests of one call over ``replicas`` servers by expected work (policy ``"spread"``).

    Greedy: each request, in order, goes to the replica with the least ``n · max_tokens``
    assigned so far in this call (ties: the lowest index); other calls' work is not counted.
    Deterministic, and a call changes nothing.

    Returns:
        The replica index of each request.
    """
    load = [0] * replicas
    assigned = []
    for request in requests:
        replica = min(range(replicas), key=lambda r: (load[r], r))
        load[replica] += _work(request)
        assigned.append(replica)
    return assigned
