"""The test tree's own conftest: its presence puts ``tests/`` on ``sys.path`` (pytest's prepend import mode), so
test modules import the shared helpers (``bounded``, ``scripted``, ...) by their bare names. The fixtures shared
with ``experiments/tests`` (the demo model's backend and engine) are in the repository root's ``conftest.py``."""

# Small search so the integration tests stay fast on 2 CPU cores (160 answer tokens hold a 4-operation
# solution of the v3 demo model with its check lines; 64 cut them short); the root conftest's demo_engine uses it.
SMALL_SEARCH = {"step_beam_size": 2, "num_rollouts": 3, "max_steps": 4, "max_answer_tokens": 160, "max_step_tokens": 24}
