#!/usr/bin/env bash
# GPU check of the transformers backend on CUDA with the bundled demo model (tests/gpu), then a
# broader pass of the transformers backend's integration tests under the machine's own torch and
# transformers (those tests' fixtures pin device="cpu"; tests/gpu repeats their key checks on CUDA).
#
# Meant for a GPU machine that has torch and transformers but lacks this package's pure-Python
# dependencies: wheels for them (pydantic, pydantic-settings, pytest-socket, pytest-asyncio...) are
# installed from .whl/ into /tmp/site when that folder is there. Elsewhere (no .whl/, no GPU) it runs
# the same tests with what is installed, and the gpu tests skip.
#
#   bash scripts/gpu_check.sh            # log in $OUT/gpu_check.log (OUT defaults to /tmp)
#   GPU_CHECK_BROAD=0 bash scripts/gpu_check.sh   # tests/gpu only
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp}
LOG="$OUT/gpu_check.log"
: >"$LOG"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

main() {
# The carried wheels are for Python 3.12 (the GPU image's python3); elsewhere use what is installed.
if compgen -G ".whl/*.whl" >/dev/null && python3 -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))'; then
    echo "== installing carried wheels into /tmp/site"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || { echo "wheel install failed"; exit 3; }
    export PYTHONPATH="/tmp/site:$PWD"
else
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi

echo "== machine"
nvidia-smi -L 2>/dev/null || echo "(no nvidia-smi)"
python3 - <<'EOF'
import sys
import torch, transformers, pydantic, pydantic_settings, pytest
print("python", sys.version.split()[0], sys.executable)
print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
print("transformers", transformers.__version__, "pydantic", pydantic.__version__,
      "pydantic-settings", pydantic_settings.__version__, "pytest", pytest.__version__)
import mfs_core
print("mfs_core", mfs_core.__version__, mfs_core.__file__)
EOF

# pytest-timeout is in the GPU image, not necessarily here: a per-test limit only where it is.
TIMEOUT=()
python3 -c "import pytest_timeout" 2>/dev/null && TIMEOUT=(--timeout 180)

status=0
echo "== tests/gpu (-m gpu)"
python3 -m pytest -q -p no:cacheprovider -m gpu -rs --durations=8 "${TIMEOUT[@]}" tests/gpu || status=1

if [ "${GPU_CHECK_BROAD:-1}" != 0 ]; then
    echo "== transformers backend and engine integration tests (device='cpu' fixtures, this machine's torch/transformers)"
    timeout 300 python3 -m pytest -q -p no:cacheprovider -x -rs "${TIMEOUT[@]}" \
        tests/integration/test_transformers_backend.py tests/integration/test_prefix_sharing.py \
        tests/integration/test_engine_demo.py tests/integration/test_transformers_deprecations.py || status=1
fi
echo "== gpu_check status $status"
return $status
}

main 2>&1 | tee -a "$LOG"
exit "${PIPESTATUS[0]}"
