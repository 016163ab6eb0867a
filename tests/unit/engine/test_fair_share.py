"""The lockstep scheduler's fair share: least attained service with a capped head start.

Decodes here are plain generators of request rounds on a scripted backend that answers every
request with ``max_tokens`` tokens, so each decode's attained service after each call is known by
hand and the calls' contents can be checked one by one.
"""

from __future__ import annotations

import threading

import pytest
from scripted import ScriptedBackend, continuation

from mfs_core.engine.lockstep import LockstepScheduler
from mfs_core.types import GenerationRequest
from tests.request_rounds import rounds


def gated_backend() -> tuple[ScriptedBackend, list[list[str]], threading.Event]:
    """A backend answering ``max_tokens`` tokens per request, recording each call's prompts; its first
    call waits for the returned event (so a test can submit a decode while a call is in flight)."""
    calls: list[list[str]] = []
    gate = threading.Event()
    in_flight = threading.Event()

    def answer(request: GenerationRequest):
        return [continuation("x", num_tokens=request.max_tokens)] * request.n

    backend = ScriptedBackend(answer)
    original = backend.generate

    def generate(requests):
        calls.append([r.prompt for r in requests])
        if len(calls) == 1:
            in_flight.set()
            gate.wait(10)
        return original(requests)

    backend.generate = generate
    backend.in_flight = in_flight
    return backend, calls, gate


def newcomer_beside(first: list, newcomer, fair_share_tokens: int, group: str | None = None) -> list[list[str]]:
    """Submit the ``first`` decodes (as one ``share_group`` when ``group``), then ``newcomer`` while their first
    call is in flight; run all to the end and return each call's prompts."""
    from mfs_core.engine import share_group

    backend, calls, gate = gated_backend()
    scheduler = LockstepScheduler(backend, fair_share_tokens=fair_share_tokens)
    if group is not None:
        with share_group(group):
            futures = scheduler.submit(first)
    else:
        futures = scheduler.submit(first)
    assert backend.in_flight.wait(10)
    futures += scheduler.submit([newcomer])
    gate.set()
    [f.result(10) for f in futures]
    scheduler.close()
    return calls


def test_off_by_default_every_live_decode_is_in_every_call() -> None:
    calls = newcomer_beside([rounds("big", 4, 1000, requests=8)], rounds("small", 3, 100), fair_share_tokens=0)
    # the small decode rides along with the big one in each of its calls
    assert [sorted(set(c)) for c in calls] == [["big"], ["big", "small"], ["big", "small"], ["big", "small"]]


def test_a_small_decode_beside_a_large_one_is_served_alone_then_shares() -> None:
    calls = newcomer_beside([rounds("big", 4, 1000, requests=8)], rounds("small", 40, 100), fair_share_tokens=1000)
    # big has 8,000 tokens after call 1; small enters at 8,000 - 2*1,000 = 6,000 and is served alone
    # while big (8,000) > least + F; small reaches 7,000 after 10 calls of 100 tokens, then both are served
    # (call 12), big jumps to 16,000 and small runs alone again; the replay below checks every call
    assert calls[0] == ["big"] * 8
    assert [set(c) for c in calls[1:11]] == [{"small"}] * 10
    assert set(calls[11]) == {"big", "small"}
    service = {"big": 8000, "small": 6000}
    for call in calls[1:]:  # replay: each call serves exactly the decodes within F of the least served
        live = {name for name in service if service[name] is not None}
        least = min(service[name] for name in live)
        assert set(call) == {name for name in live if service[name] <= least + 1000}
        for name in set(call):
            service[name] += sum(1000 if name == "big" else 100 for p in call if p == name)
        if service["big"] == 32000:
            service["big"] = None
        if service["small"] == 10000:
            service["small"] = None


def test_decodes_that_start_together_are_batched_whatever_f() -> None:
    backend, calls, gate = gated_backend()
    gate.set()
    scheduler = LockstepScheduler(backend, fair_share_tokens=500)
    futures = scheduler.submit([rounds(f"q{i}", 3, 200) for i in range(4)])
    assert [f.result(10).answer for f in futures] == ["q0", "q1", "q2", "q3"]
    assert [sorted(c) for c in calls] == [["q0", "q1", "q2", "q3"]] * 3
    scheduler.close()


def test_fair_share_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match=r"fair_share_tokens must be >= 0 .* got -1"):
        LockstepScheduler(ScriptedBackend(lambda r: []), fair_share_tokens=-1)


def test_a_share_group_is_one_party_however_many_decodes() -> None:
    """Eight decodes of one request (``share_group``) count as one party: after their first call (8 x 1,000
    tokens) a newcomer enters at 8,000 - 2 x 1,000 and is served alone for F = 1,000 tokens. Ungrouped, each
    of the eight has 1,000 tokens, the newcomer enters at 0 and is served with them from its first call."""
    for grouped in (True, False):
        calls = newcomer_beside([rounds(f"big{i}", 3, 1000) for i in range(8)], rounds("small", 12, 100),
                                fair_share_tokens=1000, group="request-1" if grouped else None)
        assert len(calls[0]) == 8
        if grouped:  # small from 6,000 alone until 7,000 (10 calls), then with the request: both at 7,000-8,000
            assert [c for c in calls[1:11]] == [["small"]] * 10
            assert sorted(calls[11]) == sorted([f"big{i}" for i in range(8)] + ["small"])
        else:
            assert sorted(calls[1]) == sorted([f"big{i}" for i in range(8)] + ["small"])
