"""The decoder registry (:mod:`mfs_core.decoders.registry`, issue 45 item 5): one entry says what a
decoder is and can do, and the engine, the tool planning and the bench read it from there."""

from __future__ import annotations

import pytest

from mfs_core.bench.runner import _VOTING_DECODERS, SC_DECODERS, BenchMethod, method_settings
from mfs_core.decoders import DECODER_SPECS, DECODERS, SELECTING_DECODERS, DecoderSpec, decoder_spec, get_decoder
from mfs_core.decoders.mfs import decode_mfs
from mfs_core.settings import MFSSettings
from mfs_core.engine.requests import check_answer_key
from tests.scripted import synthetic_model
from mfs_core.engine import MFSEngine

SETTINGS = MFSSettings(device="cpu", step_beam_size=2, num_rollouts=2, max_steps=2, max_step_tokens=8,
                       max_answer_tokens=16, seed=0)


def test_the_lists_that_used_to_be_written_by_hand_come_from_the_registry() -> None:
    # What bench/runner.py and decoders/__init__.py listed by hand before the registry, name by name.
    assert SC_DECODERS == {"sc", "sc-rollout-temperature"}
    assert SELECTING_DECODERS == {"phi", "phi-release"}
    assert _VOTING_DECODERS == SC_DECODERS | {
        "esc", "deepconf", "mfs", "mfs-no-stop", "mfs-no-prune", "mfs-converged-rollouts", "mfs-paper",
        "mfs-reuse-only", "mfs-share-reuse", "mfs-shared", "mfs-rollout-vote", "mfs-answer-stop", "mfs-min-paths",
        "mfs-same-temperature", "mfs-weighted-vote", "mfs-weighted-answer-stop",
    }
    assert set(DECODERS) == set(DECODER_SPECS) == _VOTING_DECODERS | SELECTING_DECODERS | {"cot"}
    assert all(DECODERS[name] is spec.factory is get_decoder(name) for name, spec in DECODER_SPECS.items())


def test_a_variant_is_its_base_decoder_with_its_overrides_and_its_own_name() -> None:
    spec = decoder_spec("mfs-no-stop")
    assert spec.decode is decode_mfs and dict(spec.overrides) == {"early_stopping": False} and spec.votes
    engine = MFSEngine(synthetic_model(), SETTINGS)
    plain, variant = (engine.decode(["Tom has 3 apples. He buys 4 more. How many now?"], method=m)[0]
                      for m in ("mfs", "mfs-no-stop"))
    assert plain.method == "mfs" and variant.method == "mfs-no-stop"
    assert plain.search_settings["early_stopping"] is True and variant.search_settings["early_stopping"] is False
    assert decoder_spec("mfs").factory is decode_mfs and not decoder_spec("mfs").overrides


def test_a_new_variant_is_one_entry_and_bad_entries_fail_at_definition() -> None:
    spec = DecoderSpec("mfs-wide", decode_mfs, overrides={"step_beam_size": 3})
    assert spec.factory.__name__ == "decode_mfs_wide" and spec.final == "vote" and not spec.samples
    with pytest.raises(ValueError, match=r"unknown MFSSettings fields in overrides of 'mfs-x': \['beam'\]"):
        DecoderSpec("mfs-x", decode_mfs, overrides={"beam": 3})
    with pytest.raises(ValueError, match=r"^final must be 'vote', 'select' or 'text', got 'best' \(decoder 'x'\)$"):
        DecoderSpec("x", decode_mfs, final="best")
    with pytest.raises(TypeError):
        DECODERS["mine"] = decode_mfs  # read-only: register through DecoderSpec entries


def test_unknown_names_and_keys_a_selecting_decoder_cannot_vote_by_are_refused() -> None:
    with pytest.raises(ValueError, match=r"^unknown decoding method 'mfz'; known: \["):
        decoder_spec("mfz")

    class ActionKey:  # an action vote: no answer_choices
        pass

    class OptionKey:
        answer_choices = ("A", "B")

    check_answer_key("phi", None)
    check_answer_key("phi", OptionKey())
    check_answer_key("mfs", ActionKey())
    with pytest.raises(ValueError, match=r"^decoder 'phi' cannot vote over actions"):
        check_answer_key("phi", ActionKey())


def test_the_bench_sets_k_only_for_self_consistency() -> None:
    base = MFSSettings(step_beam_size=4)
    assert method_settings(base, BenchMethod(label="sc", decoder="sc"), 16).step_beam_size == 16
    assert method_settings(base, BenchMethod(label="esc", decoder="esc"), 16).step_beam_size == 4


def test_settings_change_one_way_validated_and_without_reading_the_environment(monkeypatch) -> None:
    """``MFSSettings.changed`` (issue 45 item 2): what the engine, the variants and the bench change settings
    with; pydantic-settings' sources (environment, ``.env``) are never consulted, ranges still are."""
    base = MFSSettings(step_beam_size=2)

    def no_sources(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("settings sources read during a change")

    monkeypatch.setattr(MFSSettings, "_settings_build_values", no_sources)
    changed = base.changed(seed=3, early_stopping=False)
    assert (changed.seed, changed.early_stopping, changed.step_beam_size) == (3, False, 2) and base.seed == 0
    assert base.changed() is base
    with pytest.raises(ValueError, match="step_beam_size"):
        base.changed(step_beam_size=0)
    with pytest.raises(TypeError, match="step_beam"):
        base.changed(step_beam=3)
    (result,) = MFSEngine(synthetic_model(), SETTINGS).decode(["Tom has 3 apples. He buys 4 more. How many now?"],
                                                             method="mfs-no-stop")  # the variant changes settings
    assert result.method == "mfs-no-stop"
