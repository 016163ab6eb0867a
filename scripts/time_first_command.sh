#!/bin/bash
# Times README's first command (set-up + mfs ask) on a fresh clone of this checkout, in a fresh venv,
# with an empty pip cache. Usage: bash scripts/time_first_command.sh  (prints rc= and seconds=)
set -u
rm -rf /tmp/fresh && mkdir -p /tmp/fresh
git clone -q "$(git rev-parse --show-toplevel)" /tmp/fresh/mfs
python3 -m venv /tmp/fresh/venv
source /tmp/fresh/venv/bin/activate
export PIP_CACHE_DIR=/tmp/fresh/pipcache   # empty
cd /tmp/fresh/mfs
cmd=$(python3 - <<'PY'
import re
text = open("README.md").read()
blocks = re.findall(r"```bash\n(.*?)\n```", text, re.S)
print(blocks[0])
PY
)
echo "command: $cmd"
start=$(date +%s.%N)
bash -c "$cmd"
rc=$?
end=$(date +%s.%N)
echo "rc=$rc seconds=$(python3 -c "print(round($end-$start,1))")"
du -sh /tmp/fresh/venv
