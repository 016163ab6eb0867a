"""The benchmark runner, report and plot against a scripted backend: records, resume, table."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from mfs_core.bench.datasets import DATASETS, demo_heldout_path, load_dataset
from mfs_core.bench.prompts import SYSTEM_PROMPTS, render_example
from mfs_core.bench.report import format_table, summarize, token_ratio, write_csv, write_json
from mfs_core.bench.runner import RECORDS_FILE, auto_sc_k, load_records, parse_methods, run_bench
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings
from mfs_core.types import GenerationRequest
from tests.bench_demo import demo_set, seven_script
from tests.scripted import ScriptedBackend, continuation

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
END = "<end_of_reasoning>"


def _engine() -> tuple[MFSEngine, ScriptedBackend]:
    backend = ScriptedBackend(seven_script)
    return MFSEngine(backend, MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=2)), backend


def test_parse_methods_and_lambda_sweep() -> None:
    methods = parse_methods("cot, sc,mfs", lambda_sweep=[0.4, 1.2])
    assert [m.label for m in methods] == ["cot", "sc", "mfs", "mfs@lambda1=0.4", "mfs@lambda1=1.2"]
    assert methods[3].decoder == "mfs" and methods[3].overrides == (("prune_lambda", 0.4),)
    with pytest.raises(ValueError, match=r"^unknown method 'beam'; known: \['cot', "):
        parse_methods("cot,beam")
    with pytest.raises(ValueError, match="without repeats"):
        parse_methods("cot,cot")


def test_run_writes_one_record_per_question_and_method(tmp_path: Path) -> None:
    engine, backend = _engine()
    data = demo_set()
    methods = parse_methods("cot,sc,mfs,mfs-no-prune:mfs:width_pruning=false")  # phi: see test_phi.py and the integration test
    records = run_bench(engine, data, methods, tmp_path, sc_k="auto", concurrency=3)
    assert len(records) == 4 * len(data.examples)
    assert {(r["method"], r["index"]) for r in records} == {(m.label, i) for m in methods for i in range(4)}
    on_disk = load_records(tmp_path / RECORDS_FILE)
    assert on_disk == json.loads(json.dumps(records))
    # Only the first question's gold is 7.
    for m in methods:
        assert [r["correct"] for r in records if r["method"] == m.label] == [True, False, False, False]
    cot = [r for r in records if r["method"] == "cot"]
    assert all(r["output_tokens"] == 7 and r["prediction"] == "7" for r in cot)
    assert all(r["flops"] == 6.0 * r["output_tokens"] * backend.num_parameters for r in records)
    # sc ran last with k = round(mean MFS tokens / mean CoT tokens).
    mfs_tokens = [r["output_tokens"] for r in records if r["method"] == "mfs"]
    k = round(sum(mfs_tokens) / len(mfs_tokens) / 7)
    assert [r["method"] for r in on_disk][-4:] == ["sc"] * 4
    assert {r["sc_k"] for r in records if r["method"] == "sc"} == {k}
    assert all(r["output_tokens"] == 7 * k for r in records if r["method"] == "sc")
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["dataset"] == "demo_heldout" and config["kind"] == "demo"


def test_an_interrupted_run_resumes_without_redoing_finished_questions(tmp_path: Path) -> None:
    engine, backend = _engine()
    data = demo_set()
    methods = parse_methods("cot,mfs")
    run_bench(engine, data, methods, tmp_path, concurrency=2)
    lines = (tmp_path / RECORDS_FILE).read_text().splitlines()
    assert len(lines) == 8
    # Keep 5 records and a torn sixth, as a killed process leaves them.
    (tmp_path / RECORDS_FILE).write_text("\n".join(lines[:5]) + "\n" + lines[5][:20])
    calls_before = len(backend.requests)
    resumed = run_bench(engine, data, methods, tmp_path, concurrency=2, warmup=False)
    assert len(resumed) == 8
    assert sorted((r["method"], r["index"]) for r in resumed) == sorted((m, i) for m in ("cot", "mfs") for i in range(4))
    redone = {(json.loads(line)["method"], json.loads(line)["index"]) for line in lines[5:]}
    assert len(redone) == 3 and {m for m, _ in redone} == {"mfs"}  # cot finished first
    new_requests = backend.requests[calls_before:]
    asked = {ex.index for ex in data.examples for r in new_requests if ex.question in r.prompt}
    assert asked == {i for _, i in redone}
    assert not any(r.greedy for r in new_requests)
    # A third run has nothing left to do.
    calls_before = backend.num_calls
    again = run_bench(engine, data, methods, tmp_path, concurrency=2)
    assert backend.num_calls == calls_before and len(again) == 8


def test_resume_extends_to_more_questions_and_refuses_another_run(tmp_path: Path) -> None:
    engine, backend = _engine()
    run_bench(engine, demo_set(limit=2), parse_methods("cot"), tmp_path)
    # An untimed warm-up decode (8 tokens), then both questions in one generate call.
    assert backend.num_calls == 2
    assert [(len(call), call[0].max_tokens) for call in backend.calls] == [(1, 8), (2, 512)]
    records = run_bench(engine, demo_set(), parse_methods("cot"), tmp_path, warmup=False)
    assert [r["index"] for r in records] == [0, 1, 2, 3]
    assert len(backend.requests) == 1 + 4  # questions 2 and 3 only were added
    other = MFSSettings(step_beam_size=3, num_rollouts=2, max_steps=2)
    with pytest.raises(ValueError, match=r"holds a run with other \['settings'\]"):
        run_bench(engine, demo_set(), parse_methods("cot"), tmp_path, settings=other)


def test_a_failing_decode_is_recorded_and_counted_wrong(tmp_path: Path) -> None:
    def script(request: GenerationRequest) -> list:
        if "Anna" in request.prompt:
            msg = "prompt too long for the scripted model"
            raise ValueError(msg)
        return seven_script(request)

    backend = ScriptedBackend(script)
    engine = MFSEngine(backend, MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=2))
    records = run_bench(engine, demo_set(), parse_methods("cot"), tmp_path, concurrency=4)
    failed = [r for r in records if r["error"]]
    assert [r["index"] for r in failed] == [1]
    assert "prompt too long" in failed[0]["error"] and failed[0]["correct"] is False
    rows = summarize(records, ["cot"])
    assert rows[0].errors == 1 and rows[0].questions == 4 and rows[0].correct == 1


def test_auto_sc_k_needs_cot_and_mfs() -> None:
    records = [{"method": "cot", "output_tokens": 10}, {"method": "cot", "output_tokens": 20},
               {"method": "mfs", "output_tokens": 140}, {"method": "mfs", "output_tokens": 160}]
    assert auto_sc_k(records) == 10  # 150 / 15
    with pytest.raises(ValueError, match="needs finished 'mfs' questions"):
        auto_sc_k(records[:2])


def test_summary_table_csv_json_and_plot(tmp_path: Path) -> None:
    records = [
        {"method": "cot", "correct": True, "output_tokens": 10, "prompt_tokens": 5, "flops": 60.0,
         "elapsed_seconds": 1.0, "generate_seconds": 0.75},
        {"method": "cot", "correct": False, "output_tokens": 30, "prompt_tokens": 7, "flops": 180.0,
         "elapsed_seconds": 3.0, "generate_seconds": 2.25},
        {"method": "mfs", "correct": True, "output_tokens": 200, "prompt_tokens": 50, "flops": 1200.0,
         "elapsed_seconds": 2.0, "generate_seconds": 1.0, "error": None},
    ]
    rows = summarize(records, ["cot", "mfs", "phi"])
    assert [r.method for r in rows] == ["cot", "mfs"]  # phi has no records
    cot, mfs = rows
    assert (cot.accuracy, cot.mean_output_tokens, cot.mean_prompt_tokens, cot.total_flops) == (0.5, 20.0, 6.0, 240.0)
    assert (cot.wall_seconds, cot.questions_per_second, cot.engine_overhead) == (4.0, 0.5, 0.25)
    assert (mfs.accuracy, mfs.engine_overhead) == (1.0, 0.5)
    assert token_ratio(rows) == 10.0
    table = format_table(rows)
    # Wilson 95% interval of 1/2 (z = 1.95996): 0.5 ± z·sqrt(1/8 + z²/16) / (1 + z²/2) = 0.5 ± 0.40547.
    assert (cot.accuracy_low, cot.accuracy_high) == pytest.approx((0.094531, 0.905469), abs=1e-6)
    assert table.splitlines()[2] == "| cot | 50.0 | 9.5-90.5 | 1/2 | 20.0 | 2.400e+02 | 4.0 | 0.500 | 25.0 |"
    write_csv(rows, tmp_path / "r.csv")
    with (tmp_path / "r.csv").open() as f:
        got = list(csv.DictReader(f))
    assert [g["method"] for g in got] == ["cot", "mfs"] and float(got[1]["total_flops"]) == 1200.0
    write_json(rows, tmp_path / "r.json", {"dataset": "demo"})
    payload = json.loads((tmp_path / "r.json").read_text())
    assert payload["meta"] == {"dataset": "demo"} and payload["methods"][0]["accuracy"] == 0.5
    pytest.importorskip("matplotlib")
    from mfs_core.bench.plot import plot_accuracy_vs_flops

    png = plot_accuracy_vs_flops(rows, tmp_path / "plots" / "a.png", title="t")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_paper_set_prompts_follow_the_release() -> None:
    backend = ScriptedBackend(seven_script)
    settings = MFSSettings()
    data = load_dataset("gsm8k", data_dir=FIXTURES / "data", limit=1)
    prompt = render_example(data.examples[0], backend, settings)
    question = data.examples[0].question
    assert question.startswith("The question: Janet") and question.endswith("\nPlease directly output the reasoning steps.\n")
    # the template's newline after the assistant role is kept (the releases right-strip it)
    assert prompt == (f"<s><|system|>\n{SYSTEM_PROMPTS['gsm']}\n<|user|>\n{question}\n<|assistant|>\n"
                      "The reasoning steps are:\n\n")
    assert SYSTEM_PROMPTS["gsm"].count("<end_of_reasoning>") == 9  # the instruction and 8 examples
    reclor = load_dataset("reclor", data_dir=FIXTURES / "data", limit=1).examples[0]
    assert reclor.question.startswith("Passage: ") and "\nQuestion: " in reclor.question
    assert [line[:3] for line in reclor.question.splitlines()[-4:]] == ["A. ", "B. ", "C. ", "D. "]
    demo = demo_set(limit=1).examples[0]
    assert render_example(demo, backend, settings) == f"<s><|user|>\n{demo.question}\n<|assistant|>\nThe reasoning steps are:\n\n"


def test_dataset_names_and_errors(tmp_path: Path) -> None:
    assert {spec.kind for spec in DATASETS.values()} == {"gsm", "math", "gpqa", "reclor", "logiqa", "arc"}
    assert load_dataset("gsm", data_dir=FIXTURES / "data").name == "gsm8k"
    assert load_dataset("arc", data_dir=FIXTURES / "data").examples[3].target == "2"
    assert demo_heldout_path().parts[-2:] == ("demo", "heldout.json")
    with pytest.raises(FileNotFoundError, match="--data-dir"):
        load_dataset("math500", data_dir=tmp_path)
    with pytest.raises(ValueError, match="unknown dataset 'mmlu'"):
        load_dataset("mmlu")
    bad = tmp_path / "gsm_bad.json"
    bad.write_text(json.dumps([{"question": "x"}]))
    with pytest.raises(ValueError, match=r"question 0 lacks the field\(s\) \['input', 'target'\]"):
        load_dataset(str(bad))
    with pytest.raises(ValueError, match="limit must be >= 1"):
        load_dataset("gsm8k", data_dir=FIXTURES / "data", limit=0)


def test_offset_skips_questions_and_keeps_their_file_index() -> None:
    data = load_dataset("demo", offset=200, limit=3)
    assert [ex.index for ex in data.examples] == [200, 201, 202] and data.total == 500
    assert load_dataset("demo", offset=499).examples[0].index == 499
    with pytest.raises(ValueError, match="offset must be >= 0, got -1"):
        load_dataset("demo", offset=-1)
    with pytest.raises(ValueError, match="offset must be below the 500 questions"):
        load_dataset("demo", offset=500)


def test_bench_default_backend_is_vllm_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from mfs_core.bench.cli import default_backend

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "vllm" else real(name, *a))
    assert default_backend() == "vllm"
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
    assert default_backend() == "transformers"


def test_multiple_choice_questions_vote_by_their_options_and_the_trigger_keeps_to_their_labels(tmp_path: Path) -> None:
    def script(request: GenerationRequest) -> list:
        if request.grammar is not None:  # the trigger's request: the first label the grammar allows
            return [continuation(json.loads(request.grammar.remote)["format"]["elements"][0]["value"])]
        return [continuation("It is cold.\nThe answer is: 0 degrees", stop_reason=END)] * request.n

    backend = ScriptedBackend(script)
    engine = MFSEngine(backend, MFSSettings(step_beam_size=2, num_rollouts=2, max_steps=1, answer_trigger="\nThe answer is:"))
    data = load_dataset("arc", data_dir=FIXTURES / "data", limit=4)
    records = run_bench(engine, data, parse_methods("cot,phi"), tmp_path, concurrency=4)
    labels = {ex.index: ex.question.split("\n")[-4:] for ex in data.examples}
    trigger_requests = [r for call in backend.calls for r in call if r.grammar is not None]
    assert len(trigger_requests) == 4 + 4 * 2  # cot: one path per question; phi: M = 2 paths
    for record in records:
        first_label = labels[record["index"]][0].split(")")[0].lstrip("(")
        assert record["answer"] == record["prediction"] == first_label, record  # "0 degrees" chose no option
        assert record["text"].endswith("The answer is:" + " " + first_label)


def test_a_model_that_dies_mid_run_leaves_its_questions_to_the_rerun(tmp_path: Path) -> None:
    from mfs_core.errors import BackendDeadError
    from tests.dying_backend import DyingBackend

    class DiesAtItsFourthCall(DyingBackend):  # the warm-up, questions 0 and 1 (CoT: one call each), then death
        def generate(self, requests):
            if self.attempts == 3:
                self.die()
            return super().generate(requests)

    data, methods = demo_set(), parse_methods("cot")
    with pytest.raises(BackendDeadError, match="engine core died"):
        run_bench(MFSEngine(DiesAtItsFourthCall(), MFSSettings()), data, methods, tmp_path, concurrency=1)
    kept = load_records(tmp_path / RECORDS_FILE)
    assert [r["index"] for r in kept] == [0, 1]  # two answered; the one the death took down is not recorded
    assert all(r["error"] is None for r in kept)
    records = run_bench(MFSEngine(DyingBackend(), MFSSettings()), data, methods, tmp_path, concurrency=1)
    assert [r["index"] for r in records] == [0, 1, 2, 3] and all(r["error"] is None for r in records)
