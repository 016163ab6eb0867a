"""mfs_core: the Martingale Foresight Sampling decoding engine.

The engine and settings are the public entry points::

    from mfs_core import MFSEngine, MFSSettings
    engine = MFSEngine.from_settings(MFSSettings(step_beam_size=4, num_rollouts=4))
    result = engine.decode(["Tom has 3 apples. He buys 4 more. How many apples now?"])[0]

This package imports neither LangChain nor LlamaIndex, and no heavy model library until a
backend is built.
"""

from mfs_core.engine import EngineStats, MFSEngine
from mfs_core.errors import MFSError
from mfs_core.settings import DEMO_MODEL, MFSSettings
from mfs_core.types import Candidate, Continuation, DecodeResult, GenerationRequest, StepTrace

__all__ = [
    "DEMO_MODEL",
    "Candidate",
    "Continuation",
    "DecodeResult",
    "EngineStats",
    "GenerationRequest",
    "MFSEngine",
    "MFSError",
    "MFSSettings",
    "StepTrace",
]
__version__ = "0.1.0"
