"""``tuner versions``: one experiment on two vLLM installs, compared by engine starts in mirrored order.

``installs`` (finding and starting an install), ``start_pairs`` (the start-level estimate and the bisection) and
``run``
(the command).
"""

from tuner.versions.installs import Install, probe
from tuner.versions.run import compare_installs

__all__ = ["Install", "compare_installs", "probe"]
