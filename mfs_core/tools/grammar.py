"""Former home of :mod:`mfs_core.grammar` (grammars now sit at the bottom, beside :mod:`mfs_core.types`,
so the decoders and the backends need not import the tools package).

Kept so that ``from mfs_core.tools.grammar import ...`` keeps working.
"""

from mfs_core.grammar import *  # noqa: F403
from mfs_core.grammar import __all__, _xgrammar  # noqa: F401
