"""The test tree's own conftest: its presence puts ``tests/`` on ``sys.path`` (pytest's prepend import mode), so
test modules import the shared helpers (``bounded``, ``scripted``, ...) by their bare names. The fixtures shared
with ``experiments/tests`` (the demo model's backend and engine) are in the repository root's ``conftest.py``."""
