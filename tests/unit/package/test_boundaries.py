"""Import boundaries: the engine never imports LangChain or LlamaIndex, nor heavy libraries
until a backend needs them."""

import subprocess
import sys


def _modules_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return {line.split(".")[0] for line in out.splitlines()}


def test_mfs_core_imports_no_framework_and_no_heavy_library():
    loaded = _modules_after("import mfs_core, mfs_core.engine, mfs_core.decoders, mfs_core.cli, mfs_core.call")
    for forbidden in ("langchain_core", "langchain", "llama_index", "torch", "transformers", "vllm", "httpx"):
        assert forbidden not in loaded, forbidden


def test_public_api():
    import mfs_core

    assert set(mfs_core.__all__) >= {"MFSEngine", "MFSSettings", "DecodeResult", "GenerationRequest", "Continuation"}
    for name in mfs_core.__all__:
        assert getattr(mfs_core, name) is not None
