"""ESC and DeepConf through every interface that names a method: LangChain, LlamaIndex, ``mfs bench``,
``mfs serve``'s request bodies and ``mfs ask``'s method check (scripted backend, no model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from langchain_mfs import MFSLLM as LangChainLLM
from llamaindex_mfs import MFSLLM as LlamaIndexLLM
from mfs_core.bench.datasets import load_dataset
from mfs_core.bench.runner import RECORDS_FILE, load_records, parse_methods, run_bench
from mfs_core.cli import CLIError, check_method, print_result
from mfs_core.engine import MFSEngine
from mfs_core.settings import MFSSettings
from mfs_core.types import GenerationRequest
from tests.scripted import ScriptedBackend, continuation

END = "<end_of_reasoning>"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SETTINGS = MFSSettings(esc_window=2, esc_max_samples=4, deepconf_warmup=2, deepconf_max_traces=4, deepconf_window=2)


def seven(request: GenerationRequest) -> list:
    """Every sample answers 7 in 3 tokens; with top_logprobs, confidences 1, 2, 3 (score 1.5 at w = 2)."""
    confidences = [1.0, 2.0, 3.0] if request.top_logprobs else None
    return [continuation("x = 7\nThe answer is: \\boxed{7}.", num_tokens=3, mean_logprob=-0.2,
                         confidences=confidences, stop_reason=END) for _ in range(request.n)]


def engine() -> tuple[MFSEngine, ScriptedBackend]:
    backend = ScriptedBackend(seven)
    return MFSEngine(backend, SETTINGS), backend


def test_langchain_method_field_and_call_keyword() -> None:
    mfs_engine, backend = engine()
    llm = LangChainLLM(engine=mfs_engine, method="esc")
    info = llm.generate(["What is 3 + 4?"]).generations[0][0].generation_info
    assert (info["method"], info["answer"], info["stop_reason"], info["votes"]) == ("esc", "7", "unanimous_window", {"7": 2})
    assert info["trace"][0]["note"] == "window 1: 2 sampled, answers 7 ×2; unanimous: stop"
    assert [r.n for r in backend.requests] == [2]
    info = llm.generate(["What is 3 + 4?"], method="deepconf").generations[0][0].generation_info
    assert (info["method"], info["stop_reason"], info["output_tokens"]) == ("deepconf", "consensus", 6)
    assert backend.requests[-1].top_logprobs == 20


def test_llamaindex_method_field() -> None:
    mfs_engine, backend = engine()
    response = LlamaIndexLLM(engine=mfs_engine, method="deepconf").complete("What is 3 + 4?")
    extra = response.additional_kwargs
    assert (extra["method"], extra["answer"], extra["vote_share"], extra["stop_reason"]) == ("deepconf", "7", 1.0, "consensus")
    assert backend.requests[0].n == 2 and backend.requests[0].top_logprobs == 20


def test_bench_parses_and_scores_both_as_voting_methods(tmp_path: Path) -> None:
    mfs_engine, _ = engine()
    data = load_dataset(str(FIXTURES / "demo_heldout.json"), kind="demo")
    methods = parse_methods("esc,deepconf")
    assert [(m.label, m.decoder) for m in methods] == [("esc", "esc"), ("deepconf", "deepconf")]
    records = run_bench(mfs_engine, data, methods, tmp_path, concurrency=2)
    assert load_records(tmp_path / RECORDS_FILE) == json.loads(json.dumps(records))
    for method, tokens in (("esc", 2 * 3), ("deepconf", 2 * 3)):
        mine = [r for r in records if r["method"] == method]
        assert [r["correct"] for r in mine] == [True, False, False, False]  # only the first question's gold is 7
        assert all(r["output_tokens"] == tokens and r["completion_predictions"] == ["7", "7"] for r in mine)
    assert all(r["completion_weights"] == [1.5, 1.5] for r in records if r["method"] == "deepconf")
    assert all("completion_weights" not in r for r in records if r["method"] == "esc")


def test_serve_bodies_take_both_methods() -> None:
    pytest.importorskip("starlette", reason="the serve extra is not installed")
    from mfs_core.serve.schemas import parse_chat

    for method, field in (("esc", "esc_window"), ("deepconf", "deepconf_window")):
        call = parse_chat({"messages": [{"role": "user", "content": "2 + 3 = ?"}], "method": method, field: 3},
                          SETTINGS, served="mfs-demo", max_n=8, max_messages=4)
        assert call.method == method and getattr(call.settings, field) == 3


def test_mfs_ask_checks_the_method_and_prints_its_settings() -> None:
    check_method("esc")
    check_method("deepconf")
    with pytest.raises(CLIError, match=r"unknown decoding method 'deep-conf'; known: \[.*'deepconf'.*'esc'"):
        check_method("deep-conf")
    mfs_engine, _ = engine()
    result = mfs_engine.decode(["What is 3 + 4?"], method="esc")[0]
    printed = print_result("What is 3 + 4?", result, SETTINGS)
    assert "search (ESC: windows of w = 2, at most 4 samples, T = 0.7):" in printed
    assert "reasoning (the sample the vote chose):\n   x = 7\n   The answer is: \\boxed{7}." in printed
    assert "step 0: window 1: 2 sampled, answers 7 ×2; unanimous: stop" in printed


def test_the_settings_defaults_ranges_and_cross_checks() -> None:
    import pydantic

    s = MFSSettings.from_values({})
    assert (s.esc_window, s.esc_max_samples) == (4, 16)
    assert (s.deepconf_top_logprobs, s.deepconf_window, s.deepconf_warmup, s.deepconf_keep, s.deepconf_batch,
            s.deepconf_chunk_tokens, s.deepconf_consensus, s.deepconf_max_traces) == (20, 32, 4, 0.9, None, 32, 0.95, 16)
    assert s.deepconf_batch_size == 4
    assert MFSSettings.from_values({"deepconf_warmup": 3}).deepconf_batch_size == 3
    assert MFSSettings.from_values({"deepconf_warmup": 3, "deepconf_batch": 2}).deepconf_batch_size == 2
    for values, message in (
        ({"esc_window": 0}, "esc_window=0: Input should be greater than or equal to 1; allowed: 1 <= esc_window <= 1024"),
        ({"deepconf_keep": 1.5}, "deepconf_keep=1.5: Input should be less than or equal to 1; allowed: "
                                 "0.0 < deepconf_keep <= 1.0"),
        ({"deepconf_consensus": 0.0}, "allowed: 0.0 < deepconf_consensus <= 1.0"),
        ({"deepconf_batch": 0}, "allowed: 1 <= deepconf_batch <= 1024"),
        ({"esc_window": 20}, "esc_max_samples (16) must be at least esc_window (20)"),
        ({"deepconf_warmup": 32}, "deepconf_max_traces (16) must be at least deepconf_warmup (32)"),
    ):
        with pytest.raises(pydantic.ValidationError) as caught:
            MFSSettings(**values)
        assert message in str(caught.value) and "\n" not in str(caught.value), values
    assert GenerationRequest(prompt="p").top_logprobs == 0
    with pytest.raises(ValueError, match="top_logprobs must be >= 0, got -1"):
        GenerationRequest(prompt="p", top_logprobs=-1)
