"""``mfs bench`` end to end on the bundled demo model: files, table, resume.

Mechanics only (rows, columns, files, resume, token counts): the answers of the demo model
are not asserted here.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("sklearn")
pytest.importorskip("matplotlib")

from typer.testing import CliRunner  # noqa: E402

from mfs_core.models import demo_model_path  # noqa: E402
from mfs_core.cli import app  # noqa: E402
from mfs_core.engine import MFSEngine  # noqa: E402
from mfs_core.settings import MFSSettings  # noqa: E402

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "demo_heldout.json"

pytestmark = pytest.mark.skipif(not (demo_model_path() / "config.json").is_file(),
                                reason="the demo model is not in mfs_core/demo/model")


def _bench(out: Path, methods: str, *extra: str) -> object:
    args = ["bench", "--dataset", str(FIXTURE), "--kind", "demo", "--methods", methods, "--limit", "2",
            "--step-beam-size", "2", "--num-rollouts", "2", "--max-steps", "2", "--max-answer-tokens", "16",
            "--out", str(out), "--no-progress", "--backend", "transformers", *extra]
    return CliRunner().invoke(app, args)


def _check_run(out: Path, labels: list[str], output: str) -> list[dict]:
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert sorted((r["method"], r["index"]) for r in records) == sorted((m, i) for m in labels for i in (0, 1))
    assert all(r["error"] is None and r["output_tokens"] > 0 and r["prompt_tokens"] > 0 for r in records)
    assert all(r["flops"] == 6.0 * r["output_tokens"] * json.loads((out / "config.json").read_text())["num_parameters"]
               for r in records)
    with (out / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [row["method"] for row in rows] == labels
    assert {"accuracy", "mean_output_tokens", "total_flops", "wall_seconds", "questions_per_second",
            "engine_overhead"} <= set(rows[0])
    results = json.loads((out / "results.json").read_text())
    assert [m["method"] for m in results["methods"]] == labels
    assert all(m["questions"] == 2 and m["mean_output_tokens"] > 0 and m["wall_seconds"] > 0 for m in results["methods"])
    assert results["meta"]["step_beam_size"] == 2 and results["meta"]["num_rollouts"] == 2
    assert (out / "accuracy_vs_flops.png").read_bytes()[:4] == b"\x89PNG"
    table = (out / "results.md").read_text()
    for label in labels:
        assert f"| {label}" in table and f"| {label}" in output
    assert "engine overhead:" in output and "outside backend.generate" in output
    return records


def test_bench_runs_resumes_and_writes_every_file(tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = _bench(out, "cot,sc,phi,mfs")
    assert first.exit_code == 0, first.output
    records = _check_run(out, ["cot", "sc", "phi", "mfs"], first.output)
    assert "MFS output tokens / CoT output tokens" in first.output
    ks = {r["sc_k"] for r in records if r["method"] == "sc"}
    cot = sum(r["output_tokens"] for r in records if r["method"] == "cot")
    mfs = sum(r["output_tokens"] for r in records if r["method"] == "mfs")
    assert ks == {max(1, round(mfs / cot))}
    # A rerun finds every question recorded: no generate call, same records.
    engine = MFSEngine.from_settings(MFSSettings(step_beam_size=2, num_rollouts=2))
    calls = engine.stats.generate_calls
    lines = (out / "records.jsonl").read_text()
    again = _bench(out, "cot,sc,phi,mfs")
    assert again.exit_code == 0, again.output
    assert engine.stats.generate_calls == calls
    assert (out / "records.jsonl").read_text() == lines


@pytest.mark.slow
def test_bench_ablations_and_lambda_sweep(tmp_path: Path) -> None:
    out = tmp_path / "ablations"
    result = _bench(out, "cot,mfs,mfs-no-stop:mfs:early_stopping=false,mfs-no-prune:mfs:width_pruning=false", "--lambda-sweep", "0.4,1.2", "--sc-k", "3")
    assert result.exit_code == 0, result.output
    _check_run(out, ["cot", "mfs", "mfs-no-stop", "mfs-no-prune", "mfs@lambda1=0.4", "mfs@lambda1=1.2"], result.output)


def test_bench_reports_bad_input_without_a_traceback(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["bench", "--dataset", "mmlu", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "unknown dataset 'mmlu'" in result.output
    result = CliRunner().invoke(app, ["bench", "--dataset", str(FIXTURE), "--methods", "cot,beam", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "unknown method 'beam'; known: " in result.output


def test_sigterm_finishes_the_question_in_flight_and_the_rerun_completes(tmp_path: Path) -> None:
    """The first SIGTERM starts no further question: the bench reports what it recorded and a rerun resumes."""
    import os
    import signal
    import threading
    import time

    out = tmp_path / "run"
    records_path = out / "records.jsonl"
    handler_before = signal.getsignal(signal.SIGTERM)

    def terminate_after_the_first_record() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if records_path.is_file() and records_path.read_text().count("\n") >= 1:
                os.kill(os.getpid(), signal.SIGTERM)  # handled in the main thread, where CliRunner runs the bench
                return
            time.sleep(0.01)

    watcher = threading.Thread(target=terminate_after_the_first_record, daemon=True)
    watcher.start()
    stopped = _bench(out, "cot,mfs", "--limit", "4", "--concurrency", "1")
    watcher.join()
    assert stopped.exit_code == 0, stopped.output
    records = [json.loads(line) for line in records_path.read_text().splitlines()]
    # cot on question 0, and at most question 1 if it started before the signal landed; mfs never started
    assert [r["index"] for r in records] in ([0], [0, 1]) and {r["method"] for r in records} == {"cot"}
    assert all(r["error"] is None for r in records)
    assert f"stopped by SIGTERM with {len(records)} of 8 records; the same command resumes" in stopped.output
    assert signal.getsignal(signal.SIGTERM) == handler_before  # the handler is gone once the bench returned
    resumed = _bench(out, "cot,mfs", "--limit", "4", "--concurrency", "1")
    assert resumed.exit_code == 0, resumed.output
    again = [json.loads(line) for line in records_path.read_text().splitlines()]
    assert again[:len(records)] == records  # kept, not redone
    assert sorted((r["method"], r["index"]) for r in again) == sorted((m, i) for m in ("cot", "mfs") for i in range(4))
