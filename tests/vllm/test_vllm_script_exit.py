"""A script that builds ``ChatMFS`` on vLLM, invokes it and ends without closing anything exits
cleanly: the model's engines are closed at interpreter exit (``weakref.finalize`` in
:class:`mfs_core.call.EngineSource`), so vLLM's engine-core process stops with it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

SCRIPT = textwrap.dedent('''
    from langchain_mfs import ChatMFS

    if __name__ == "__main__":
        chat = ChatMFS(backend="vllm", step_beam_size=2, num_rollouts=2, max_steps=1, max_answer_tokens=16, seed=0,
                       model_kwargs={"dtype": "float32", "kv_cache_gib": 1.0, "max_step_tokens": 8,
                                     "vllm_kwargs": {"enforce_eager": True}})
        print("answer:", chat.invoke("Tom has 3 apples. Then Tom buys 4 more apples. How many apples does Tom have now?").content, flush=True)
''')


def test_a_script_that_builds_chatmfs_on_vllm_exits(tmp_path) -> None:
    script = tmp_path / "ask.py"
    script.write_text(SCRIPT)
    start = time.monotonic()
    root = Path(__file__).resolve().parents[2]  # the checkout's packages, installed or not
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env)
    try:
        out, err = process.communicate(timeout=420)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate(timeout=30)
        raise AssertionError(f"the script did not exit within 420 s: {out[-500:]} {err[-1500:]}") from None
    print(f"\nexit status {process.returncode} after {time.monotonic() - start:.0f} s; {out.strip()[-200:]}")
    assert process.returncode == 0, err[-2000:]
    assert "answer: " in out
