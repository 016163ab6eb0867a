"""A benchmark run stopped by SIGTERM: no new question starts, the ones in flight are recorded, a rerun resumes."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import pytest

from mfs_core.bench.drain import drain_on_sigterm
from mfs_core.bench.runner import RECORDS_FILE, parse_methods, run_bench
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings
from mfs_core.types import GenerationRequest
from tests.bench_demo import demo_set, seven_script
from tests.scripted import ScriptedBackend


def test_a_set_stop_drains_the_questions_in_flight_and_a_rerun_resumes(tmp_path: Path) -> None:
    stop = threading.Event()

    def script(request: GenerationRequest) -> list:
        if "Anna" in request.prompt:  # question 1, decoded in the same call as question 0
            stop.set()
        return seven_script(request)

    backend = ScriptedBackend(script)
    engine = MFSEngine(backend, MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=2))
    data = demo_set()
    records = run_bench(engine, data, parse_methods("cot,mfs"), tmp_path, concurrency=2, stop=stop)
    # Questions 0 and 1 were in flight when the stop came: both finished and were recorded;
    # questions 2 and 3 never started and mfs was skipped.
    assert [(r["method"], r["index"]) for r in records] == [("cot", 0), ("cot", 1)]
    lines = (tmp_path / RECORDS_FILE).read_text().splitlines()
    assert [json.loads(line)["index"] for line in lines] == [0, 1]
    assert not any(q.question in r.prompt for q in data.examples[2:] for r in backend.requests)
    assert [r["correct"] for r in records] == [True, False]  # only question 0's gold is 7

    calls_before = len(backend.requests)
    resumed = run_bench(engine, data, parse_methods("cot,mfs"), tmp_path, concurrency=2, warmup=False)
    assert sorted((r["method"], r["index"]) for r in resumed) == sorted(
        (m, i) for m in ("cot", "mfs") for i in range(4))
    asked = {ex.index for ex in data.examples for r in backend.requests[calls_before:] if ex.question in r.prompt}
    assert asked == {0, 1, 2, 3}  # cot on 2 and 3, mfs on all four; cot on 0 and 1 not redone
    redone_cot = [r for r in backend.requests[calls_before:] if r.greedy]
    assert {ex.index for ex in data.examples for r in redone_cot if ex.question in r.prompt} == {2, 3}


def test_a_stop_set_before_the_run_decodes_nothing(tmp_path: Path) -> None:
    backend = ScriptedBackend(seven_script)
    engine = MFSEngine(backend, MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=2))
    stop = threading.Event()
    stop.set()
    assert run_bench(engine, demo_set(), parse_methods("cot"), tmp_path, stop=stop) == []
    assert backend.num_calls == 0  # not even the warm-up


def test_the_first_sigterm_sets_the_event_and_the_second_exits() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as exit_info, drain_on_sigterm() as stop:
        assert not stop.is_set()
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.wait(5.0)  # the process is alive and the block goes on
        os.kill(os.getpid(), signal.SIGTERM)
        threading.Event().wait(5.0)  # the handler raises here
    assert exit_info.value.code == 128 + signal.SIGTERM == 143
    assert signal.getsignal(signal.SIGTERM) == before


def test_outside_the_main_thread_no_handler_is_installed() -> None:
    before = signal.getsignal(signal.SIGTERM)
    seen: list[object] = []

    def worker() -> None:
        given = threading.Event()
        with drain_on_sigterm(given) as stop:
            seen.extend([stop is given, signal.getsignal(signal.SIGTERM)])

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen == [True, before]
