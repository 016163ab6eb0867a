"""The decoder registry (:mod:`mfs_core.decoders.registry`): one entry says what a
decoder is and can do, and the engine, the tool planning and the bench read it from there."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mfs_core.bench.runner import BenchMethod, is_self_consistency, method_settings, parse_method, parse_methods
from mfs_core.decoders import DECODER_SPECS, DECODERS, DecoderSpec, decoder_spec, get_decoder, register_decoder
from mfs_core.decoders import registry
from mfs_core.decoders.mfs import decode_mfs
from mfs_core.settings import MFSSettings
from mfs_core.engine.requests import check_answer_key
from tests.scripted import synthetic_model
from mfs_core.engine import MFSEngine

SETTINGS = MFSSettings(device="cpu", step_beam_size=2, num_rollouts=2, max_steps=2, max_step_tokens=8,
                       max_answer_tokens=16, seed=0)
PUBLIC_METHODS = ["mfs", "cot", "sc", "esc", "deepconf", "phi", "mfs-paper"]


@pytest.fixture
def scratch_registry():
    """The registry as it is, restored in place after the test (what a test registers does not leak)."""
    saved = dict(registry._REGISTRY)
    yield registry.SPECS
    registry._REGISTRY.clear()
    registry._REGISTRY.update(saved)


def test_the_library_registers_the_real_methods_and_reads_their_kinds_from_the_registry() -> None:
    # a fresh interpreter: this session's other tests may have registered research variants
    command = [sys.executable, "-c", "from mfs_core.decoders import DECODER_SPECS; print(','.join(DECODER_SPECS))"]
    fresh = subprocess.run(command, check=True, capture_output=True, text=True, timeout=120).stdout.split()
    assert fresh == [",".join(PUBLIC_METHODS)] and list(DECODER_SPECS)[:7] == PUBLIC_METHODS
    library = {name: DECODER_SPECS[name] for name in PUBLIC_METHODS}
    assert [name for name in library if is_self_consistency(name)] == ["sc"]
    assert [name for name, spec in library.items() if spec.final == "select"] == ["phi"]
    assert [name for name, spec in library.items() if not spec.votes] == ["cot", "phi"]
    assert set(DECODERS) == set(DECODER_SPECS) and len(DECODERS) == len(DECODER_SPECS)
    assert all(DECODERS[name] is spec.factory is get_decoder(name) for name, spec in DECODER_SPECS.items())


def test_a_registered_variant_is_its_base_decoder_with_its_overrides_and_its_own_name(scratch_registry) -> None:
    spec = register_decoder(DecoderSpec("mfs-test-no-stop", decode_mfs, overrides={"early_stopping": False}))
    assert decoder_spec("mfs-test-no-stop") is spec and "mfs-test-no-stop" in DECODERS  # the live views see it
    assert spec.decode is decode_mfs and dict(spec.overrides) == {"early_stopping": False} and spec.votes
    engine = MFSEngine(synthetic_model(), SETTINGS)
    plain, variant = (engine.decode(["Tom has 3 apples. He buys 4 more. How many now?"], method=m)[0]
                      for m in ("mfs", "mfs-test-no-stop"))
    assert plain.method == "mfs" and variant.method == "mfs-test-no-stop"
    assert plain.search_settings["early_stopping"] is True and variant.search_settings["early_stopping"] is False
    assert decoder_spec("mfs").factory is decode_mfs and not decoder_spec("mfs").overrides
    assert parse_methods("mfs,mfs-test-no-stop")[1] == BenchMethod("mfs-test-no-stop", "mfs-test-no-stop")


def test_registering_refuses_a_taken_name_unless_replacing_and_bad_names(scratch_registry) -> None:
    first = register_decoder(DecoderSpec("mfs-x", decode_mfs, overrides={"max_steps": 3}))
    assert register_decoder(DecoderSpec("mfs-x", decode_mfs, overrides={"max_steps": 3})) == first  # the same: no-op
    with pytest.raises(ValueError, match=r"^decoder 'mfs-x' is registered already; pass replace=True to replace it$"):
        register_decoder(DecoderSpec("mfs-x", decode_mfs, overrides={"max_steps": 4}))
    with pytest.raises(ValueError, match=r"^decoder 'mfs' is registered already"):
        register_decoder(DecoderSpec("mfs", decode_mfs, overrides={"max_steps": 4}))
    replaced = register_decoder(DecoderSpec("mfs-x", decode_mfs, overrides={"max_steps": 4}), replace=True)
    assert dict(decoder_spec("mfs-x").overrides) == {"max_steps": 4} and decoder_spec("mfs-x") is replaced
    with pytest.raises(ValueError, match=r"^a decoder name must be non-empty without whitespace, got 'my mfs'$"):
        register_decoder(DecoderSpec("my mfs", decode_mfs))


def test_a_new_variant_is_one_entry_and_bad_entries_fail_at_definition() -> None:
    spec = DecoderSpec("mfs-wide", decode_mfs, overrides={"step_beam_size": 3})
    assert spec.factory.__name__ == "decode_mfs_wide" and spec.final == "vote" and not spec.samples
    with pytest.raises(ValueError, match=r"unknown MFSSettings fields in overrides of 'mfs-x': \['beam'\]"):
        DecoderSpec("mfs-x", decode_mfs, overrides={"beam": 3})
    with pytest.raises(ValueError, match=r"^final must be 'vote', 'select' or 'text', got 'best' \(decoder 'x'\)$"):
        DecoderSpec("x", decode_mfs, final="best")
    with pytest.raises(TypeError):
        DECODERS["mine"] = decode_mfs  # read-only: register through register_decoder
    with pytest.raises(TypeError):
        DECODER_SPECS["mine"] = spec


def test_a_bench_method_is_a_name_or_a_labelled_decoder_with_settings_changed() -> None:
    assert parse_method("mfs") == BenchMethod("mfs", "mfs")
    wide = parse_method("mfs-m8:mfs:step_beam_size=8;num_rollouts=8")
    assert wide == BenchMethod("mfs-m8", "mfs", (("num_rollouts", 8), ("step_beam_size", 8)))
    assert method_settings(SETTINGS, wide).step_beam_size == 8 and method_settings(SETTINGS, wide).num_rollouts == 8
    assert parse_method("sc-t:sc:temperature=0.5;sc_round_size=null").overrides == (
        ("sc_round_size", None), ("temperature", 0.5))
    with pytest.raises(ValueError, match=r"^method 'w:sc:num_rollouts=4': method 'sc' does not take 'num_rollouts'; "
                                         r"its parameters: num_samples, sc_round_size, "):
        parse_method("w:sc:num_rollouts=4")
    with pytest.raises(ValueError, match=r"^method 'w:sc:num_samples=0': num_samples=0: .*1 <= num_samples <= 4096$"):
        parse_method("w:sc:num_samples=0")
    with pytest.raises(ValueError, match=r"^unknown method 'mfz' in 'w:mfz'; known: \["):
        parse_method("w:mfz")
    with pytest.raises(ValueError, match=r"^method 'w:mfs:beam=8': 'beam' is not a setting \(MFSSettings field\)$"):
        parse_method("w:mfs:beam=8")
    with pytest.raises(ValueError, match=r"^method 'w:mfs:max_steps': override 'max_steps' is not field=value$"):
        parse_method("w:mfs:max_steps")
    with pytest.raises(ValueError, match=r"without repeats, got \['mfs', 'mfs'\]"):
        parse_methods("mfs,mfs:mfs:max_steps=2")


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
    assert method_settings(base, BenchMethod(label="sc", decoder="sc"), 16).num_samples == 16
    assert method_settings(base, BenchMethod(label="esc", decoder="esc"), 16).step_beam_size == 4


def test_settings_change_one_way_validated_and_without_reading_the_environment(monkeypatch) -> None:
    """``MFSSettings.changed``: what the engine, the variants and the bench change settings
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
                                                             method="mfs-paper")  # the variant changes settings
    assert result.method == "mfs-paper" and result.search_settings["share_foresight"] is False
