"""``mfs bench`` names its missing optional dependencies before it loads a model or decodes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mfs_core.bench.requirements import missing_bench_dependencies
from mfs_core.cli import app
from mfs_core.engine import MFSEngine

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "demo_heldout.json"


def _without(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in modules else real(name, *a))


def test_only_what_the_run_uses_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    _without(monkeypatch, "scipy", "sklearn", "matplotlib", "tqdm")
    assert missing_bench_dependencies(["cot", "mfs"], plot=False, progress=False) == ["scipy"]
    assert missing_bench_dependencies(["phi", "mfs"], plot=True, progress=True) == [
        "scipy", "scikit-learn", "matplotlib", "tqdm"]


def test_bench_stops_before_decoding_with_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _without(monkeypatch, "scipy", "matplotlib")

    def no_model(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was loaded before the dependencies were checked")

    monkeypatch.setattr(MFSEngine, "from_settings", no_model)
    result = CliRunner().invoke(app, ["bench", "--dataset", str(FIXTURE), "--kind", "demo", "--methods", "cot,mfs",
                                      "--limit", "1", "--backend", "transformers", "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert errors == ['error: mfs bench needs scipy, matplotlib, not installed: pip install -e ".[bench]" in the clone '
                      '(or "mfs-decoding[bench]")']
    assert not (tmp_path / "records.jsonl").exists()
