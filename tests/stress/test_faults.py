"""Faults injected into the engine: each failing decode gets a clear error, every other
decode completes with its serial answer, the engine serves the next request, and every
wait in these tests is bounded (a hang fails the test instead of hanging CI)."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from concurrent.futures import CancelledError

import pytest

from mfs_core import MFSEngine
from mfs_core.errors import BackendOutputError, GenerateTimeoutError
from tests.stress.faults import QUESTIONS, SETTINGS, FaultyBackend, WorkerKilled, comparable, serial_results, with_logprob

pytestmark = pytest.mark.slow

WAIT = 30.0  # seconds: the bound on every wait; the scripted rounds take milliseconds


@pytest.fixture(scope="module")
def serial():
    return dict(zip(QUESTIONS, serial_results(QUESTIONS)))


def _others_match_serial(futures, questions, serial, skip):
    for future, question in zip(futures, questions):
        if question != skip:
            assert comparable(future.result(timeout=WAIT)) == serial[question], question


def _engine_still_serves(engine, serial):
    assert comparable(engine.decode([QUESTIONS[0]], timeout=WAIT)[0]) == serial[QUESTIONS[0]]


def test_a_generate_call_that_raises_once_is_absorbed(serial):
    def fault(index, requests, outputs):
        if index == 2:
            raise RuntimeError("injected fault on call 2")
        return outputs

    engine = MFSEngine(FaultyBackend(fault), SETTINGS)
    results = engine.decode(QUESTIONS, timeout=WAIT)
    assert [comparable(r) for r in results] == [serial[q] for q in QUESTIONS]


def test_a_request_the_backend_always_refuses_fails_its_decode_alone(serial):
    poison = QUESTIONS[3]

    def fault(index, requests, outputs):
        if any(r.prompt.startswith(poison) for r in requests):
            raise RuntimeError(f"injected: cannot serve {poison!r}")
        return outputs

    engine = MFSEngine(FaultyBackend(fault), SETTINGS)
    futures = engine.submit_prompts(QUESTIONS)
    with pytest.raises(RuntimeError, match="injected: cannot serve 'question 3"):
        futures[3].result(timeout=WAIT)
    _others_match_serial(futures, QUESTIONS, serial, poison)
    _engine_still_serves(engine, serial)


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        ("too_few_continuations", r"returned 5 continuations for request 0 with n=6"),
        ("nan_logprob", r"logprob_sum=nan for request 0 \(a log-probability must be finite"),
        ("minus_inf_logprob", r"logprob_sum=-inf for request 0"),
        ("plus_inf_logprob", r"logprob_sum=inf for request 0"),
    ],
)
def test_malformed_output_for_one_decode_fails_it_alone_with_a_clear_error(serial, breakage, message):
    target = QUESTIONS[5]

    def fault(index, requests, outputs):
        fixed = []
        for request, conts in zip(requests, outputs):
            if request.prompt.startswith(target):
                if breakage == "too_few_continuations":
                    conts = conts[:-1]
                else:
                    value = {"nan_logprob": math.nan, "minus_inf_logprob": -math.inf, "plus_inf_logprob": math.inf}[breakage]
                    conts = [with_logprob(conts[0], value), *conts[1:]]
            fixed.append(conts)
        return fixed

    engine = MFSEngine(FaultyBackend(fault), SETTINGS)
    futures = engine.submit_prompts(QUESTIONS)
    with pytest.raises(BackendOutputError, match=message):
        futures[5].result(timeout=WAIT)
    _others_match_serial(futures, QUESTIONS, serial, target)
    _engine_still_serves(engine, serial)


def test_a_call_that_drops_a_result_list_once_is_absorbed(serial):
    def fault(index, requests, outputs):
        return outputs[:-1] if index == 1 else outputs

    engine = MFSEngine(FaultyBackend(fault), SETTINGS)
    results = engine.decode(QUESTIONS, timeout=WAIT)
    assert [comparable(r) for r in results] == [serial[q] for q in QUESTIONS]


def test_a_hanging_request_times_out_alone(serial):
    target = QUESTIONS[2]
    release = threading.Event()

    def before(index, requests):
        if any(r.prompt.startswith(target) for r in requests):
            release.wait(timeout=WAIT)

    backend = FaultyBackend(before=before)
    engine = MFSEngine(backend, SETTINGS.model_copy(update={"generate_timeout": 0.5}))
    try:
        futures = engine.submit_prompts(QUESTIONS)
        with pytest.raises(GenerateTimeoutError, match=r"did not return within generate_timeout=0.5 s \(1 requests\)"):
            futures[2].result(timeout=WAIT)
        _others_match_serial(futures, QUESTIONS, serial, target)
        _engine_still_serves(engine, serial)
    finally:
        release.set()


def test_a_decoder_that_raises_fails_alone(serial):
    engine = MFSEngine(FaultyBackend(), SETTINGS)

    def broken_decoder():
        yield []
        msg = "injected decoder bug"
        raise ZeroDivisionError(msg)

    futures = engine.submit_prompts(QUESTIONS)
    broken = engine._scheduler.submit([broken_decoder()])[0]  # noqa: SLF001 - a decoder the registry would not build
    with pytest.raises(ZeroDivisionError, match="injected decoder bug"):
        broken.result(timeout=WAIT)
    _others_match_serial(futures, QUESTIONS, serial, None)
    _engine_still_serves(engine, serial)


def test_an_async_caller_cancelled_mid_round_stops_costing_calls(serial):
    target = QUESTIONS[1]
    in_round = threading.Event()
    resume = threading.Event()

    def before(index, requests):
        if index == 1:  # the second round: the decodes are under way
            in_round.set()
            resume.wait(timeout=WAIT)

    backend = FaultyBackend(before=before)
    engine = MFSEngine(backend, SETTINGS)

    async def main():
        others = asyncio.ensure_future(engine.adecode_prompts([q for q in QUESTIONS if q != target]))
        victim = asyncio.ensure_future(engine.adecode_prompts([target]))
        await asyncio.get_running_loop().run_in_executor(None, in_round.wait, WAIT)
        victim.cancel()
        await asyncio.sleep(0)
        resume.set()
        with pytest.raises(asyncio.CancelledError):
            await victim
        return await asyncio.wait_for(others, WAIT)

    results = asyncio.run(main())
    assert [comparable(r) for r in results] == [serial[q] for q in QUESTIONS if q != target]
    assert not any(p.startswith(target) for p in backend.prompts_after(1)), "the cancelled decode kept sampling"
    _engine_still_serves(engine, serial)


def test_a_sync_caller_that_times_out_is_dropped(serial):
    def before(index, requests):
        time.sleep(0.05)

    backend = FaultyBackend(before=before)
    engine = MFSEngine(backend, SETTINGS)
    others = engine.submit_prompts(QUESTIONS[1:])
    with pytest.raises(TimeoutError, match=r"1 MFS decode\(s\) did not finish within timeout=0.08 s"):
        engine.decode([QUESTIONS[0]], timeout=0.08)
    calls_at_timeout = len(backend.calls)
    _others_match_serial(others, QUESTIONS[1:], serial, None)
    later = backend.prompts_after(calls_at_timeout)
    assert not any(p.startswith(QUESTIONS[0]) for p in later), "the timed-out decode kept sampling"
    _engine_still_serves(engine, serial)


def test_the_worker_thread_dying_fails_its_decodes_and_a_new_worker_serves(serial):
    def fault(index, requests, outputs):
        if index == 2:
            raise WorkerKilled("injected: the worker thread dies")
        return outputs

    engine = MFSEngine(FaultyBackend(fault), SETTINGS)
    futures = engine.submit_prompts(QUESTIONS)
    for future in futures:
        with pytest.raises(RuntimeError, match=r"the engine worker died during this decode: WorkerKilled"):
            future.result(timeout=WAIT)
    assert engine._scheduler.queued == 0  # noqa: SLF001
    _engine_still_serves(engine, serial)


def test_abandoning_a_finished_future_is_a_no_op(serial):
    engine = MFSEngine(FaultyBackend(), SETTINGS)
    future = engine.submit_prompts([QUESTIONS[0]])[0]
    result = future.result(timeout=WAIT)
    future.abandon()
    assert comparable(future.result()) == comparable(result) == serial[QUESTIONS[0]]

    gate = threading.Event()
    gated = MFSEngine(FaultyBackend(before=lambda index, requests: gate.wait(timeout=WAIT)), SETTINGS)
    pending = gated.submit_prompts([QUESTIONS[1]])[0]
    pending.abandon()  # the decode cannot have finished: its first backend call waits on the gate
    gate.set()
    with pytest.raises(CancelledError):
        pending.result(timeout=WAIT)
